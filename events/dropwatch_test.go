package events

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// TestDropWatchTimesEachDrop: the status listener's channel is bounded and
// may lose a CONNECTED; the next DISCONNECTED must still start the clock
// again, or the log would refuse appends at once after a later drop,
// without the grace a reconnection needs (ConnDownGrace).
func TestDropWatchTimesEachDrop(t *testing.T) {
	cases := []struct {
		name     string
		statuses []nats.Status
		fresh    bool // down since the last status, not the first
	}{
		{"a reconnection seen", []nats.Status{nats.DISCONNECTED, nats.RECONNECTING, nats.CONNECTED, nats.DISCONNECTED}, true},
		{"a reconnection lost", []nats.Status{nats.DISCONNECTED, nats.RECONNECTING, nats.DISCONNECTED}, true},
		{"still reconnecting", []nats.Status{nats.DISCONNECTED, nats.RECONNECTING, nats.RECONNECTING}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ch := make(chan nats.Status)
			w := &dropWatch{ch: ch, done: make(chan struct{})}
			w.ctx, w.cancel = context.WithCancel(context.Background())
			go w.run()
			var first, beforeLast int64
			for i, st := range tc.statuses {
				if i == len(tc.statuses)-1 {
					beforeLast = int64(time.Since(dropEpoch)) + 1
				}
				ch <- st
				if i == 0 {
					first = waitDownSince(t, w)
				}
			}
			close(ch)
			<-w.done
			got := w.downSince.Load()
			if tc.fresh && got < beforeLast {
				t.Fatalf("down since %d, before the last drop began (%d)", got, beforeLast)
			}
			if !tc.fresh && got != first {
				t.Fatalf("down since %d, want the first drop's %d", got, first)
			}
		})
	}
}

// waitDownSince polls until the watch has taken a drop.
func waitDownSince(t *testing.T, w *dropWatch) int64 {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if v := w.downSince.Load(); v != 0 {
			return v
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("the watch did not take the drop")
	return 0
}
