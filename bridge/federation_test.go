package bridge

import (
	"testing"
	"time"
)

// TestSyncWait: a push that fails doubles the wait before the next, from
// the interval up to SyncRetryMax (never below the interval, even when
// the interval is longer), and one that succeeds goes back to the
// interval. Every refused registry.sync stays in the peer's log, so
// pushing at the interval to a peer that has not bound the node's key
// yet filled its log with refusals (helper-73).
func TestSyncWait(t *testing.T) {
	const s = time.Second
	tests := []struct {
		interval, last time.Duration
		failed         bool
		want           time.Duration
	}{
		{10 * s, 10 * s, false, 10 * s},
		{10 * s, 10 * s, true, 20 * s},
		{10 * s, 20 * s, true, 40 * s},
		{10 * s, 160 * s, true, SyncRetryMax},
		{10 * s, SyncRetryMax, true, SyncRetryMax},
		{10 * s, SyncRetryMax, false, 10 * s},
		{time.Hour, time.Hour, true, time.Hour},
		{100 * time.Millisecond, 0, true, 100 * time.Millisecond},
	}
	for _, tt := range tests {
		if got := syncWait(tt.interval, tt.last, tt.failed); got != tt.want {
			t.Errorf("syncWait(%s, %s, failed %v) = %s, want %s", tt.interval, tt.last, tt.failed, got, tt.want)
		}
	}
	// From the interval, failures reach the bound in a few steps and stay.
	w := 10 * s
	for range 10 {
		w = syncWait(10*s, w, true)
	}
	if w != SyncRetryMax {
		t.Errorf("after ten failures the wait is %s, want %s", w, SyncRetryMax)
	}
}
