package projections

import (
	"bytes"
	"crypto"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/protocol"
)

// TestRefusedChangesNothing sends messages the registry must refuse and
// checks the answer and that the snapshot is byte for byte what it was.
func TestRefusedChangesNothing(t *testing.T) {
	const bob, mallory = "agent://bob.local", "agent://mallory.local"
	kb, km, kx := newEd25519(t), newEd25519(t), newEd25519(t)
	now := regT0.Add(10 * time.Minute)
	update := func(status string, when time.Time) *protocol.Frame {
		return frame(bob, testNode, protocol.TypeRegistryUpdate,
			fmt.Sprintf(`{"agent_name":"Bob","status":%q,"timestamp":%q}`, status, ts(when)))
	}
	authReq := func(k crypto.Signer, when time.Time) *protocol.Frame {
		return frame(bob, testNode, protocol.TypeAuthRequest,
			fmt.Sprintf(`{"agent_id":"b","public_key":%q,"timestamp":%q}`, pubText(t, k), ts(when)))
	}
	// setup: bob and mallory registered, each with a key.
	setup := func(t *testing.T) (*harness, *protocol.Frame, Reply) {
		h := newHarness(t)
		h.register(bob, 3600, regT0)
		h.register(mallory, 3600, regT0)
		first := signed(t, kb, authReq(kb, regT0.Add(time.Minute)))
		rep := h.mustReply(first, regT0.Add(time.Minute), protocol.TypeAuthResponse, protocol.StatusOK)
		h.bindKey(mallory, km, regT0.Add(time.Minute))
		return h, first, rep
	}
	altered := func() *protocol.Frame {
		f := signed(t, kb, update("BUSY", now))
		f.Body = bytes.Replace(f.Body, []byte("BUSY"), []byte("IDLE"), 1)
		return f
	}
	rotateBy := func(k crypto.Signer) *protocol.Frame {
		return signed(t, k, frame(bob, testNode, protocol.TypeKeyRotate, fmt.Sprintf(
			`{"old_key_id":"k1","new_key_id":"k2","public_key":%q,"timestamp":%q}`, pubText(t, kx), ts(now))))
	}
	join := func(secret []byte) *protocol.Frame {
		return hmacSigned(t, secret, frame(bob, testNode, protocol.TypeZoneJoin,
			fmt.Sprintf(`{"zone_id":"research-hub","agent_id":"b","timestamp":%q}`, ts(now))))
	}
	tests := []struct {
		name   string
		frame  func() *protocol.Frame
		typ    string // "" for no reply
		status protocol.Status
		says   string
	}{
		{"forged FROM, unsigned", func() *protocol.Frame { return update("BUSY", now) },
			protocol.TypeError, protocol.StatusUnauthorized, "must be signed"},
		{"forged FROM, signed by mallory", func() *protocol.Frame { return signed(t, km, update("BUSY", now)) },
			protocol.TypeError, protocol.StatusUnauthorized, "does not match"},
		{"signature over altered content", altered, protocol.TypeError, protocol.StatusUnauthorized, "does not match"},
		{"stale timestamp", func() *protocol.Frame { return signed(t, kb, update("BUSY", now.Add(-6*time.Minute))) },
			protocol.TypeError, protocol.StatusUnauthorized, "stale"},
		{"timestamp from the future", func() *protocol.Frame { return signed(t, kb, update("BUSY", now.Add(6*time.Minute))) },
			protocol.TypeError, protocol.StatusUnauthorized, "stale"},
		{"signed without a timestamp", func() *protocol.Frame {
			return signed(t, kb, frame(bob, testNode, protocol.TypeRegistryUpdate, `{"agent_name":"Bob","status":"BUSY"}`))
		}, protocol.TypeError, protocol.StatusUnauthorized, "stale"},
		{"placeholder signature", func() *protocol.Frame {
			return frame(bob, testNode, protocol.TypeRegistryUpdate, `{"agent_name":"Bob","signature":"ed25519:0f3c9a..."}`)
		}, protocol.TypeError, protocol.StatusUnauthorized, "placeholder"},
		{"a second key by auth.request", func() *protocol.Frame { return signed(t, kx, authReq(kx, now)) },
			protocol.TypeAuthResponse, protocol.StatusUnauthorized, "key.rotate"},
		{"auth.request without proof of possession", func() *protocol.Frame { return signed(t, kb, authReq(kx, now)) },
			protocol.TypeAuthResponse, protocol.StatusUnauthorized, "possession"},
		{"stale auth.request", func() *protocol.Frame { return signed(t, kb, authReq(kb, now.Add(-time.Hour))) },
			protocol.TypeAuthResponse, protocol.StatusUnauthorized, "stale"},
		{"key.rotate signed with another key", func() *protocol.Frame { return rotateBy(kx) },
			protocol.TypeError, protocol.StatusUnauthorized, "current key"},
		{"key.rotate to a key bob had", func() *protocol.Frame {
			return signed(t, kb, frame(bob, testNode, protocol.TypeKeyRotate, fmt.Sprintf(
				`{"old_key_id":"k1","new_key_id":"k2","public_key":%q,"timestamp":%q}`, pubText(t, kb), ts(now))))
		}, protocol.TypeError, protocol.StatusConflict, "new key"},
		{"wrong zone HMAC", func() *protocol.Frame { return join(testZoneSecretB) },
			protocol.TypeZoneDeny, protocol.StatusUnauthorized, "does not match"},
		{"unknown zone", func() *protocol.Frame {
			return hmacSigned(t, testZoneSecretA, frame(bob, testNode, protocol.TypeZoneJoin,
				fmt.Sprintf(`{"zone_id":"nowhere","agent_id":"b","timestamp":%q}`, ts(now))))
		}, protocol.TypeZoneDeny, protocol.StatusNotFound, "Unknown zone"},
		{"registry.sync from an agent", func() *protocol.Frame {
			return frame(mallory, testNode, protocol.TypeRegistrySync, `{"entries":[{"agent_id":"x","agent_uri":"agent://bob.local"}]}`)
		}, protocol.TypeError, protocol.StatusForbidden, "registry://"},
		{"unsigned mentor.register", func() *protocol.Frame {
			return frame(bob, testNode, protocol.TypeMentorRegister, `{"agent_name":"Bob","expertise":["nlp"]}`)
		}, protocol.TypeError, protocol.StatusUnauthorized, "must be signed"},
		{"unsigned agent.announce", func() *protocol.Frame {
			f := frame(bob, "", protocol.TypeAgentAnnounce, `{"agent_name":"Bob","uptime":5}`)
			f.Transport = protocol.TransportUDP
			return f
		}, protocol.TypeError, protocol.StatusUnauthorized, "must be signed"}, // no one reads it over UDP; over TCP the sender is told
		{"bad fetch cursor", func() *protocol.Frame {
			return frame(bob, testNode, protocol.TypeRegistryFetch, `{"mode":"update","since":"2025-10-01T00:00:00Z","after":"nope"}`)
		}, protocol.TypeError, protocol.StatusBadRequest, "cursor"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, _, _ := setup(t)
			before := h.snapshot()
			_, rep, ok := h.apply(tt.frame(), now)
			switch {
			case tt.typ == "" && ok:
				t.Errorf("reply %s %d %s, want none", rep.Type, rep.Status, rep.Body)
			case tt.typ != "" && (!ok || rep.Type != tt.typ || rep.Status != tt.status):
				t.Errorf("reply %s %d %s, want %s %d", rep.Type, rep.Status, rep.Body, tt.typ, tt.status)
			case tt.says != "":
				mustContain(t, "reply body", string(rep.Body), tt.says)
			}
			if after := h.snapshot(); !bytes.Equal(after, before) {
				t.Errorf("the state changed:\nbefore %s\n after %s", before, after)
			}
		})
	}

	t.Run("replayed auth.request", func(t *testing.T) {
		h, first, firstRep := setup(t)
		before := h.snapshot()
		_, rep, _ := h.apply(first, now)
		if rep.Type != firstRep.Type || rep.Status != firstRep.Status || !bytes.Equal(rep.Body, firstRep.Body) {
			t.Errorf("replay answered %s %d %s, want the first answer %s", rep.Type, rep.Status, rep.Body, firstRep.Body)
		}
		if after := h.snapshot(); !bytes.Equal(after, before) {
			t.Errorf("the state changed:\nbefore %s\n after %s", before, after)
		}
	})
}

