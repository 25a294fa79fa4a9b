package events

import (
	"bytes"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestLatencyQuantile: a quantile is the bound of the bucket that holds it,
// never below the true value, and the open bucket reports the maximum.
func TestLatencyQuantile(t *testing.T) {
	var h Latency
	for range 98 {
		h.Observe(300 * time.Microsecond) // bucket 500 µs
	}
	h.Observe(7 * time.Millisecond) // bucket 8 ms
	h.Observe(3 * time.Second)      // past every bound
	s := h.Snapshot()
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{
		{0.5, 500 * time.Microsecond},
		{0.98, 500 * time.Microsecond},
		{0.99, 8 * time.Millisecond},
		{1, 3 * time.Second},
	} {
		if got := s.Quantile(tc.q); got != tc.want {
			t.Errorf("Quantile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if s.Count != 100 || s.Max != 3*time.Second || s.Sum != 98*300*time.Microsecond+7*time.Millisecond+3*time.Second {
		t.Errorf("count %d, max %v, sum %v", s.Count, s.Max, s.Sum)
	}
	if got := (LatencySnapshot{}).Quantile(0.99); got != 0 {
		t.Errorf("Quantile of nothing = %v, want 0", got)
	}
	var one Latency
	one.Observe(100 * time.Microsecond)
	if got := one.Snapshot().Quantile(0.5); got != 100*time.Microsecond {
		t.Errorf("Quantile of one 100 µs = %v: a bound above the maximum", got)
	}
}

// TestLatencyPrometheus: the buckets are cumulative and end with +Inf,
// which must equal the count.
func TestLatencyPrometheus(t *testing.T) {
	var h Latency
	h.Observe(time.Millisecond)
	h.Observe(3 * time.Millisecond)
	h.Observe(2 * time.Second)
	var b bytes.Buffer
	h.Snapshot().WritePrometheus(&b, "x_seconds", "help")
	for _, want := range []string{
		"# TYPE x_seconds histogram\n", `x_seconds_bucket{le="0.001"} 1` + "\n", `x_seconds_bucket{le="0.004"} 2` + "\n",
		`x_seconds_bucket{le="1"} 2` + "\n", `x_seconds_bucket{le="+Inf"} 3` + "\n", "x_seconds_count 3\n", "x_seconds_sum 2.004\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("missing %q in\n%s", want, b.String())
		}
	}
}

// TestLatencyScrapeIsCumulative: a scrape taken while durations are being
// observed must still be a valid Prometheus histogram, every bucket line
// at least the one before it and +Inf equal to _count. The count was read
// apart from the buckets and could lag them.
func TestLatencyScrapeIsCumulative(t *testing.T) {
	var h Latency
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stop.Load() {
			h.Observe(300 * time.Microsecond)
		}
	}()
	defer func() { stop.Store(true); <-done }()
	for scrape := 0; scrape < 2000; scrape++ {
		var b bytes.Buffer
		h.Snapshot().WritePrometheus(&b, "x_seconds", "x")
		var prev int64
		var inf, count string
		for _, line := range strings.Split(b.String(), "\n") {
			f := strings.Fields(line)
			switch {
			case strings.HasPrefix(line, "x_seconds_bucket"):
				v, _ := strconv.ParseInt(f[1], 10, 64)
				if v < prev {
					t.Fatalf("scrape %d: %q is below the bucket before it (%d):\n%s", scrape, line, prev, b.String())
				}
				prev = v
				if strings.Contains(line, "+Inf") {
					inf = f[1]
				}
			case strings.HasPrefix(line, "x_seconds_count"):
				count = f[1]
			}
		}
		if inf != count {
			t.Fatalf("scrape %d: +Inf %s, _count %s", scrape, inf, count)
		}
	}
}
