package bridge

import "sync"

// Byte bounds on frames read and not yet answered. PipelineMax bounds a
// connection's frames in flight by count; these bound them by size, which
// is what memory is made of: 256 frames of 1 MiB bodies held about 845
// MiB per connection while the log was stalled, and a few connections
// could take the machine's memory. A frame counts as what it holds once
// parsed (protocol.Frame.MemorySize: its wire bytes and its payload's
// bound): counted by wire bytes alone, lists of short strings let 256 MiB
// hold some 1.3 GB.
const (
	// ConnBytesMax bounds one connection's frames in flight. A single
	// frame larger than this is still taken when the connection has
	// nothing else in flight, so that every legal frame can pass.
	ConnBytesMax = 16 << 20 // bytes of memory
	// ServerBytesMax bounds all connections' frames in flight together,
	// but for the one frame each connection may always have in flight
	// (fits): so that peers that stop reading cannot stall the others.
	ServerBytesMax = 256 << 20 // bytes of memory
)

// budget counts the bytes of frames in flight, per connection and in all,
// and makes a reader wait while taking another frame would pass a bound.
// One mutex serves both counts: a reader must see both at once, and the
// lock is held only for a few arithmetic steps per frame.
//
// Waiting readers queue in arrival order, and each is woken on its own
// when its bytes are granted. Two things follow. Under overload a release
// wakes the one reader it makes room for, not every waiting reader (with
// a broadcast, a thousand waiting connections meant a thousand wake-ups
// per frame answered, just when the node is shortest of CPU). And a large
// frame that waits for ServerBytesMax is not overtaken forever by small
// ones that happen to fit: those behind it wait their turn.
type budget struct {
	mu    sync.Mutex
	used  int64         // all connections
	queue []*budgetWait // readers waiting, in arrival order
}

// budgetWait is one reader waiting in acquire. A connection has one
// reader, so at most one of these.
type budgetWait struct {
	c       *conn
	n       int64
	granted chan struct{} // closed when the bytes are taken for it
}

func newBudget() *budget { return &budget{} }

// acquire takes n bytes for c, waiting while they would pass ConnBytesMax
// for c or ServerBytesMax in all, or while a reader that came first waits
// for ServerBytesMax. If c stops reading meanwhile, it takes them at once:
// the frame is read already, and is answered like every frame read before
// a stop.
func (b *budget) acquire(c *conn, n int64) {
	b.mu.Lock()
	if len(b.queue) == 0 && (b.fits(c, n) || c.isStopped()) {
		b.take(c, n)
		b.mu.Unlock()
		return
	}
	w := &budgetWait{c: c, n: n, granted: make(chan struct{})}
	b.queue = append(b.queue, w)
	b.grant()
	b.mu.Unlock()
	<-w.granted
}

// take counts n bytes for c; b.mu is held.
func (b *budget) take(c *conn, n int64) {
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

// grant hands bytes to the waiting readers that may have them now, in
// arrival order; b.mu is held. A reader held by its own connection's bound
// does not hold up the others; the first one held by ServerBytesMax holds
// up every later one that would need room in it.
func (b *budget) grant() {
	held := false // a reader ahead waits for room in ServerBytesMax
	kept := b.queue[:0]
	for _, w := range b.queue {
		c := w.c
		switch {
		case c.isStopped() || c.bytesInFlight == 0:
		case c.bytesInFlight+w.n > ConnBytesMax:
			kept = append(kept, w)
			continue
		case held || b.used+w.n > ServerBytesMax:
			held = true
			kept = append(kept, w)
			continue
		}
		b.take(c, w.n)
		close(w.granted)
	}
	clear(b.queue[len(kept):])
	b.queue = kept
}

// release gives back n bytes of c's.
func (b *budget) release(c *conn, n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	c.bytesInFlight -= n
	b.used -= n
	if len(b.queue) > 0 {
		b.grant()
	}
	b.mu.Unlock()
}

// wake lets waiting readers look again, for one whose connection stops.
func (b *budget) wake() {
	b.mu.Lock()
	if len(b.queue) > 0 {
		b.grant()
	}
	b.mu.Unlock()
}
