package projections

import (
	"context"
	"crypto"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/protocol"
)

// TestReplayWithPrefetcherEqualsWithout: a log of signed registry updates
// several prefetch stretches long, with keys bound and rotated in
// different stretches and forgeries among them, folds into the same
// registry whether the replay checks signatures ahead of the fold (one
// stretch ahead, on every core) or the fold checks each itself.
func TestReplayWithPrefetcherEqualsWithout(t *testing.T) {
	l, nc := openLogConn(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	h := newHarness(t)
	at := func(i int) time.Time { return regT0.Add(time.Duration(i) * time.Second) }
	const agents, n = 8, 3*prefetchChunk + 100
	keys := make([][]crypto.Signer, agents) // each agent's keys, oldest first
	var envs []*events.Envelope
	add := func(k crypto.Signer, f *protocol.Frame) {
		e := h.event(signed(t, k, f), at(len(envs)))
		e.Envelope.Seq = 0
		envs = append(envs, e.Envelope)
	}
	uri := func(a int) string { return fmt.Sprintf("agent://a%d.local", a) }
	for i := 0; len(envs) < n; i++ {
		a := i % agents
		switch {
		case len(keys[a]) == 0 && i >= a*prefetchChunk/3: // bound in different stretches
			k := newEd25519(t)
			keys[a] = append(keys[a], k)
			add(k, frame(uri(a), testNode, protocol.TypeAuthRequest,
				fmt.Sprintf(`{"agent_id":"a%d","public_key":%q,"timestamp":%q}`, a, pubText(t, k), ts(at(len(envs))))))
		case len(keys[a]) == 1 && i == 2*prefetchChunk+a: // rotated later
			k := newEd25519(t)
			add(keys[a][0], frame(uri(a), testNode, protocol.TypeKeyRotate, fmt.Sprintf(
				`{"old_key_id":"k1","new_key_id":"k2","public_key":%q,"timestamp":%q}`, pubText(t, k), ts(at(len(envs))))))
			keys[a] = append(keys[a], k)
		default:
			k := newEd25519(t) // a forgery, or an agent without a key yet
			switch {
			case len(keys[a]) == 2 && i%17 == 0:
				k = keys[a][0] // the retired key: refused, though it verifies
			case len(keys[a]) > 0 && i%13 != 0:
				k = keys[a][len(keys[a])-1]
			}
			add(k, frame(uri(a), testNode, protocol.TypeRegistryUpdate,
				fmt.Sprintf(`{"agent_name":"A%d","status":"S%d","timestamp":%q}`, a, i, ts(at(len(envs))))))
		}
	}
	appendAll(t, l, envs)
	// Acknowledged means in the write-ahead stream; the replays read the
	// event stream, which gets the events a moment later.
	if err := l.WaitPublished(ctx, uint64(len(envs))); err != nil {
		t.Fatal(err)
	}

	replay := func(prefetch bool) []byte {
		t.Helper()
		ro, err := events.Attach(ctx, nc, events.StreamNameDefault)
		if err != nil {
			t.Fatal(err)
		}
		cfg := h.cfg
		var cache *VerdictCache
		if prefetch {
			cache = NewVerdictCache()
			cfg.Verdicts = cache
		}
		reg := NewRegistry(cfg)
		r := NewRunner(ro, nil, reg)
		if prefetch {
			r.Prefetcher = &IngestVerifier{Registry: reg, Cache: cache}
		}
		defer replayUntilReady(ctx, t, r)()
		var b []byte
		r.View(func(uint64) { b, err = reg.Snapshot() })
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	with, without := replay(true), replay(false)
	if string(with) != string(without) {
		i := 0
		for i < len(with) && i < len(without) && with[i] == without[i] {
			i++
		}
		lo := max(i-300, 0)
		t.Fatalf("replay with the prefetcher differs from replay without, at byte %d:\nwith    ...%.500s\nwithout ...%.500s", i, with[lo:], without[lo:])
	}
}

// stretchRecorder is a Prefetcher that records the memory of each stretch
// it is given.
type stretchRecorder struct {
	mu      sync.Mutex
	largest int64
	count   int
}

func (s *stretchRecorder) Prefetch(envs []*events.Envelope) {
	var b int64
	for _, e := range envs {
		b += protocol.MemorySize(e.Headers, e.Body)
	}
	s.mu.Lock()
	s.largest, s.count = max(s.largest, b), s.count+1
	s.mu.Unlock()
}

// TestReplayStretchesAreBoundedInBytes: a replay reads the log in
// stretches of at most prefetchChunkBytes of events, however few events
// that is, and folds them all. Bounded by count alone, a stretch of 512
// events of 1 MiB bodies held gigabytes, three stretches at a time, and a
// restart after such a burst took 3 GB (helper-74).
func TestReplayStretchesAreBoundedInBytes(t *testing.T) {
	l, nc := openLogConn(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h := newHarness(t)
	big := strings.Repeat("x", 512<<10)
	const n = 60
	var envs []*events.Envelope
	for i := range n {
		e := h.event(frame(fmt.Sprintf("agent://a%d.local", i), "agent://b.local", protocol.TypeTaskResult,
			fmt.Sprintf(`{"task_id":"t%d","status":"done","result":{"log":%q}}`, i, big)), regT0)
		e.Envelope.Seq = 0
		envs = append(envs, e.Envelope)
	}
	appendAll(t, l, envs)
	if err := l.WaitPublished(ctx, n); err != nil {
		t.Fatal(err)
	}
	ro, err := events.Attach(ctx, nc, events.StreamNameDefault)
	if err != nil {
		t.Fatal(err)
	}
	stats := NewStats()
	r := NewRunner(ro, nil, stats)
	rec := &stretchRecorder{}
	r.Prefetcher = rec
	defer replayUntilReady(ctx, t, r)()
	if r.Applied() != n || stats.Events != n {
		t.Fatalf("applied to seq %d, %d events; want %d", r.Applied(), stats.Events, n)
	}
	one := protocol.MemorySize(envs[0].Headers, envs[0].Body)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.count < 2 || rec.largest > prefetchChunkBytes+one {
		t.Fatalf("%d stretches, the largest %d bytes; want several, none past %d bytes and one event", rec.count, rec.largest, prefetchChunkBytes)
	}
}

// replayUntilReady runs r until the returned stop is called, and waits
// until it has caught up with its log (or ctx ends).
func replayUntilReady(ctx context.Context, t *testing.T, r *Runner) (stop func()) {
	t.Helper()
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(rctx)
	}()
	// Run ends before the test's server does (helper-110: runners
	// outlived their tests).
	stop = func() { cancel(); <-done }
	select {
	case <-r.Ready():
	case <-ctx.Done():
		stop()
		t.Fatal("replay never became ready")
	}
	return stop
}