// TestNeedsSignature pins the policy.
func TestNeedsSignature(t *testing.T) {
	for _, typ := range []string{"credit.transfer", "credit.reward", "credit.adjust", "credit.approve", "credit.request", "credit.deny", "credit.received",
		"registry.update", "key.rotate", "mentor.register", "zone.leave"} {
		if !NeedsSignature(typ) {
			t.Errorf("NeedsSignature(%q) = false, want true", typ)
		}
	}
	for _, typ := range []string{"ack", "error", "registry.fetch", "zone.join", "task.assign", "credit.balance", "mentor.request"} {
		if NeedsSignature(typ) {
			t.Errorf("NeedsSignature(%q) = true, want false", typ)
		}
	}
}

// errForged stands for a failed check's error in the cache's own tests.
var errForged = errors.New("forged")

func TestVerdictCacheBoundAndRace(t *testing.T) {
	var c VerdictCache // the zero value is ready
	var wg sync.WaitGroup
	const workers, each = 8, VerdictCacheMax / 4
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				env := &events.Envelope{ID: fmt.Sprintf("ev-%d-%d", w, i)}
				var verdict error
				if i%2 == 1 {
					verdict = errForged
				}
				c.Put(env, "k", verdict)
				if err, found := c.Get(env, "k"); found && err != verdict {
					t.Errorf("Get(%s) = %v, want %v", env.ID, err, verdict)
					return
				}
				if _, found := c.Get(env, "other"); found {
					t.Errorf("Get(%s) under another key found a verdict", env.ID)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := c.Len(); n != VerdictCacheMax {
		t.Errorf("Len = %d, want %d (bounded)", n, VerdictCacheMax)
	}
	newest := &events.Envelope{ID: "newest"}
	c.Put(newest, "k", nil)
	if _, found := c.Get(newest, "k"); !found {
		t.Error("the newest verdict was evicted")
	}
	// Another envelope with the same event id is not the one checked: it
	// gets no verdict from the cache (it used to get this one's).
	if _, found := c.Get(&events.Envelope{ID: "newest"}, "k"); found {
		t.Error("a verdict was taken for another envelope with the same event id")
	}
}

// TestVerdictCacheInTheFold has ingest workers verify signatures in parallel
// (reading keys through CurrentKey's own lock, not the runner's) while the
// fold applies the same events, and checks that every verdict is what a
// fold without a cache reaches, including across a key rotation the
// workers cannot yet see. A cached verdict for another key is never taken.
func TestVerdictCacheInTheFold(t *testing.T) {
	const bob = "agent://bob.local"
	k1, k2 := newEd25519(t), newEd25519(t)
	cache := NewVerdictCache()
	h := newHarness(t, func(c *RegistryConfig) { c.Verdicts = cache })
	plain := newHarness(t)
	var frames []*protocol.Frame
	at := func(i int) time.Time { return regT0.Add(time.Duration(i) * time.Second) }
	frames = append(frames, signed(t, k1, frame(bob, testNode, protocol.TypeAuthRequest,
		fmt.Sprintf(`{"agent_id":"b","public_key":%q,"timestamp":%q}`, pubText(t, k1), ts(at(0))))))
	for i := 1; i < 200; i++ {
		k := k1
		if i > 100 {
			k = k2
		}
		body := fmt.Sprintf(`{"agent_name":"Bob","status":"S%d","timestamp":%q}`, i, ts(at(i)))
		if i == 100 {
			frames = append(frames, signed(t, k1, frame(bob, testNode, protocol.TypeKeyRotate, fmt.Sprintf(
				`{"old_key_id":"a","new_key_id":"b","public_key":%q,"timestamp":%q}`, pubText(t, k2), ts(at(i))))))
			continue
		}
		if i%7 == 0 { // a forgery now and then
			k = newEd25519(t)
		}
		frames = append(frames, signed(t, k, frame(bob, testNode, protocol.TypeRegistryUpdate, body)))
	}
	evs := make([]*Event, len(frames))
	for i, f := range frames {
		evs[i] = h.event(f, at(i))
	}

	var mu sync.Mutex // stands for the runner's lock, which the workers never take
	jobs := make(chan *Event)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e := range jobs {
				pub, kid, ok := h.r.CurrentKey(e.From)
				if ok {
					cache.Put(e.Envelope, kid, VerifyEnvelope(pub, e.Envelope))
				}
			}
		}()
	}
	go func() {
		for _, e := range evs {
			jobs <- e
		}
		close(jobs)
	}()
	for _, e := range evs {
		mu.Lock()
		h.applyEvent(e)
		got := h.r.Authenticate(e)
		mu.Unlock()
		plain.applyEvent(e)
		if want := plain.r.Authenticate(e); got != want {
			t.Errorf("event %d: verdict with cache %+v, without %+v", e.Seq, got, want)
		}
	}
	wg.Wait()
	a := h.snapshot()
	if b := plain.snapshot(); !bytes.Equal(a, b) {
		t.Error("the fold with a cache reached another state than the fold without")
	}

	// A positive verdict cached for another key does not make a forgery valid.
	forged := h.event(signed(t, newEd25519(t), frame(bob, testNode, protocol.TypeRegistryUpdate,
		fmt.Sprintf(`{"agent_name":"Bob","timestamp":%q}`, ts(at(300))))), at(300))
	cache.Put(forged.Envelope, protocol.KeyID(k1.Public()), nil)
	if v := h.r.Authenticate(forged); v.Auth != AuthInvalid || !strings.Contains(v.Reason, "does not match") {
		t.Errorf("Authenticate(forgery with a stale cached verdict) = %+v, want invalid", v)
	}
}
