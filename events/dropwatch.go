package events

import (
	"context"
	"sync"

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
type dropWatch struct {
	nc *nats.Conn
	ch chan nats.Status

	mu     sync.Mutex
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

func watchDrops(nc *nats.Conn) *dropWatch {
	w := &dropWatch{nc: nc, ch: nc.StatusChanged(nats.DISCONNECTED, nats.RECONNECTING, nats.CLOSED), done: make(chan struct{})}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	go w.run()
	return w
}

func (w *dropWatch) run() {
	defer close(w.done)
	for st := range w.ch {
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
