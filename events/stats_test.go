package events

import (
	"testing"
	"time"
)

// TestCommitQuantile: the histogram's quantiles are the bucket bounds that
// hold them, never below the true value, and the open bucket reports the
// slowest commit.
func TestCommitQuantile(t *testing.T) {
	var s commitStats
	for range 98 {
		s.commit(1, 1, 300*time.Microsecond, nil) // bucket 500 µs
	}
	s.commit(1, 1, 7*time.Millisecond, nil) // bucket 8 ms
	s.commit(1, 1, 3*time.Second, nil)      // open bucket
	cs := CommitStats{Slowest: time.Duration(s.maxNanos.Load())}
	for i := range s.buckets {
		cs.Buckets[i] = s.buckets[i].Load()
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{
		{0.5, 500 * time.Microsecond},
		{0.98, 500 * time.Microsecond},
		{0.99, 8 * time.Millisecond},
		{1, 3 * time.Second},
	} {
		if got := cs.Quantile(tc.q); got != tc.want {
			t.Errorf("Quantile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if got := (CommitStats{}).Quantile(0.99); got != 0 {
		t.Errorf("Quantile of no commits = %v, want 0", got)
	}
}
