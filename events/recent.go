package events

import (
	"sync"

	"github.com/aglx/ledger/protocol"
)

// RecentMax is how many of the newest published events the log keeps in
// memory for the node's own projections, which then need not read them
// back through a consumer. A reader that falls further behind reads from
// the stream instead.
const RecentMax = 1 << 14 // events

// RecentBytesMax bounds the memory of the events kept (as
// envelopeMemory counts it). Agents' events take a few kilobytes each, so
// RecentMax is the bound that holds; without this one, 16,384 events of
// 1 MiB bodies, each with its parsed payload, would have held some 80 GiB.
const RecentBytesMax = 128 << 20 // bytes

// envelopeFixed is about what an envelope takes besides its headers, body
// and payload: its strings and the structs around them.
const envelopeFixed = 512 // bytes

// envelopeMemory bounds the memory e holds: its headers, its body and the
// parsed payload it carries (protocol.ParsedSizePerBodyByteMax).
func envelopeMemory(e *Envelope) int64 {
	return envelopeFixed + protocol.MemorySize(e.Headers, e.Body)
}

// recent is a ring of the newest events published to the event stream,
// indexed by sequence. The events in it are exactly those in the stream at
// those sequences, so reading from it is reading the log. It holds at most
// RecentMax events and RecentBytesMax bytes: past the bytes, the oldest
// are let go first.
type recent struct {
	mu     sync.RWMutex
	buf    [RecentMax]*Envelope
	bytes  int64  // envelopeMemory of the events in buf
	oldest uint64 // no event below this sequence is in buf
}

// put adds e, whose sequence follows those put before.
func (r *recent) put(e *Envelope) {
	r.mu.Lock()
	defer r.mu.Unlock()
	slot := &r.buf[e.Seq%RecentMax]
	if *slot != nil {
		r.bytes -= envelopeMemory(*slot)
	}
	*slot = e
	r.bytes += envelopeMemory(e)
	if e.Seq >= RecentMax {
		r.oldest = max(r.oldest, e.Seq-RecentMax+1)
	}
	for r.bytes > RecentBytesMax && r.oldest < e.Seq {
		if old := &r.buf[r.oldest%RecentMax]; *old != nil && (*old).Seq == r.oldest {
			r.bytes -= envelopeMemory(*old)
			*old = nil
		}
		r.oldest++
	}
}

// held is the memory of the events in the ring.
func (r *recent) held() int64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.bytes
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
