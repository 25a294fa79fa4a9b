package projections

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/aglx/ledger/events"
)

// TestFoldToReachesWhatAReplayReaches: a copy of the folds brought from a
// saved state up to an event with FoldTo (the node's background save,
// cmd/aglxd/checkpoint.go) is, byte for byte, the state a replay of the
// log has at that event; so a start after a crash that takes up such a
// state folds on exactly as a full replay would. Through the real stream,
// from a state taken part way and from none, to the middle and the end
// of a log of signed frames with random events between.
func TestFoldToReachesWhatAReplayReaches(t *testing.T) {
	l, nc := openLogConn(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg := newHarness(t).cfg
	r := rand.New(rand.NewPCG(7, 7))
	// More than three stretches of prefetchChunk: the signed frames, then
	// copies of them under new IDs (refused or taken, as the folds
	// decide), with random events between.
	var envs []*events.Envelope
	signed := fuzzEvents(signedSeed(t))
	for len(envs) < 3*prefetchChunk+100 {
		for i, ev := range signed {
			e := ev.Envelope
			if len(envs) >= len(signed) {
				c := *signed[r.IntN(i+1)].Envelope
				c.ID = fmt.Sprintf("01COPY%020d", len(envs))
				c.MsgID = c.ID
				e = &c
			}
			envs = append(envs, e)
			for range r.IntN(3) {
				envs = append(envs, randomEnvelope(r, len(envs)))
			}
		}
	}
	for _, e := range envs {
		e.Seq = 0 // the log assigns it
	}
	appendAll(t, l, envs)
	n := uint64(len(envs))
	if err := l.WaitPublished(ctx, n); err != nil {
		t.Fatal(err)
	}
	ro, err := events.Attach(ctx, nc, events.StreamNameDefault)
	if err != nil {
		t.Fatal(err)
	}
	// stateAt is the saved state of a replay (Run, from the first event)
	// at seq, as a stop there would have saved it.
	stateAt := func(seq uint64) []byte {
		t.Helper()
		c := withOutbox(cfg)
		f := NewFolds(c)
		rr := NewRunner(ro, nil, f.All()...)
		var b []byte
		var err error
		rr.AtSeq(seq, func(ev *Event) {
			b, err = EncodeState(StateHeader{Seq: ev.Seq, EventID: ev.ID}, f, c.Outbox)
		})
		replayUntilReady(ctx, t, rr)()
		if err != nil || b == nil {
			t.Fatalf("the replay's state at %d: %v", seq, err)
		}
		return b
	}

	for _, tc := range []struct{ from, to uint64 }{
		{0, n}, {0, n / 2}, {n / 3, n}, {n / 3, 2 * n / 3}, {n - 1, n},
	} {
		t.Run(fmt.Sprintf("from %d to %d of %d", tc.from, tc.to, n), func(t *testing.T) {
			c := withOutbox(cfg)
			f := NewFolds(c)
			if tc.from > 0 {
				if _, err := LoadState(stateAt(tc.from), f, c.Outbox); err != nil {
					t.Fatal(err)
				}
			}
			fr := NewRunner(ro, nil, f.All()...)
			fr.Resume(tc.from)
			paced := 0
			if err := fr.FoldTo(ctx, tc.to, func() error { paced++; return nil }); err != nil {
				t.Fatal(err)
			}
			if fr.Applied() != tc.to {
				t.Fatalf("FoldTo(%d) left the folds at %d", tc.to, fr.Applied())
			}
			e, err := ro.Get(ctx, tc.to)
			if err != nil {
				t.Fatal(err)
			}
			got, err := EncodeState(StateHeader{Seq: tc.to, EventID: e.ID}, f, c.Outbox)
			if err != nil {
				t.Fatal(err)
			}
			if want := stateAt(tc.to); string(got) != string(want) {
				t.Fatalf("the state folded from %d to %d (%d bytes) is not the replay's there (%d bytes)", tc.from, tc.to, len(got), len(want))
			}
			if stretches := (tc.to - tc.from) / prefetchChunk; uint64(paced) < stretches {
				t.Errorf("paced %d times over %d events: want at least once a stretch of %d", paced, tc.to-tc.from, prefetchChunk)
			}
		})
	}

	t.Run("past the log's end", func(t *testing.T) {
		f := NewFolds(withOutbox(cfg))
		fr := NewRunner(ro, nil, f.All()...)
		err := fr.FoldTo(ctx, n+5, nil)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("stopped at %d", n)) {
			t.Fatalf("FoldTo past the end: %v; want it to say where the folds stopped (%d)", err, n)
		}
	})
	t.Run("pace ends it", func(t *testing.T) {
		f := NewFolds(withOutbox(cfg))
		fr := NewRunner(ro, nil, f.All()...)
		stopped := errors.New("stopped")
		if err := fr.FoldTo(ctx, n, func() error { return stopped }); !errors.Is(err, stopped) {
			t.Fatalf("FoldTo with a pace that fails: %v; want its error", err)
		}
		if fr.Applied() >= n {
			t.Fatalf("the fold went on to %d after its pace failed", fr.Applied())
		}
	})
}
