package projections

import (
	"bytes"
	"crypto/ed25519"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/aglx/ledger/ledger/statecodec"
	"github.com/aglx/ledger/protocol"
)

// The registry's saved state at its bounds, and what its LoadState refuses.

// TestRegistryStateZoneJoinsFull: a zone whose memory of answered joins
// is full refuses joins (429) and remembers the latest such join's stamp
// (joinsFull); restored there, the registry refuses a copy of the refused
// join as the saved one does, and once the memory has drained, with the
// zone's entry gone from joinsFull (an empty map, not none), it is
// restored the same again.
func TestRegistryStateZoneJoinsFull(t *testing.T) {
	s := newStateScript(t)
	s.register("agent://victim.local", "READY", 86400)
	s.wait(time.Minute)
	for i := range ZoneJoinsMax {
		s.join(fmt.Sprintf("agent://m%d.local", i), "research-hub", testZoneSecretA)
	}
	s.wait(6 * time.Minute)
	refused := s.join("agent://victim.local", "research-hub", testZoneSecretA)
	// The registry alone folds the flood: the other folds have no part
	// in it, and would only make the test slower.
	a, oa := newStateFolds(s.cfg)
	for _, e := range s.evs {
		a.Registry.Apply(e)
	}
	if rep, _, _ := oa.Take(refused.Seq); rep.Status != protocol.StatusTooManyRequests || len(a.Registry.joinsFull) != 1 {
		t.Fatalf("the join past the zone's memory: %d %s, joinsFull %v; want 429 and the zone", rep.Status, rep.Body, a.Registry.joinsFull)
	}
	b, ob := restoreFolds(t, s.cfg, a.Registry, oa, true)
	b.cfg.Reputation = a.Registry.cfg.Reputation

	s.wait(4*time.Minute + time.Second) // the flood's joins have gone from the memory, and the copy is within its window
	copied := s.resend(refused)
	s.wait(7 * time.Minute) // the refused join is older than two windows: the zone's entry in joinsFull goes
	fresh := s.join("agent://victim.local", "research-hub", testZoneSecretA)
	want := []protocol.Status{protocol.StatusConflict, protocol.StatusOK}
	for i, e := range []*Event{copied, fresh} {
		a.Registry.Apply(e)
		b.Apply(e)
		ra, _, _ := oa.Take(e.Seq)
		rb, _, _ := ob.Take(e.Seq)
		if ra.Status != want[i] || ra.Status != rb.Status || !bytes.Equal(ra.Body, rb.Body) {
			t.Fatalf("seq %d: the saved registry answers %d %s, the restored one %d %s; want %d", e.Seq, ra.Status, ra.Body, rb.Status, rb.Body, want[i])
		}
	}
	if a.Registry.joinsFull == nil || len(a.Registry.joinsFull) != 0 {
		t.Fatalf("joinsFull after the memory drained: %#v; want an empty map", a.Registry.joinsFull)
	}
	compareLarge(t, "after further joins", a.Registry, b)
	restoreFolds(t, s.cfg, a.Registry, oa, true)
}

