package projections

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/protocol"
)

// FuzzFolds feeds arbitrary frames, one after another, through the folds
// the node runs (NewFolds: registry, ledger, handshakes, reputation,
// stats), with and without the ledger's Warm, and through a save and a
// load of their state, and compares their snapshots. Arbitrary bytes never carry a valid signature, so the
// fuzzer reaches no key binding and moves no reputation score: those paths
// have their own property tests. None may panic: the runner does not recover, so a fold that panics on an
// event would crash the node at every start, when it replays that event.
// A frame that does not parse reaches the folds as the log would give it,
// with no message (anything a NATS client can publish on the log's
// subjects may be in the log).
func FuzzFolds(f *testing.F) {
	files, err := filepath.Glob("../testdata/reference/*.aglx")
	if err != nil || len(files) == 0 {
		f.Fatalf("reference frames: %v", err)
	}
	var all []byte
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		all = append(all, b...)
	}
	f.Add(all)
	// Twice over, so that credit and task messages come after accounts
	// exist and Warm has rows to read.
	f.Add(append(append([]byte(nil), all...), all...))
	// Signed messages whose signatures hold, so that the fuzzer starts
	// inside the paths a signature opens (key bindings, mints, signed
	// transfers, requests and their answers, rotations); a mutation of an
	// unsigned part (the ID, a header the signature does not cover) keeps
	// them valid. Without these it never got past a signature check.
	f.Add(signedSeed(f))
	f.Fuzz(func(t *testing.T, data []byte) {
		// Twice over, each from its own decoding (a fold must not depend
		// on another's changes to an event): once warming each stretch
		// first, as the runner does, and once not. Warm must change
		// nothing, and a fold must give the same state for the same
		// events, so the snapshots must match. The stretch length, 1 to
		// 128 like the runner's, comes from the input.
		stretch := 1
		if len(data) > 0 {
			stretch += int(data[0]) % 128
		}
		a, b := foldAll(t, fuzzEvents(data), stretch, true), foldAll(t, fuzzEvents(data), stretch, false)
		for i := range a {
			if !bytes.Equal(a[i], b[i]) {
				t.Fatalf("snapshot %d differs between a fold with Warm and one without:\n%s\n%s", i, a[i], b[i])
			}
		}
		// A third time with a stop and a start in between, at a point the
		// input chooses: the folds saved there must load as they were
		// (resumedFolds compares every field), and fold the rest to the
		// same state.
		evs := fuzzEvents(data)
		cut := len(data) % (len(evs) + 1)
		resumed, _ := resumedFolds(t, evs, cut, false)
		for i, p := range resumed.All() {
			got, err := p.(Snapshotter).Snapshot()
			if err != nil || !bytes.Equal(a[i], got) {
				t.Fatalf("snapshot %d differs after a stop and a start at event %d (err %v):\n%s\n%s", i, cut, err, a[i], got)
			}
		}
	})
}

// fuzzEvents decodes up to 128 frames from data into the events the log
// would hold, parsed or not.
func fuzzEvents(data []byte) []*Event {
	var evs []*Event
	dec := protocol.NewDecoder(bytes.NewReader(data), protocol.DecoderOptions{})
	at := time.Date(2025, 10, 29, 18, 0, 0, 0, time.UTC)
	for seq := uint64(1); seq <= 128; seq++ {
		fr, err := dec.Decode()
		var pe *protocol.Error
		if fr == nil || (err != nil && (!errors.As(err, &pe) || pe.Fatal)) || errors.Is(err, io.EOF) {
			break
		}
		msg, perr := protocol.Parse(fr)
		if perr != nil {
			msg = nil
		}
		id := fmt.Sprintf("01JFUZZ%019d", seq)
		env := &events.Envelope{ID: id, MsgID: id, Seq: seq, Type: fr.Type(), From: fr.From(), To: fr.To(),
			Transport: events.TransportTLS, Declared: fr.Transport, Peer: "127.0.0.1:40001", ReceivedAt: at,
			Headers: fr.Headers, Body: fr.Body}
		if msg != nil {
			env.Type, env.From, env.To = msg.Info.Name, msg.From.String(), msg.To.String()
		}
		evs = append(evs, &Event{Envelope: env, Msg: msg})
		at = at.Add(time.Duration(len(fr.Body)%90) * time.Minute)
	}
	return evs
}

// foldAll applies evs to the node's fresh folds (NewFolds: registry,
// ledger, handshakes, reputation, stats), in stretches of up to n (warmed
// first if warm), and returns their snapshots.
func foldAll(t *testing.T, evs []*Event, n int, warm bool) [][]byte {
	h := newHarness(t)
	cfg := h.cfg
	cfg.Outbox = h.out
	folds := NewFolds(cfg)
	for start := 0; start < len(evs); start += n {
		stretch := evs[start:min(start+n, len(evs))]
		if warm {
			folds.Credits.Warm(stretch)
		}
		for _, ev := range stretch {
			for _, p := range folds.All() {
				p.Apply(ev)
			}
		}
	}
	var snaps [][]byte
	for _, p := range folds.All() {
		b, err := p.(Snapshotter).Snapshot()
		if err != nil {
			t.Fatalf("snapshot: %v", err)
		}
		snaps = append(snaps, b)
	}
	return snaps
}

