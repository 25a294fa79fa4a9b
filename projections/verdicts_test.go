package projections

import (
	"bytes"
	"crypto"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/protocol"
)

// TestFoldChecksNothingTheWorkersChecked: with the validation workers'
// outcomes recorded (IngestVerifier.VerifyBatch), the fold makes no
// signature check of its own, for forged frames in a keyed agent's name as
// for honest ones, and for auth.requests, whose proof of possession is
// checked against the key they carry; and it reaches the same answers and
// the same state as a fold that checks everything itself. Until
// 2026-12-01 the fold checked every failed signature again for its
// reason, and every auth.request's key and proof, on the one goroutine
// all answers wait for: a flood of them from anyone slowed every agent's
// replies.
func TestFoldChecksNothingTheWorkersChecked(t *testing.T) {
	cache := NewVerdictCache()
	h := newHarness(t, func(c *RegistryConfig) { c.Verdicts = cache })
	plain := newHarness(t)
	const bob = "agent://bob.local"
	at := func(i int) time.Time { return regT0.Add(time.Duration(i) * time.Second) }
	bobKey := newEd25519(t)
	// Bob's first key is bound before the measured stretch, by both folds.
	first := signed(t, bobKey, frame(bob, testNode, protocol.TypeAuthRequest,
		fmt.Sprintf(`{"agent_id":"b","public_key":%q,"timestamp":%q}`, pubText(t, bobKey), ts(at(0)))))
	for _, x := range []*harness{h, plain} {
		x.mustReply(first, at(0), protocol.TypeAuthResponse, protocol.StatusOK)
	}

	var frames []*protocol.Frame
	for i := 1; i <= 150; i++ {
		var k crypto.Signer = bobKey
		switch i % 5 {
		case 0, 1: // a forgery in Bob's name
			k = newEd25519(t)
		case 2: // a stranger binding a first key of its own: Ed25519 or RSA
			who := fmt.Sprintf("agent://new%d.local", i)
			nk := newEd25519(t)
			if i%10 == 2 {
				nk = newRSA(t)
			}
			signer := nk
			if i%15 == 2 { // proving possession of another key than the one carried
				signer = newEd25519(t)
			}
			frames = append(frames, signed(t, signer, frame(who, testNode, protocol.TypeAuthRequest,
				fmt.Sprintf(`{"agent_id":"n%d","public_key":%q,"timestamp":%q}`, i, pubText(t, nk), ts(at(i))))))
			continue
		case 3: // a message outside the policy, but signed: the fold judges it too
			frames = append(frames, signed(t, newEd25519(t), frame(bob, testNode, protocol.TypeMentorRequest,
				fmt.Sprintf(`{"task_id":"t%d","timestamp":%q}`, i, ts(at(i))))))
			continue
		}
		frames = append(frames, signed(t, k, frame(bob, testNode, protocol.TypeRegistryUpdate,
			fmt.Sprintf(`{"agent_name":"Bob","status":"S%d","timestamp":%q}`, i, ts(at(i))))))
	}
	// An auth.request for Bob carrying a second key, signed with it: the
	// fold checks it under Bob's current key and under the carried one.
	other := newEd25519(t)
	frames = append(frames, signed(t, other, frame(bob, testNode, protocol.TypeAuthRequest,
		fmt.Sprintf(`{"agent_id":"b","public_key":%q,"timestamp":%q}`, pubText(t, other), ts(at(151))))))

	v := &IngestVerifier{Registry: h.r, Cache: cache}
	var evs []*Event
	for i, f := range frames {
		e := h.event(f, at(i+1))
		e.Envelope.Msg = e.Msg
		evs = append(evs, e)
	}
	for _, e := range evs {
		if !v.NeedsCheck(e.Envelope, e.Msg) {
			t.Fatalf("%s from %s: NeedsCheck = false; the fold judges its signature", e.Type, e.From)
		}
	}
	for i := 0; i < len(evs); i += 40 { // in the workers' batches
		var envs []*events.Envelope
		for _, e := range evs[i:min(i+40, len(evs))] {
			envs = append(envs, e.Envelope)
		}
		v.VerifyBatch(envs)
	}
	bound := 0
	for _, e := range evs {
		before := protocol.Ed25519Counters()
		h.applyEvent(e)
		after := protocol.Ed25519Counters()
		// The node checks each signature it makes itself (protocol.Sign),
		// but an auth.response is signed as it is taken, off the fold.
		if n := after.Lone - before.Lone + after.Batched - before.Batched; n != 0 {
			t.Errorf("%s from %s: the fold made %d Ed25519 checks of its own; the workers had made them all", e.Type, e.From, n)
		}
		if rep, ok, _ := h.out.Take(e.Seq); ok && rep.Type == protocol.TypeAuthResponse && rep.Status == protocol.StatusOK {
			bound++
		}
	}
	if n := cache.Len(); n != 0 {
		t.Errorf("the cache holds records of %d events the fold has applied; it should hold none", n)
	}
	if bound < 10 {
		t.Fatalf("%d auth.requests bound a key; the test wants honest ones among the forged", bound)
	}
	for _, e := range evs {
		plain.applyEvent(e)
		got, gotOK, _ := h.out.Take(e.Seq)
		want, wantOK, _ := plain.out.Take(e.Seq)
		if gotOK != wantOK || got.Type != want.Type || got.Status != want.Status || !bytes.Equal(got.Body, want.Body) {
			t.Errorf("%s from %s: answered %v %s %d %s with the workers' outcomes, %v %s %d %s without",
				e.Type, e.From, gotOK, got.Type, got.Status, got.Body, wantOK, want.Type, want.Status, want.Body)
		}
	}
	if a, b := h.snapshot(), plain.snapshot(); !bytes.Equal(a, b) {
		t.Error("the fold with the workers' outcomes reached another state than the fold without")
	}
}