// TestRegistryStateRefused: LoadState refuses what the registry's code
// could not work on, or a state saved under another configuration, with
// an error and without a panic: each case takes a real state and breaks
// one thing in it, or loads it where it does not belong.
func TestRegistryStateRefused(t *testing.T) {
	s := newStateScript(t)
	s.register("agent://s000.local", "READY", 3600)
	s.bind("agent://k00.local", s.newKey())
	s.exchange("agent://s000.local", "agent://h00.local")
	base := func() (*Folds, *Outbox) {
		a, o := newStateFolds(s.cfg)
		for _, e := range s.evs {
			for _, p := range a.All() {
				p.Apply(e)
			}
		}
		return a, o
	}
	otherKey := ed25519.NewKeyFromSeed([]byte("another node key, for this test!"))
	tests := []struct {
		name    string
		breakIt func(r *Registry)
		cfg     func(c *RegistryConfig)
		want    string
	}{
		{name: "another node key", cfg: func(c *RegistryConfig) { c.NodeKey = otherKey }, want: "another configuration"},
		{name: "another zone", cfg: func(c *RegistryConfig) {
			c.Zones = append([]Zone{{ID: "a-zone", Secret: testZoneSecretB, MinReputation: 0.1}}, c.Zones...)
		}, want: "another configuration"},
		{name: "no zones", cfg: func(c *RegistryConfig) { c.Zones = nil }, want: "another configuration"},
		{name: "a change of no agent", breakIt: func(r *Registry) {
			r.changes.entries = append(r.changes.entries, changeEntry{at: r.now, seq: 99, uri: "agent://nobody.local"})
		}, want: "has no entry"},
		{name: "a change log that goes back", breakIt: func(r *Registry) {
			r.changes.entries = append(r.changes.entries, changeEntry{at: r.now, seq: 1, uri: "agent://s000.local"})
		}, want: "goes back"},
		{name: "a synced count out of step", breakIt: func(r *Registry) { r.synced++ }, want: "counted as synced"},
		{name: "an agent URI that does not parse", breakIt: func(r *Registry) {
			r.agents["not a uri"] = &agentEntry{Source: SourceSelf}
			r.sorted.insert("not a uri")
		}, want: `the agent "not a uri"`},
		{name: "a key that is not its fingerprint", breakIt: func(r *Registry) {
			r.keys["agent://k00.local"].keys[0].KeyID = "sha256:00000000000000000000000000000000"
		}, want: "saved as"},
		{name: "a key that does not parse", breakIt: func(r *Registry) { r.keys["agent://k00.local"].keys[0].PublicKey = "AAAA" }},
		{name: "an empty key ring", breakIt: func(r *Registry) { r.keys["agent://k00.local"].keys = nil }, want: "key ring of 0"},
		{name: "a memory put out of order", breakIt: func(r *Registry) {
			r.hints.order = append(r.hints.order, recentKey{key: "agent://x.local", tick: 1})
		}, want: "out of order"},
		{name: "a memory past its bound", breakIt: func(r *Registry) {
			for i := range 9 {
				r.seen.tick++
				k := fmt.Sprintf("k%d", i)
				r.seen.m[k] = recentItem[seenOutcome]{tick: r.seen.tick}
				r.seen.order = append(r.seen.order, recentKey{k, r.seen.tick})
			}
		}, want: "more than its bound"},
		{name: "joins of an unconfigured zone", breakIt: func(r *Registry) {
			r.joins["nowhere"] = newRecentMap[seenOutcome](1)
		}, want: "not configured"},
		{name: "a mentor rated NaN", breakIt: func(r *Registry) {
			nan := math.NaN()
			r.mentors["agent://m.local"] = &mentor{Rating: &nan}
			r.mentorsListed.insert("agent://m.local")
		}, want: "a figure of NaN"},
		{name: "a reply to sign in a fold with no node key", cfg: func(c *RegistryConfig) {
			c.NodePublicKey, c.NodeKey = nodeKey.Public(), nil
		}, want: "no key to sign"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, _ := base()
			if tc.breakIt != nil {
				tc.breakIt(a.Registry)
			}
			b := saveRegistry(t, a.Registry)
			cfg := s.cfg
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			fresh := NewFolds(cfg).Registry
			shrinkMemories(fresh)
			err := loadRegistry(fresh, b)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("LoadState = %v; want an error with %q", err, tc.want)
			}
		})
	}

	a, _ := base()
	good := saveRegistry(t, a.Registry)
	t.Run("every cut of a state", func(t *testing.T) {
		for n := 0; n < len(good); n += 1 + n/50 {
			fresh, _ := newStateFolds(s.cfg)
			if err := loadRegistry(fresh.Registry, good[:n]); err == nil {
				t.Fatalf("a state cut to %d of its %d bytes loaded", n, len(good))
			}
		}
	})
	t.Run("a byte more", func(t *testing.T) {
		fresh, _ := newStateFolds(s.cfg)
		if err := loadRegistry(fresh.Registry, append(good[:len(good):len(good)], 0)); err == nil {
			t.Fatal("a state with a byte more loaded")
		}
	})
	t.Run("into a registry that has folded", func(t *testing.T) {
		if err := a.Registry.LoadState(statecodec.NewReader(good)); err == nil {
			t.Fatal("a state loaded into a registry that has folded events")
		}
	})
}

// FuzzLoadStateRegistry: arbitrary bytes into LoadState never panic, and
// a registry that loads takes its snapshot, answers its queries and folds
// further events (resends its memories answer among them) without
// panicking either: a damaged or crafted state is refused at the start,
// or it is one the registry's code can work on. The seeds are real saved
// states: the rich one of TestRegistryStateRoundTrip (its memories
// shrunk, which loads into full-size ones too), one folded with the
// node's own memories, and an empty registry's.
func FuzzLoadStateRegistry(f *testing.F) {
	s := richRegistryScript(f, 40) // a small seed fuzzes faster
	cfg := s.cfg
	a, _ := newStateFolds(cfg)
	for _, e := range s.evs {
		for _, p := range a.All() {
			p.Apply(e)
		}
	}
	plain := newStateScript(f)
	c := cfg
	c.Outbox = NewOutbox()
	folds := NewFolds(c)
	for _, e := range plain.evs {
		for _, p := range folds.All() {
			p.Apply(e)
		}
	}
	for _, r := range []*Registry{a.Registry, folds.Registry, NewRegistry(cfg)} {
		seed := saveRegistry(f, r)
		if err := loadRegistry(NewFolds(cfg).Registry, seed); err != nil {
			f.Fatalf("a seed does not load: %v", err)
		}
		f.Add(seed)
	}
	later := s.laterEvents()
	uris := []string{testNode, "agent://fz-alice.local", "agent://s001.local", "agent://k11.local", "agent://h00.local", "agent://u00.local", "agent://m2.local"}
	f.Fuzz(func(t *testing.T, data []byte) {
		o := NewOutbox()
		c := cfg
		c.Outbox = o
		r := NewFolds(c).Registry
		if r.LoadState(statecodec.NewReader(data)) != nil {
			return
		}
		r.Snapshot() // an error is allowed (a time JSON cannot write), a panic is not
		r.SnapshotEntries()
		r.Agents(AgentFilter{})
		r.Agents(AgentFilter{Zone: "research-hub", Status: "expired"})
		r.StatusKnown("nobody's")
		r.ChangedPage(0, 10)
		r.Changed(0)
		r.Mentors()
		r.UnnamedSyncs()
		for _, id := range r.ZoneIDs() {
			r.Zone(id)
		}
		for _, uri := range uris {
			r.Agent(uri)
			r.CurrentKey(uri)
			r.ValidSession("research-hub", uri, "ZT-x")
		}
		for _, e := range later {
			r.Apply(e)
			o.Take(e.Seq)
		}
		r.Snapshot()
		r.ChangedPage(0, 0)
		saveRegistry(t, r)
	})
}
