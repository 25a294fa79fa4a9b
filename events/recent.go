package events

import "sync"

// RecentMax is how many of the newest published events the log keeps in
// memory for the node's own projections, which then need not read them
// back through a consumer. It bounds memory (about a kilobyte an event);
// a reader that falls further behind reads from the stream instead.
const RecentMax = 1 << 14 // events

// recent is a ring of the newest events published to the event stream,
// indexed by sequence. The events in it are exactly those in the stream at
// those sequences, so reading from it is reading the log.
type recent struct {
	mu  sync.RWMutex
	buf [RecentMax]*Envelope
}

func (r *recent) put(e *Envelope) {
	r.mu.Lock()
	r.buf[e.Seq%RecentMax] = e
	r.mu.Unlock()
}

func (r *recent) get(seq uint64) (*Envelope, bool) {
	r.mu.RLock()
	e := r.buf[seq%RecentMax]
	r.mu.RUnlock()
	if e == nil || e.Seq != seq {
		return nil, false
	}
	return e, true
}

// Recent returns the event at seq if it is published and still held in
// memory. The envelope is shared: callers must not change it.
func (l *Log) Recent(seq uint64) (*Envelope, bool) {
	if l.wal == nil || seq > l.Published() {
		return nil, false
	}
	return l.ring.get(seq)
}

// Writable reports whether this log appends (Open) rather than only reads
// (Attach). Only a writable log has Published and Recent.
func (l *Log) Writable() bool { return l.wal != nil }
