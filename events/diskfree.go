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

// StoreUsage is what the embedded JetStream's streams hold and the most
// it lets them hold, in bytes. The server sets that limit at each start,
// unless told one: three quarters of the disk's free space plus three
// quarters of what the streams already hold. At the limit it refuses
// every write ("insufficient resources"), while the disk may still have
// a quarter of its space free: on a 6.5 GiB disk the node stopped with
// 1.6 GiB free, before the free-space warning could fire (helper-106).
// max is 0 while JetStream is off.
func (s *Server) StoreUsage() (used, max int64) {
	cfg := s.JetStreamConfig()
	if cfg == nil {
		return 0, 0
	}
	return int64(s.GlobalAccount().JetStreamUsage().Store), cfg.MaxStore
}

// StoreUsedWarn is the share of the store's limit (StoreUsage) past which
// WatchFree warns: at the limit every frame is refused.
const StoreUsedWarn = 0.9

// WatchFree logs a warning, at most every freeWarnInterval, while the
// store has less free space than need, or its streams hold more than
// StoreUsedWarn of what JetStream lets them, until ctx ends. need is the
// space a restart takes (RestartFreeMin for the default write-ahead
// stream).
func (s *Server) WatchFree(ctx context.Context, lg *slog.Logger, need uint64) {
	t := time.NewTicker(freeCheckInterval)
	defer t.Stop()
	var warned, warnedLimit time.Time
	for {
		if free, err := s.StoreFree(); err == nil && free < need && time.Since(warned) >= freeWarnInterval {
			lg.Warn("the store's disk is nearly full: the node runs, but a restart needs more free space, and a full disk stops it taking frames",
				"dir", s.storeDir, "free_mib", free>>20, "restart_needs_mib", need>>20)
			warned = time.Now()
		}
		if used, max := s.StoreUsage(); max > 0 && float64(used) >= StoreUsedWarn*float64(max) && time.Since(warnedLimit) >= freeWarnInterval {
			lg.Warn("the store nears JetStream's limit on it: at the limit every frame is refused (503), with the disk still a quarter free. JetStream sets the limit at each start to three quarters of the free space plus of what the streams hold: free disk space, or move the store to a larger disk, and restart the node",
				"dir", s.storeDir, "used_mib", used>>20, "limit_mib", max>>20)
			warnedLimit = time.Now()
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
}