// TestFoldTakesTheCarriedKeyAsParsed: the fold takes an auth.request's
// key as the workers parsed it, and does not parse it again (for Ed25519
// a 30 µs scalar multiplication on the fold's goroutine). The record is
// made to differ from what a parse gives, so that the answer shows which
// one the fold used; that never happens outside a test, since both are
// ParseCarriedKey of the same text.
func TestFoldTakesTheCarriedKeyAsParsed(t *testing.T) {
	cache := NewVerdictCache()
	h := newHarness(t, func(c *RegistryConfig) { c.Verdicts = cache })
	k := newEd25519(t)
	e := h.event(signed(t, k, frame("agent://carl.local", testNode, protocol.TypeAuthRequest,
		fmt.Sprintf(`{"agent_id":"c","public_key":%q,"timestamp":%q}`, pubText(t, k), ts(regT0)))), regT0)
	e.Envelope.Msg = e.Msg
	(&IngestVerifier{Registry: h.r, Cache: cache}).VerifyBatch([]*events.Envelope{e.Envelope})
	ck, found := cache.Carried(e.Envelope)
	if !found || ck.Err != nil || ck.KeyID != protocol.KeyID(k.Public()) {
		t.Fatalf("the workers recorded %+v, %v; want the carried key parsed", ck, found)
	}
	if err, found := cache.Get(e.Envelope, ck.KeyID); !found || err != nil {
		t.Fatalf("the workers' proof of possession: %v, %v; want a success recorded", err, found)
	}
	cache.PutAll([]VerdictEntry{{Env: e.Envelope, Carried: &CarriedKey{Err: protocol.Errorf(protocol.StatusBadRequest, "MARK")}}})
	h.applyEvent(e)
	if rep, ok, _ := h.out.Take(e.Seq); !ok || rep.Status != protocol.StatusBadRequest || !strings.Contains(string(rep.Body), "MARK") {
		t.Fatalf("answered %v %d %s: the fold parsed the carried key again instead of taking the workers' parse", ok, rep.Status, rep.Body)
	}
}

// TestAuthRequestToAnotherIsNotCheckedAhead: an auth.request addressed to
// anyone but the node binds nothing, and the fold does not check it, so
// the workers do not either (anyone could make them parse keys for
// nothing). From an agent without a key, it needs no check at all.
func TestAuthRequestToAnotherIsNotCheckedAhead(t *testing.T) {
	cache := NewVerdictCache()
	h := newHarness(t, func(c *RegistryConfig) { c.Verdicts = cache })
	k := newEd25519(t)
	e := h.event(signed(t, k, frame("agent://carl.local", "agent://dora.local", protocol.TypeAuthRequest,
		fmt.Sprintf(`{"agent_id":"c","public_key":%q,"timestamp":%q}`, pubText(t, k), ts(regT0)))), regT0)
	e.Envelope.Msg = e.Msg
	v := &IngestVerifier{Registry: h.r, Cache: cache}
	if v.NeedsCheck(e.Envelope, e.Msg) {
		t.Error("NeedsCheck = true for an auth.request to another agent from one without a key")
	}
	v.VerifyBatch([]*events.Envelope{e.Envelope})
	if n := cache.Len(); n != 0 {
		t.Errorf("the workers recorded %d records for it; want none", n)
	}
}

// TestVerdictCacheForgets: records the fold has used are dropped, and the
// ids they leave in the order of eviction are dropped too: the cache
// stays bounded however many envelopes pass through it.
func TestVerdictCacheForgets(t *testing.T) {
	var c VerdictCache
	for i := range 3 * VerdictCacheMax {
		env := &events.Envelope{ID: fmt.Sprintf("ev-%d", i)}
		c.Put(env, "k", nil)
		c.Forget(env)
	}
	kept := &events.Envelope{ID: "kept"}
	c.Put(kept, "k", nil)
	c.Forget(&events.Envelope{ID: "kept"}) // another envelope under its id: not this one's record
	if _, found := c.Get(kept, "k"); !found || c.Len() != 1 {
		t.Fatalf("Forget of another envelope with the same id dropped the record (%d held)", c.Len())
	}
	c.mu.Lock()
	n := len(c.order)
	c.mu.Unlock()
	if n > 2*VerdictCacheMax+1 {
		t.Fatalf("the eviction order holds %d ids for 1 record", n)
	}
}

// TestVerdictCacheEvictsTheOldest: a record dropped by Forget and made
// again under the same event id is a new record, and the eviction of the
// oldest does not take it for the old one: it dropped the newest record
// in the cache (helper-76).
func TestVerdictCacheEvictsTheOldest(t *testing.T) {
	var c VerdictCache
	first := &events.Envelope{ID: "same"}
	c.Put(first, "k", nil)
	c.Forget(first)
	var oldest *events.Envelope
	for i := range VerdictCacheMax - 1 {
		e := &events.Envelope{ID: fmt.Sprintf("ev-%d", i)}
		if i == 0 {
			oldest = e
		}
		c.Put(e, "k", nil)
	}
	again := &events.Envelope{ID: "same"}
	c.Put(again, "k", nil) // the newest; the cache is full
	c.Put(&events.Envelope{ID: "one more"}, "k", nil)
	if _, found := c.Get(again, "k"); !found {
		t.Fatal("the newest record was evicted in place of the oldest")
	}
	if _, found := c.Get(oldest, "k"); found {
		t.Fatal("the oldest record was kept past the bound")
	}
	runtime.KeepAlive(oldest)
}
