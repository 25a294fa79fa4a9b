package events

import (
	"sync/atomic"
	"time"
)

// commitStats are the group commit's running totals, for /metrics.
type commitStats struct {
	commits, failures, events, bytes atomic.Int64
	latency                          Latency // of the commits that succeeded
}

func (s *commitStats) commit(events, bytes int, took time.Duration, err error) {
	if err != nil {
		s.failures.Add(1)
		return
	}
	s.commits.Add(1)
	s.events.Add(int64(events))
	s.bytes.Add(int64(bytes))
	s.latency.Observe(took)
}

// CommitStats is what the group commit has done since the log was opened.
type CommitStats struct {
	Commits  int64           // batches written to the write-ahead stream
	Failures int64           // batches the write-ahead stream did not take
	Events   int64           // events in those batches
	Bytes    int64           // encoded bytes of those batches
	Latency  LatencySnapshot // how long the commits took; Sum is the total wait
}

// Quantile is the q-th quantile of the commits' latency (see
// LatencySnapshot.Quantile).
func (c CommitStats) Quantile(q float64) time.Duration { return c.Latency.Quantile(q) }

// CommitStats returns the group commit's running totals.
func (l *Log) CommitStats() CommitStats {
	s := &l.stats
	return CommitStats{
		Commits: s.commits.Load(), Failures: s.failures.Load(), Events: s.events.Load(), Bytes: s.bytes.Load(),
		Latency: s.latency.Snapshot(),
	}
}
