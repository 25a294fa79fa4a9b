package events

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// dropWatch hands out contexts for requests to JetStream that are
// cancelled when the connection drops. A request in flight at that moment
// may never be answered: the server that had it may be gone, and after a
// reconnection nothing sends it again. Waiting AckTimeout for it stalled
// every append for 30 s after a NATS restart that took 30 ms
// (TestNATSServerRestart). A request made while the connection is down is
// different: the client buffers it and sends it on reconnection, so it
// keeps its full wait. The async publisher of nats.go treats its own
// futures the same way (ErrDisconnected on reconnection).
//
// It also knows since when the connection has been down, so that the log
// can refuse appends at once, and say so in its health, once it has been
// down longer than a reconnection takes (ConnDownGrace).
type dropWatch struct {
	nc *nats.Conn
	ch chan nats.Status
	// downSince is when the connection dropped, as nanoseconds since
	// dropEpoch plus one (a monotonic reading, which a step of the wall
	// clock does not move: helper-105); 0 while it is up.
	downSince atomic.Int64

	mu     sync.Mutex
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

func watchDrops(nc *nats.Conn) *dropWatch {
	w := &dropWatch{nc: nc, ch: nc.StatusChanged(nats.DISCONNECTED, nats.RECONNECTING, nats.CLOSED, nats.CONNECTED), done: make(chan struct{})}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	go w.run()
	return w
}

func (w *dropWatch) run() {
	defer close(w.done)
	for st := range w.ch {
		if st == nats.CONNECTED {
			w.downSince.Store(0)
			continue
		}
		now := int64(time.Since(dropEpoch)) + 1
		if st == nats.DISCONNECTED {
			// A drop starts here, whatever downSince holds: a CONNECTED
			// the bounded channel lost would otherwise leave the last
			// drop's time, and this drop would skip ConnDownGrace.
			w.downSince.Store(now)
		} else {
			w.downSince.CompareAndSwap(0, now)
		}
		w.mu.Lock()
		w.cancel()
		if st != nats.CLOSED {
			w.ctx, w.cancel = context.WithCancel(context.Background())
		}
		w.mu.Unlock()
		if st == nats.CLOSED {
			return
		}
	}
}

// down returns since when the connection has been down, and whether it
// is. The status listener may miss a change (its channel is bounded), so a
// connection it thinks down is asked again: a missed reconnection must
// not refuse appends for ever.
func (w *dropWatch) down() (time.Time, bool) {
	since := w.downSince.Load()
	if since == 0 {
		return time.Time{}, false
	}
	if w.nc.Status() == nats.CONNECTED {
		w.downSince.CompareAndSwap(since, 0)
		return time.Time{}, false
	}
	return dropEpoch.Add(time.Duration(since - 1)), true
}

// dropEpoch is what downSince counts from: a time.Time with the monotonic
// clock's reading, so that time.Since of what down returns is monotonic.
var dropEpoch = time.Now()

// context is the context for a request made now: it ends when the
// connection next drops.
func (w *dropWatch) context() context.Context {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ctx
}

// stop ends the watch; contexts handed out are cancelled.
func (w *dropWatch) stop() {
	w.nc.RemoveStatusListener(w.ch)
	<-w.done
	w.mu.Lock()
	w.cancel()
	w.mu.Unlock()
}