// signedSeed is a run of frames with signatures that hold when fuzzEvents
// decodes them: each is stamped with the receive time fuzzEvents will give
// it, which follows from the bodies before it. The node's mints are signed
// with the harness's node key (newHarness), which foldAll's folds check.
func signedSeed(tb testing.TB) []byte {
	key := func() crypto.Signer {
		_, k, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			tb.Fatal(err)
		}
		return k
	}
	a, b, rotated, peer := key(), key(), key(), key()
	const (
		alice = "agent://fz-alice.local"
		bob   = "agent://fz-bob.local"
	)
	type step struct {
		k                   crypto.Signer
		from, to, typ, body string // body: JSON members after the timestamp
		zoneSecret          []byte // signed with the zone's HMAC instead of k
	}
	steps := []step{
		{a, alice, testNode, protocol.TypeAuthRequest, fmt.Sprintf(`"agent_id":"fa","public_key":%q`, pubTextOf(a)), nil},
		{b, bob, testNode, protocol.TypeAuthRequest, fmt.Sprintf(`"agent_id":"fb","public_key":%q`, pubTextOf(b)), nil},
		{a, alice, testNode, protocol.TypeRegistryUpdate, `"agent_name":"Alice","capabilities":["data.analyze"],"ttl":86400`, nil},
		// A zone join with the zone's HMAC (testZonesDefault), while alice's
		// registration lasts; the fuzzer never reached it either.
		{nil, alice, testNode, protocol.TypeZoneJoin, `"zone_id":"research-hub","agent_id":"fa"`, testZoneSecretA},
		{nodeKey, testNode, alice, protocol.TypeCreditTransfer, `"amount":"100","currency":"AGLX","reason":"issuance","transaction_id":"fz-mint-1"`, nil},
		{a, alice, bob, protocol.TypeCreditTransfer, `"amount":"2.5","currency":"AGLX","reason":"lunch","transaction_id":"fz-tx-1"`, nil},
		{b, bob, alice, protocol.TypeCreditRequest, `"requested_amount":5,"purpose":"p"`, nil},
		{a, alice, bob, protocol.TypeCreditDeny, `"requested_amount":5,"reason":"no"`, nil},
		{b, bob, alice, protocol.TypeMentorRequest, `"task_id":"fz-t1"`, nil},
		{a, alice, bob, protocol.TypeMentorFeedback, `"score":0.9,"reputation_delta":0.5`, nil},
		{a, alice, testNode, protocol.TypeKeyRotate, fmt.Sprintf(`"old_key_id":%q,"new_key_id":"fa-2","public_key":%q`, protocol.KeyID(a.Public()), pubTextOf(rotated)), nil},
		{rotated, alice, bob, protocol.TypeCreditTransfer, `"amount":"1","currency":"AGLX","reason":"after","transaction_id":"fz-tx-2"`, nil},
		// A peer registry the harness takes syncs from (testPeer): its key
		// bound, then a sync that the merge takes (helper-110: the fuzzer
		// never got past the sync's checks to the merge).
		{peer, testPeer, testNode, protocol.TypeAuthRequest, fmt.Sprintf(`"agent_id":"fp","public_key":%q`, pubTextOf(peer)), nil},
		{peer, testPeer, testNode, protocol.TypeRegistrySync, `"entries":[{"agent_id":"fc","agent_uri":"agent://fz-carol.local","agent_name":"Carol","capabilities":["data.analyze"],"status":"READY","ttl":3600},` +
			`{"agent_id":"fd","agent_uri":"agent://fz-dave.local","status":"GONE","ttl":0}]`, nil},
	}
	at := time.Date(2025, 10, 29, 18, 0, 0, 0, time.UTC) // as fuzzEvents starts
	var out []byte
	for _, st := range steps {
		f := frame(st.from, st.to, st.typ, fmt.Sprintf(`{"timestamp":%q,%s}`, ts(at), st.body))
		if st.zoneSecret != nil {
			sig, err := protocol.SignHMAC(st.zoneSecret, f.From(), f.To(), f.Type(), "", f.Body)
			if err == nil {
				f.Body, err = protocol.SetSignature(f.Body, sig)
			}
			if err != nil {
				tb.Fatalf("signing the seed's %s: %v", st.typ, err)
			}
		} else if err := protocol.SignFrame(st.k, f); err != nil {
			tb.Fatalf("signing the seed's %s: %v", st.typ, err)
		}
		out = append(out, protocol.Encode(f)...)
		at = at.Add(time.Duration(len(f.Body)%90) * time.Minute)
	}
	return out
}

// pubTextOf is pubText without a test to fail.
func pubTextOf(k crypto.Signer) string {
	s, err := protocol.MarshalPublicKey(k.Public())
	if err != nil {
		panic(err)
	}
	return s
}

// TestSignedSeedFolds: signedSeed's signatures hold where FuzzFolds folds
// them, so that the fuzzer starts past the signature checks: every key is
// bound, the mint and the transfers are booked, and the rotation takes.
func TestSignedSeedFolds(t *testing.T) {
	evs := fuzzEvents(signedSeed(t))
	h := newHarness(t)
	cfg := h.cfg
	cfg.Outbox = h.out
	folds := NewFolds(cfg)
	for _, ev := range evs {
		for _, p := range folds.All() {
			p.Apply(ev)
		}
	}
	for _, ev := range evs {
		rep, ok, _ := h.out.Take(ev.Seq)
		if ok && rep.Status >= 400 {
			t.Errorf("seq %d %s: %d %s", ev.Seq, ev.Type, rep.Status, rep.Body)
		}
	}
	if v, ok := folds.Credits.L.Account("agent://fz-bob.local"); !ok || v.Balance.String() != "3.5" {
		t.Fatalf("bob's balance after the seed: %v %v; want 3.5", v.Balance, ok)
	}
	if _, ok := folds.Registry.Agent("agent://fz-carol.local"); !ok {
		t.Fatal("the peer's sync was not merged: carol is unknown")
	}
	if z, ok := folds.Registry.Zone("research-hub"); !ok || len(z.Members) != 1 {
		t.Fatalf("the zone join did not take: %+v", z)
	}
}
