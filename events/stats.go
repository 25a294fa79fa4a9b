package events

import (
	"sync/atomic"
	"time"
)

// CommitBuckets are the upper bounds of the commit-latency histogram: powers
// of two from 125 µs, because a commit is an fsync (a fraction of a
// millisecond on a good disk) plus the wait in the server, and its tail is
// what an ack's p99 follows.
var CommitBuckets = [...]time.Duration{
	125 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond, 8 * time.Millisecond,
	16 * time.Millisecond, 32 * time.Millisecond, 64 * time.Millisecond, 128 * time.Millisecond,
	256 * time.Millisecond, 512 * time.Millisecond, time.Second,
}

// commitStats are the group commit's running totals, for /metrics.
type commitStats struct {
	commits, failures, events, bytes atomic.Int64
	nanos                            atomic.Int64 // time spent waiting for the write-ahead stream
	maxNanos                         atomic.Int64 // the slowest commit so far
	// buckets[i] counts commits no slower than CommitBuckets[i] and slower
	// than the bucket before; the last counts the slower rest.
	buckets [len(CommitBuckets) + 1]atomic.Int64
}

func (s *commitStats) commit(events, bytes int, took time.Duration, err error) {
	if err != nil {
		s.failures.Add(1)
		return
	}
	s.commits.Add(1)
	s.events.Add(int64(events))
	s.bytes.Add(int64(bytes))
	s.nanos.Add(int64(took))
	i := 0
	for i < len(CommitBuckets) && took > CommitBuckets[i] {
		i++
	}
	s.buckets[i].Add(1)
	for {
		m := s.maxNanos.Load()
		if int64(took) <= m || s.maxNanos.CompareAndSwap(m, int64(took)) {
			return
		}
	}
}

// CommitStats is what the group commit has done since the log was opened.
type CommitStats struct {
	Commits  int64         // batches written to the write-ahead stream
	Failures int64         // batches the write-ahead stream did not take
	Events   int64         // events in those batches
	Bytes    int64         // encoded bytes of those batches
	Waiting  time.Duration // total time spent waiting for the commits
	Slowest  time.Duration // the slowest commit
	// Buckets counts commits by latency: Buckets[i] those no slower than
	// CommitBuckets[i] (and slower than the one before), the last one
	// those slower than every bound.
	Buckets [len(CommitBuckets) + 1]int64
}

// Quantile returns the upper bound of the latency bucket that holds the
// q-th quantile of the commits (0 < q <= 1): an overestimate by at most
// a factor of two. It returns Slowest when that bucket is the open one.
func (c CommitStats) Quantile(q float64) time.Duration {
	var n int64
	for _, b := range c.Buckets {
		n += b
	}
	if n == 0 {
		return 0
	}
	rank := int64(q*float64(n) + 0.5)
	var seen int64
	for i, b := range c.Buckets {
		seen += b
		if seen >= rank && i < len(CommitBuckets) {
			return min(CommitBuckets[i], c.Slowest)
		}
	}
	return c.Slowest
}

// CommitStats returns the group commit's running totals.
func (l *Log) CommitStats() CommitStats {
	s := &l.stats
	cs := CommitStats{
		Commits: s.commits.Load(), Failures: s.failures.Load(), Events: s.events.Load(), Bytes: s.bytes.Load(),
		Waiting: time.Duration(s.nanos.Load()), Slowest: time.Duration(s.maxNanos.Load()),
	}
	for i := range s.buckets {
		cs.Buckets[i] = s.buckets[i].Load()
	}
	return cs
}
