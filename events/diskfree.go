package events

import (
	"context"
	"log/slog"
	"time"
)

// RestartFreeMin is the free space a start of the node needs on its store
// (besides what the streams hold): JetStream grants the write-ahead
// stream's reservation (WALBytesMaxDefault) only within three quarters of
// the free disk. A node that runs with less keeps running, but does not
// come back after a stop or a crash until space is freed, which an
// operator should learn before, not during, an incident (helper-61).
const RestartFreeMin = WALBytesMaxDefault * 4 / 3 // bytes: freeForReservation(WALBytesMaxDefault)

// freeForReservation is the free disk JetStream wants before it grants a
// stream's reservation of n bytes: it grants one only within three
// quarters of what is free.
func freeForReservation(n int64) int64 { return n * 4 / 3 }

// Free-space watch.
const (
	// freeCheckInterval is how often the store's free space is read.
	freeCheckInterval = 30 * time.Second
	// freeWarnInterval bounds how often a low free space is logged while
	// it stays low.
	freeWarnInterval = 10 * time.Minute
)

// StoreFree is the free space on the file system of the embedded server's
// store, or an error where it cannot be read (a platform without statfs).
func (s *Server) StoreFree() (uint64, error) { return freeBytes(s.storeDir) }

// WatchFree logs a warning, at most every freeWarnInterval, while the
// store has less free space than need, until ctx ends. need is the space a
// restart takes (RestartFreeMin for the default write-ahead stream).
func (s *Server) WatchFree(ctx context.Context, lg *slog.Logger, need uint64) {
	t := time.NewTicker(freeCheckInterval)
	defer t.Stop()
	var warned time.Time
	for {
		if free, err := s.StoreFree(); err == nil && free < need && time.Since(warned) >= freeWarnInterval {
			lg.Warn("the store's disk is nearly full: the node runs, but a restart needs more free space, and a full disk stops it taking frames",
				"dir", s.storeDir, "free_mib", free>>20, "restart_needs_mib", need>>20)
			warned = time.Now()
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
}
