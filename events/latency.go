package events

import (
	"fmt"
	"io"
	"sync/atomic"
	"time"
)

// LatencyBuckets are the upper bounds of the node's latency histograms:
// powers of two from 125 µs to 1 s. A commit is an fsync (a fraction of a
// millisecond on a good disk) plus the wait in the server; an ack adds the
// wait for the commit in progress; both have tails that matter more than
// their means.
var LatencyBuckets = [...]time.Duration{
	125 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond, 8 * time.Millisecond,
	16 * time.Millisecond, 32 * time.Millisecond, 64 * time.Millisecond, 128 * time.Millisecond,
	256 * time.Millisecond, 512 * time.Millisecond, time.Second,
}

// Latency is a histogram of durations over LatencyBuckets, safe for
// concurrent use; the zero value is empty.
type Latency struct {
	// buckets[i] counts durations no longer than LatencyBuckets[i] and
	// longer than the bound before; the last counts the longer rest.
	// There is no separate count: read apart from the buckets, under
	// load it could lag them, and a scrape's +Inf bucket (the count) would
	// fall below a finite one, which the Prometheus format forbids.
	buckets [len(LatencyBuckets) + 1]atomic.Int64
	sum     atomic.Int64
	max     atomic.Int64
}

// Observe records one duration.
func (h *Latency) Observe(d time.Duration) {
	i := 0
	for i < len(LatencyBuckets) && d > LatencyBuckets[i] {
		i++
	}
	h.buckets[i].Add(1)
	h.sum.Add(int64(d))
	for {
		m := h.max.Load()
		if int64(d) <= m || h.max.CompareAndSwap(m, int64(d)) {
			return
		}
	}
}

// Snapshot returns the histogram as it stands.
func (h *Latency) Snapshot() LatencySnapshot {
	s := LatencySnapshot{Sum: time.Duration(h.sum.Load()), Max: time.Duration(h.max.Load())}
	for i := range h.buckets {
		s.Buckets[i] = h.buckets[i].Load()
		s.Count += s.Buckets[i]
	}
	return s
}

// LatencySnapshot is a Latency histogram at one moment.
type LatencySnapshot struct {
	// Buckets[i] counts durations no longer than LatencyBuckets[i] (and
	// longer than the bound before); the last, those longer than all.
	Buckets [len(LatencyBuckets) + 1]int64
	Count   int64
	Sum     time.Duration
	Max     time.Duration
}

// Quantile returns the upper bound of the bucket that holds the q-th
// quantile (0 < q <= 1): never below the true value, and at most twice
// it. It returns Max when that is smaller, or when the quantile lies past
// the last bound.
func (s LatencySnapshot) Quantile(q float64) time.Duration {
	var n int64
	for _, b := range s.Buckets {
		n += b
	}
	if n == 0 {
		return 0
	}
	rank := max(int64(q*float64(n)+0.5), 1)
	var seen int64
	for i, b := range s.Buckets {
		seen += b
		if seen >= rank && i < len(LatencyBuckets) {
			return min(LatencyBuckets[i], s.Max)
		}
	}
	return s.Max
}

// WritePrometheus writes the histogram in the Prometheus text format, in
// seconds.
func (s LatencySnapshot) WritePrometheus(w io.Writer, name, help string) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name)
	var cum int64
	for i, le := range LatencyBuckets {
		cum += s.Buckets[i]
		fmt.Fprintf(w, "%s_bucket{le=\"%g\"} %d\n", name, le.Seconds(), cum)
	}
	fmt.Fprintf(w, "%s_bucket{le=\"+Inf\"} %d\n%s_sum %g\n%s_count %d\n", name, s.Count, name, s.Sum.Seconds(), name, s.Count)
}
