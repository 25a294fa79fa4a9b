package projections

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aglx/ledger/protocol"
)

// TestRSANodeKeySignsDeterministically binds an RSA agent key at a node
// whose own key is RSA, and checks that a replay signs the auth.response
// with the same bytes (RSA PKCS #1 v1.5 is deterministic), so that a reply
// is a function of the log like the rest of the state.
func TestRSANodeKeySignsDeterministically(t *testing.T) {
	const dave = "agent://dave.local"
	nk, kd := newRSA(t), newRSA(t)
	h := newHarness(t, func(c *RegistryConfig) { c.NodeKey = nk })
	e := h.event(signed(t, kd, frame(dave, testNode, protocol.TypeAuthRequest,
		fmt.Sprintf(`{"agent_id":"d","public_key":%q,"timestamp":%q}`, pubText(t, kd), ts(regT0)))), regT0)
	h.applyEvent(e)
	rep, _, _ := h.out.Take(e.Seq)
	if rep.Status != protocol.StatusOK {
		t.Fatalf("auth.request: %d %s", rep.Status, rep.Body)
	}
	if err := protocol.Verify(nk.Public(), testNode, dave, protocol.TypeAuthResponse, "", rep.Body); err != nil {
		t.Errorf("auth.response does not verify with the node's key: %v", err)
	}
	r2 := h.replay()
	if again, _, _ := r2.cfg.Outbox.Take(e.Seq); !bytes.Equal(again.Body, rep.Body) {
		t.Errorf("replayed auth.response differs:\n got %s\nwant %s", again.Body, rep.Body)
	}
	// A signed update with the RSA key.
	h.mustReply(signed(t, kd, frame(dave, testNode, protocol.TypeRegistryUpdate,
		fmt.Sprintf(`{"agent_name":"Dave","timestamp":%q}`, ts(regT0)))), regT0, protocol.TypeRegistryAck, protocol.StatusOK)
}

// countingSigner counts the signatures made with its key.
type countingSigner struct {
	crypto.Signer
	n atomic.Int64
}

func (c *countingSigner) Sign(rand io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	c.n.Add(1)
	return c.Signer.Sign(rand, digest, opts)
}

// TestTheFoldSignsNoAuthResponse: the node signs an auth.response when the
// reply is taken for its sender, never while folding: a node signature in
// the fold cost 6.5 ms with an RSA node key, live and again for every
// auth.request in the log at each start, while every reply waited
// (helper-87).
func TestTheFoldSignsNoAuthResponse(t *testing.T) {
	nk := &countingSigner{Signer: newRSA(t)}
	h := newHarness(t, func(c *RegistryConfig) { c.NodeKey = nk })
	var seqs []uint64
	for i := range 5 {
		k, who := newEd25519(t), fmt.Sprintf("agent://a%d.local", i)
		e := h.event(signed(t, k, frame(who, testNode, protocol.TypeAuthRequest,
			fmt.Sprintf(`{"agent_id":"a","public_key":%q,"timestamp":%q}`, pubText(t, k), ts(regT0)))), regT0)
		h.applyEvent(e)
		seqs = append(seqs, e.Seq)
	}
	h.replay()
	if n := nk.n.Load(); n != 0 {
		t.Fatalf("folding and replaying 5 auth.requests made %d node signatures; want none until a reply is taken", n)
	}
	rep, _, _ := h.out.Take(seqs[0])
	if err := protocol.Verify(nk.Public(), testNode, "agent://a0.local", protocol.TypeAuthResponse, "", rep.Body); err != nil || nk.n.Load() != 1 {
		t.Fatalf("the reply taken: %v, %d signatures; want one that verifies", err, nk.n.Load())
	}
}

// TestAResendIsNotSignedAgain: a reply taken again (a resend answered
// from the outbox) is signed once, not at every take: a resend stores
// nothing and costs its sender nothing, and with an RSA node key each
// signature cost milliseconds (helper-89).
func TestAResendIsNotSignedAgain(t *testing.T) {
	nk := &countingSigner{Signer: newRSA(t)}
	h := newHarness(t, func(c *RegistryConfig) { c.NodeKey = nk })
	k := newEd25519(t)
	e := h.event(signed(t, k, frame("agent://a.local", testNode, protocol.TypeAuthRequest,
		fmt.Sprintf(`{"agent_id":"a","public_key":%q,"timestamp":%q}`, pubText(t, k), ts(regT0)))), regT0)
	h.applyEvent(e)
	var first []byte
	for i := range 20 {
		rep, ok, err := h.out.Take(e.Seq)
		if !ok || err != nil || rep.Type != protocol.TypeAuthResponse {
			t.Fatalf("Take = %+v %v %v", rep, ok, err)
		}
		if i == 0 {
			first = rep.Body
		} else if !bytes.Equal(rep.Body, first) {
			t.Fatalf("take %d differs from the first", i)
		}
	}
	if n := nk.n.Load(); n != 1 {
		t.Fatalf("20 takes of one reply made %d node signatures; want 1", n)
	}
}

// flakySigner fails its first signature.
type flakySigner struct {
	crypto.Signer
	n atomic.Int64
}

func (f *flakySigner) Sign(r io.Reader, d []byte, o crypto.SignerOpts) ([]byte, error) {
	if f.n.Add(1) == 1 {
		return nil, errors.New("signer temporarily unavailable")
	}
	return f.Signer.Sign(r, d, o)
}

