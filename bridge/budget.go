package bridge

import (
	"sync"

	"github.com/aglx/ledger/protocol"
)

// Byte bounds on frames read and not yet answered. PipelineMax bounds a
// connection's frames in flight by count; these bound them by size, which
// is what memory is made of: 256 frames of 1 MiB bodies held about 845
// MiB per connection while the log was stalled, and a few connections
// could take the machine's memory.
const (
	// ConnBytesMax bounds one connection's frames in flight. A single
	// frame larger than this is still taken when the connection has
	// nothing else in flight, so that every legal frame can pass.
	ConnBytesMax = 16 << 20 // bytes, as read from the wire
	// ServerBytesMax bounds all connections' frames in flight together,
	// but for the one frame each connection may always have in flight
	// (fits): so that peers that stop reading cannot stall the others.
	ServerBytesMax = 256 << 20 // bytes, as read from the wire
)

// budget counts the bytes of frames in flight, per connection and in all,
// and makes a reader wait while taking another frame would pass a bound.
// One mutex serves both counts: a reader must see both at once, and the
// lock is held only for a few arithmetic steps per frame.
type budget struct {
	mu      sync.Mutex
	cond    sync.Cond
	used    int64 // all connections
	waiting int   // readers in acquire's wait
}

func newBudget() *budget {
	b := &budget{}
	b.cond.L = &b.mu
	return b
}

// acquire takes n bytes for c, waiting while they would pass ConnBytesMax
// for c or ServerBytesMax in all. If c stops reading meanwhile, it takes
// them at once: the frame is read already, and is answered like every
// frame read before a stop.
func (b *budget) acquire(c *conn, n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for !b.fits(c, n) && !c.isStopped() {
		b.waiting++
		b.cond.Wait()
		b.waiting--
	}
	c.bytesInFlight += n
	b.used += n
}

// fits reports whether c may take n more bytes. A connection with nothing
// in flight always may: otherwise a few peers that stop reading their
// replies could hold ServerBytesMax and stall every other connection. So
// the bound on all connections is ServerBytesMax plus one frame for each.
func (b *budget) fits(c *conn, n int64) bool {
	if c.bytesInFlight == 0 {
		return true
	}
	return c.bytesInFlight+n <= ConnBytesMax && b.used+n <= ServerBytesMax
}

// release gives back n bytes of c's.
func (b *budget) release(c *conn, n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	c.bytesInFlight -= n
	b.used -= n
	if b.waiting > 0 {
		b.cond.Broadcast()
	}
	b.mu.Unlock()
}

// wake makes waiting readers look again, for one whose connection stops.
func (b *budget) wake() {
	b.mu.Lock()
	if b.waiting > 0 {
		b.cond.Broadcast()
	}
	b.mu.Unlock()
}

// wireSize is about the bytes a frame took on the wire: its body, its
// header lines and its start line.
func wireSize(f *protocol.Frame) int64 {
	if f == nil {
		return 0
	}
	n := int64(len(f.Body)) + 16
	for _, h := range f.Headers {
		n += int64(len(h.Name) + len(h.Value) + 3)
	}
	return n
}
