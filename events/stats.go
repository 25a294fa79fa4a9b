package events

import (
	"sync/atomic"
	"time"
)

// commitStats are the group commit's running totals, for /metrics.
type commitStats struct {
	commits, failures, events, bytes atomic.Int64
	nanos                            atomic.Int64 // time spent waiting for the write-ahead stream
	maxNanos                         atomic.Int64 // the slowest commit so far
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
}

// CommitStats returns the group commit's running totals.
func (l *Log) CommitStats() CommitStats {
	s := &l.stats
	return CommitStats{
		Commits: s.commits.Load(), Failures: s.failures.Load(), Events: s.events.Load(), Bytes: s.bytes.Load(),
		Waiting: time.Duration(s.nanos.Load()), Slowest: time.Duration(s.maxNanos.Load()),
	}
}