// TestASignatureThatFailedIsTriedAgain: a reply whose signature could not
// be made is answered 503, which asks for the message again; the resend
// is signed then, not handed the same 503 for the rest of the window
// (helper-90).
func TestASignatureThatFailedIsTriedAgain(t *testing.T) {
	h := newHarness(t, func(c *RegistryConfig) { c.NodeKey = &flakySigner{Signer: newEd25519(t)} })
	k := newEd25519(t)
	e := h.event(signed(t, k, frame("agent://a.local", testNode, protocol.TypeAuthRequest,
		fmt.Sprintf(`{"agent_id":"a","public_key":%q,"timestamp":%q}`, pubText(t, k), ts(regT0)))), regT0)
	h.applyEvent(e)
	if rep, _, _ := h.out.Take(e.Seq); rep.Status != protocol.StatusUnavailable {
		t.Fatalf("the first take, the signer failing: %d %s; want 503", rep.Status, rep.Body)
	}
	if rep, _, _ := h.out.Take(e.Seq); rep.Type != protocol.TypeAuthResponse || rep.Status != protocol.StatusOK {
		t.Fatalf("the resend: %s %d %s; want the signed auth.response", rep.Type, rep.Status, rep.Body)
	}
}

func TestAuthRequestKeys(t *testing.T) {
	const erin = "agent://erin.local"
	weak, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(weak.Public())
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t)
	// A 1024-bit RSA key is refused before anything is checked.
	f := frame(erin, testNode, protocol.TypeAuthRequest, fmt.Sprintf(`{"agent_id":"e","public_key":%q,"timestamp":%q,"signature":"rsa-sha256:%s"}`,
		base64.StdEncoding.EncodeToString(der), ts(regT0), bytes.Repeat([]byte("ab"), 256)))
	rep := h.mustReply(f, regT0, protocol.TypeAuthResponse, protocol.StatusBadRequest)
	mustContain(t, "reason", string(rep.Body), "2048")

	// The node's own URI binds no key.
	k := newEd25519(t)
	nodeReq := signed(t, k, frame(testNode, testNode, protocol.TypeAuthRequest,
		fmt.Sprintf(`{"agent_id":"n","public_key":%q,"timestamp":%q}`, pubText(t, k), ts(regT0))))
	h.mustReply(nodeReq, regT0, protocol.TypeAuthResponse, protocol.StatusForbidden)

	// A renewal with the same key extends expires and binds nothing new.
	h.bindKey(erin, k, regT0)
	rep = h.bindKey(erin, k, regT0.Add(time.Hour))
	if got, want := str(t, rep.Body, "expires"), ts(regT0.Add(time.Hour+AuthValidity)); got != want {
		t.Errorf("renewed expires = %q, want %q", got, want)
	}
	if d, _ := h.r.Agent(erin); len(d.Keys) != 1 || !d.Keys[0].VerifiedUntil.Equal(regT0.Add(time.Hour+AuthValidity)) {
		t.Errorf("Agent(erin).Keys = %+v, want one key verified until the renewal's expiry", d.Keys)
	}
}

// TestKeyHistory checks that old events still verify with the key they
// were signed with, and how old_key_id must name the current key.
func TestKeyHistory(t *testing.T) {
	const fay = "agent://fay.local"
	k1, k2, k3 := newEd25519(t), newEd25519(t), newEd25519(t)
	h := newHarness(t)
	at := func(d time.Duration) time.Time { return regT0.Add(d) }
	h.bindKey(fay, k1, at(0))
	old, rep, _ := h.apply(signed(t, k1, frame(fay, testNode, protocol.TypeRegistryUpdate,
		fmt.Sprintf(`{"agent_name":"Fay","timestamp":%q}`, ts(at(time.Second))))), at(time.Second))
	if rep.Type != protocol.TypeRegistryAck {
		t.Fatalf("update: %s %s", rep.Type, rep.Body)
	}
	rot := func(oldID, newID, pub string, when time.Duration) *protocol.Frame {
		return frame(fay, testNode, protocol.TypeKeyRotate, fmt.Sprintf(
			`{"old_key_id":%q,"new_key_id":%q,"public_key":%q,"timestamp":%q}`, oldID, newID, pub, ts(at(when))))
	}
	// The first key had no name; the first rotation names it.
	h.mustReply(signed(t, k1, rot("key-1", "key-2", pubText(t, k2), 2*time.Second)), at(2*time.Second), protocol.TypeAck, protocol.StatusOK)
	// The event signed with k1 before the rotation still checks out.
	if v := h.r.Authenticate(old); v.Auth != AuthValid || v.KeyID != protocol.KeyID(k1.Public()) {
		t.Errorf("Authenticate(old event) = %+v, want valid with k1", v)
	}
	steps := []struct {
		name   string
		f      *protocol.Frame
		status protocol.Status
	}{
		{"old_key_id names another key", signed(t, k2, rot("key-1", "key-3", pubText(t, k3), 3*time.Second)), protocol.StatusConflict},
		{"new_key_id reused", signed(t, k2, rot("key-2", "key-1", pubText(t, k3), 3*time.Second)), protocol.StatusConflict},
		{"old_key_id by fingerprint", signed(t, k2, rot(protocol.KeyID(k2.Public()), "key-3", pubText(t, k3), 3*time.Second)), protocol.StatusOK},
	}
	for _, s := range steps {
		_, rep, _ := h.apply(s.f, at(3*time.Second))
		if rep.Status != s.status {
			t.Errorf("%s: %s %d %s, want %d", s.name, rep.Type, rep.Status, rep.Body, s.status)
		}
	}
	d, _ := h.r.Agent(fay)
	if len(d.Keys) != 3 || d.Keys[0].Name != "key-1" || d.Keys[1].Name != "key-2" || d.Keys[2].Name != "key-3" || !d.Keys[2].Current {
		t.Errorf("Agent(fay).Keys = %+v", d.Keys)
	}
}
