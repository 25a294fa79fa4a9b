package events

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestEventStreamRepairsAfterFailedPublishes makes the event stream refuse
// every publish for a while (messages bigger than it allows), appends
// meanwhile, then lets it take them again. Every acknowledged event must
// end up in the event stream exactly once, at the sequence its append
// was promised, and in order.
//
// The publisher asks for an acknowledgement only at the end of each run of
// events (publishLoop); the refused events before it are dropped by the
// server without a word. This test fails if such a silent loss is not
// noticed and repaired.
func TestEventStreamRepairsAfterFailedPublishes(t *testing.T) {
	l, nc := openTestLog(t, t.TempDir())
	ctx := context.Background()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	var envs []*Envelope
	for i := range 60 {
		envs = append(envs, testEnvelope(i, "task.assign", "agent://a.local", "agent://b.local"))
	}
	appendAll(t, l, envs[:20]...)

	cfg := l.cfg.StreamConfig()
	refusing := cfg
	refusing.MaxMsgSize = 16 // bytes: smaller than any event
	if _, err := js.UpdateStream(ctx, refusing); err != nil {
		t.Fatal(err)
	}
	wal, err := js.Stream(ctx, l.cfg.walStream())
	if err != nil {
		t.Fatal(err)
	}
	info, err := wal.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	walBefore := info.State.LastSeq
	pend := make([]*Pending, 0, 40)
	for _, e := range envs[20:] {
		pend = append(pend, l.Append(ctx, e))
	}
	// Once the first batch is on the write-ahead stream, its publish has
	// been refused or is about to be.
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := wal.Info(ctx)
		if err == nil && info.State.LastSeq > walBefore {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no batch reached the write-ahead stream: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := l.Published(); got != 20 {
		t.Fatalf("while the event stream refuses publishes, Published() = %d, want 20", got)
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
}
