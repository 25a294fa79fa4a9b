package projections

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/protocol"
)

// Test fixtures for the registry: a harness that builds events the way the
// bridge does (a frame, protocol.Parse, an envelope) and applies them in
// order, with their replies taken from the outbox.

const testNode = "registry://global.aglx.net"

// testPeer is the peer registry the harness takes registry.sync from.
const testPeer = "registry://peer.local"

var (
	regT0            = time.Date(2025, 10, 29, 18, 0, 0, 0, time.UTC)
	testZoneSecretA  = []byte("research-hub secret: 0123456789abcdef")
	testZoneSecretB  = []byte("strict-zone secret, also for tests!!")
	testTokenKey     = []byte("token key for tests: fedcba9876543210")
	testZonesDefault = []Zone{
		{ID: "research-hub", Secret: testZoneSecretA, MinReputation: 0.5, Role: "member"},
		{ID: "strict-zone", Secret: testZoneSecretB, MinReputation: 0.9, Role: "elder"},
	}
)

// nodeKey is the test node's key, the same in every process: FuzzFolds'
// seeds hold mints signed with it, made in the fuzzing coordinator and
// folded in its workers, where a key made at random per process refused
// every one (helper-90).
var nodeKey crypto.Signer = ed25519.NewKeyFromSeed([]byte("aglx projections test node key!!"))

func newEd25519(t *testing.T) crypto.Signer {
	t.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func newRSA(t *testing.T) crypto.Signer {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, protocol.RSAKeyBitsMin)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func pubText(t *testing.T, k crypto.Signer) string {
	t.Helper()
	s, err := protocol.MarshalPublicKey(k.Public())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type harness struct {
	t      *testing.T
	cfg    RegistryConfig
	r      *Registry
	out    *Outbox
	seq    uint64
	events []*Event
	// peerKeys are the keys bound for registry peers by syncFrame.
	peerKeys map[string]crypto.Signer
}

// syncFrame is a registry.sync from peer with entries (a JSON list's
// inside), signed with a key bound to peer, as every sync must be: the
// first sync from a peer binds one, at at.
func (h *harness) syncFrame(peer, entries string, at time.Time) *protocol.Frame {
	h.t.Helper()
	k := h.peerKeys[peer]
	if k == nil {
		k = newEd25519(h.t)
		h.bindKey(peer, k, at)
		if h.peerKeys == nil {
			h.peerKeys = map[string]crypto.Signer{}
		}
		h.peerKeys[peer] = k
	}
	return signed(h.t, k, frame(peer, testNode, protocol.TypeRegistrySync, fmt.Sprintf(`{"entries":[%s],"timestamp":%q}`, entries, ts(at))))
}

func newHarness(t *testing.T, edit ...func(*RegistryConfig)) *harness {
	t.Helper()
	h := &harness{t: t}
	h.cfg = RegistryConfig{NodeURI: testNode, NodeKey: nodeKey, Zones: testZonesDefault, TokenKey: testTokenKey, SyncFrom: []string{testPeer}}
	for _, f := range edit {
		f(&h.cfg)
	}
	h.out = NewOutbox()
	cfg := h.cfg
	cfg.Outbox = h.out
	h.r = NewRegistry(cfg)
	return h
}

// frame builds a TCP frame with an unindented body.
func frame(from, to, typ, body string) *protocol.Frame {
	f := &protocol.Frame{Transport: protocol.TransportTCP, Body: []byte(body)}
	f.Headers = append(f.Headers, protocol.Header{Name: "FROM", Value: from})
	if to != "" {
		f.Headers = append(f.Headers, protocol.Header{Name: "TO", Value: to})
	}
	f.Headers = append(f.Headers, protocol.Header{Name: "TYPE", Value: typ}, protocol.Header{Name: "CONTENT-TYPE", Value: "application/json"})
	return f
}

// signed signs f with k and returns it.
func signed(t *testing.T, k crypto.Signer, f *protocol.Frame) *protocol.Frame {
	t.Helper()
	if err := protocol.SignFrame(k, f); err != nil {
		t.Fatal(err)
	}
	return f
}

// hmacSigned signs f with a zone secret.
func hmacSigned(t *testing.T, secret []byte, f *protocol.Frame) *protocol.Frame {
	t.Helper()
	sig, err := protocol.SignHMAC(secret, f.From(), f.To(), f.Type(), f.Value(protocol.HeaderCredits), f.Body)
	if err != nil {
		t.Fatal(err)
	}
	if f.Body, err = protocol.SetSignature(f.Body, sig); err != nil {
		t.Fatal(err)
	}
	return f
}

// event turns a frame into the event the runner would give the registry.
func (h *harness) event(f *protocol.Frame, at time.Time) *Event {
	h.t.Helper()
	msg, err := protocol.Parse(f)
	if err != nil {
		h.t.Fatalf("Parse(%s) = %v", f.Type(), err)
	}
	h.seq++
	id := fmt.Sprintf("01JTEST%019d", h.seq)
	transport := events.TransportTLS
	if f.Transport == protocol.TransportUDP {
		transport = events.TransportUDP
	}
	env := &events.Envelope{ID: id, MsgID: id, Seq: h.seq, Type: msg.Info.Name, From: msg.From.String(), To: msg.To.String(),
		Transport: transport, Declared: f.Transport, Peer: "127.0.0.1:40001", ReceivedAt: at,
		Headers: append([]protocol.Header(nil), f.Headers...), Body: append([]byte(nil), f.Body...)}
	return &Event{Envelope: env, Msg: msg}
}

// apply applies f received at `at` and returns the event and its reply.
func (h *harness) apply(f *protocol.Frame, at time.Time) (*Event, Reply, bool) {
	h.t.Helper()
	e := h.event(f, at)
	h.applyEvent(e)
	rep, ok, _ := h.out.Take(e.Seq)
	return e, rep, ok
}

func (h *harness) applyEvent(e *Event) {
	h.events = append(h.events, e)
	h.r.Apply(e)
}

// mustReply applies f and checks the reply's TYPE and STATUS.
func (h *harness) mustReply(f *protocol.Frame, at time.Time, typ string, status protocol.Status) Reply {
	h.t.Helper()
	_, rep, ok := h.apply(f, at)
	if !ok {
		h.t.Fatalf("%s from %s: no reply, want %s %d", f.Type(), f.From(), typ, status)
	}
	if rep.Type != typ || rep.Status != status {
		h.t.Fatalf("%s from %s: reply %s %d %s, want %s %d", f.Type(), f.From(), rep.Type, rep.Status, rep.Body, typ, status)
	}
	return rep
}

func (h *harness) snapshot() []byte {
	h.t.Helper()
	b, err := h.r.Snapshot()
	if err != nil {
		h.t.Fatal(err)
	}
	return b
}

// replay applies every event so far to a fresh registry of the same
// configuration and returns it.
func (h *harness) replay() *Registry {
	cfg := h.cfg
	cfg.Outbox = NewOutbox()
	r := NewRegistry(cfg)
	for _, e := range h.events {
		r.Apply(e)
	}
	return r
}

// field reads a top-level member of a reply body.
func field(t *testing.T, body []byte, name string) any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("reply body %s: %v", body, err)
	}
	return m[name]
}

