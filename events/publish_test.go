package events

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestEventStreamRepairsAfterFailedPublishes makes the event stream refuse
// publishes for a while, appends meanwhile, then lets it take them again.
// Every acknowledged event must end up in the event stream exactly once,
// at the sequence its append was promised, and in order.
//
// With Config.ExclusiveWriter the publisher asks for an acknowledgement
// only at the end of each run of events (publishLoop); a refused event
// before it is dropped by the server without a word. The cases that refuse
// one event in the middle of a run hold it to each event's
// expected-last-sequence precondition: without it, the events after the
// refused one would be stored one sequence early. Both modes are run.
func TestEventStreamRepairsAfterFailedPublishes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		maxSize   int32 // the event stream's MaxMsgSize while it refuses
		big       int   // index of an event made too big for it, or -1
		exclusive bool  // Config.ExclusiveWriter: a run's last event alone is acknowledged
	}{
		{name: "every publish refused", maxSize: 16, big: -1},
		{name: "one event in a run refused", maxSize: 2048, big: 30},
		{name: "every publish refused, exclusive writer", maxSize: 16, big: -1, exclusive: true},
		{name: "one event in a run refused, exclusive writer", maxSize: 2048, big: 30, exclusive: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			nc := connectTestServer(t, ServerConfig{DataDir: t.TempDir(), Listen: "127.0.0.1:0"})
			warned := &warnings{}
			l, err := Open(ctx, nc, Config{ExclusiveWriter: tc.exclusive}, slog.New(warned))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close(ctx) })
			js := testJetStream(t, nc)
			envs := taskEnvelopes(60)
			if tc.big >= 0 {
				envs[tc.big].Body = bytes.Repeat([]byte("x"), 4096)
			}
			appendAll(t, l, envs[:20]...)

			cfg := l.cfg.StreamConfig()
			refusing := cfg
			refusing.MaxMsgSize = tc.maxSize
			if _, err := js.UpdateStream(ctx, refusing); err != nil {
				t.Fatal(err)
			}
			walBefore := walLastSeq(t, js, l)
			pend := make([]*Pending, 0, 40)
			for _, e := range envs[20:] {
				pend = append(pend, l.Append(ctx, e))
			}
			if _, err := pend[len(pend)-1].Wait(ctx); err != nil {
				t.Fatal(err)
			}
			if walLastSeq(t, js, l) <= walBefore {
				t.Fatal("no batch reached the write-ahead stream")
			}
			// The stream is restored only once the publisher has met the
			// refusal, so that the repair is what this test sees.
			deadline := time.Now().Add(10 * time.Second)
			for !warned.saw("publishing to the event stream failed") {
				if time.Now().After(deadline) {
					t.Fatal("the publisher never reported the refused publish")
				}
				time.Sleep(5 * time.Millisecond)
			}
			if tc.big < 0 {
				if got := l.Published(); got != 20 {
					t.Fatalf("while the event stream refuses every publish, Published() = %d, want 20", got)
				}
			}
			if _, err := js.UpdateStream(ctx, cfg); err != nil {
				t.Fatal(err)
			}

			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			for i, p := range pend {
				a, err := p.Wait(wctx)
				if err != nil {
					t.Fatalf("append %d: %v", 20+i, err)
				}
				if a.Seq != uint64(21+i) {
					t.Fatalf("append %d got seq %d, want %d", 20+i, a.Seq, 21+i)
				}
			}
			if err := l.WaitPublished(wctx, 60); err != nil {
				t.Fatal(err)
			}
			if last, err := l.LastSeq(ctx); err != nil || last != 60 {
				t.Fatalf("the event stream ends at %d (%v), want 60", last, err)
			}
			for seq := uint64(1); seq <= 60; seq++ {
				e, err := l.Get(ctx, seq)
				if err != nil || e.ID != envs[seq-1].ID {
					t.Fatalf("Get(%d) = %v, %v; want event %s", seq, e, err, envs[seq-1].ID)
				}
			}
		})
	}
}

// warnings is a slog.Handler that keeps the messages of the records it is
// given, for a test to wait for one.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) Enabled(context.Context, slog.Level) bool { return true }
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler       { return w }
func (w *warnings) WithGroup(string) slog.Handler            { return w }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, r.Message)
	return nil
}

// saw reports whether a message containing s was logged.
func (w *warnings) saw(s string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range w.msgs {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}