func str(t *testing.T, body []byte, name string) string {
	t.Helper()
	s, _ := field(t, body, name).(string)
	return s
}

// ts writes a time as a body timestamp.
func ts(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// register sends an unsigned registry.update for uri.
func (h *harness) register(uri string, ttl int, at time.Time) Reply {
	h.t.Helper()
	body := fmt.Sprintf(`{"agent_name":%q,"agent_type":"worker","capabilities":["data.analyze"],"status":"READY","ttl":%d}`, uri, ttl)
	return h.mustReply(frame(uri, testNode, protocol.TypeRegistryUpdate, body), at, protocol.TypeRegistryAck, protocol.StatusOK)
}

// bindKey binds k to uri with an auth.request.
func (h *harness) bindKey(uri string, k crypto.Signer, at time.Time) Reply {
	h.t.Helper()
	body := fmt.Sprintf(`{"agent_id":"a-1","public_key":%q,"timestamp":%q}`, pubText(h.t, k), ts(at))
	return h.mustReply(signed(h.t, k, frame(uri, testNode, protocol.TypeAuthRequest, body)), at, protocol.TypeAuthResponse, protocol.StatusOK)
}

// readReference decodes one frame of testdata/reference.
func readReference(t *testing.T, name string) *protocol.Frame {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join("..", "testdata", "reference", name+"-*.aglx"))
	if err != nil || len(matches) != 1 {
		t.Fatalf("reference frame %s: %v %v", name, matches, err)
	}
	b, err := os.ReadFile(matches[0])
	if err != nil {
		t.Fatal(err)
	}
	f, err := protocol.NewDecoder(bytes.NewReader(b), protocol.DecoderOptions{}).Decode()
	if err != nil {
		t.Fatalf("decode %s: %v", matches[0], err)
	}
	return f
}

func mustContain(t *testing.T, what, s, sub string) {
	t.Helper()
	if !strings.Contains(s, sub) {
		t.Errorf("%s = %q, want it to contain %q", what, s, sub)
	}
}

// keyedCarolURI is the agent keyedCarol registers.
const keyedCarolURI = "agent://carol.local"

// keyedCarol is a registry where Carol has bound an Ed25519 key (at regT0)
// and registered with a signed update (a second later): the start of the
// zone tests of an agent with a key. at is regT0 moved by d.
func keyedCarol(t *testing.T) (h *harness, k crypto.Signer, at func(d time.Duration) time.Time) {
	t.Helper()
	h = newHarness(t)
	at = func(d time.Duration) time.Time { return regT0.Add(d) }
	k = newEd25519(t)
	h.bindKey(keyedCarolURI, k, at(0))
	h.mustReply(signed(t, k, frame(keyedCarolURI, testNode, protocol.TypeRegistryUpdate,
		fmt.Sprintf(`{"agent_name":"Carol","ttl":3600,"timestamp":%q}`, ts(at(time.Second))))), at(time.Second), protocol.TypeRegistryAck, protocol.StatusOK)
	return h, k, at
}
