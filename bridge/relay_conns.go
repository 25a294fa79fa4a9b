package bridge

import (
	"context"
	"time"
)

// relayConnsKeptMax bounds the connections the relay keeps open to
// addressees, in use or idle. A connection outlived its lane, and was
// closed only when a later delivery to its address failed: every address
// ever delivered to kept a socket, and agents that registered again on
// new ports added more without end. Past the bound the connection idle
// longest is closed; at most relayLanesMax are in use at once.
const relayConnsKeptMax = relayLanesMax // connections

// keptConn is a connection to one address, kept between deliveries.
type keptConn struct {
	c    *Client
	used time.Time // when a delivery last ended on it
	busy bool      // a delivery is using it
}

// conn returns the connection to addr, and whether it was kept from an
// earlier delivery rather than dialled now, dialling by deadline. The
// caller releases it.
func (r *Relay) conn(ctx context.Context, addr string, deadline time.Time) (*Client, bool, error) {
	r.mu.Lock()
	if k := r.conns[addr]; k != nil && !k.busy {
		k.busy = true
		r.mu.Unlock()
		return k.c, true, nil
	}
	r.mu.Unlock()
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	c, err := dialBounded(ctx, addr, relayReplyBodyMax)
	if err != nil {
		return nil, false, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conns == nil {
		r.conns = map[string]*keptConn{}
	}
	if old := r.conns[addr]; old != nil {
		old.c.Close()
	}
	r.conns[addr] = &keptConn{c: c, busy: true}
	r.evictIdle()
	return c, false, nil
}

// evictIdle closes the connections idle longest while more than
// relayConnsKeptMax are kept. The caller holds r.mu.
func (r *Relay) evictIdle() {
	for len(r.conns) > relayConnsKeptMax {
		var oldest string
		for a, k := range r.conns {
			if !k.busy && (oldest == "" || k.used.Before(r.conns[oldest].used)) {
				oldest = a
			}
		}
		if oldest == "" {
			return // all in use
		}
		r.conns[oldest].c.Close()
		delete(r.conns, oldest)
	}
}

// release marks addr's connection idle after a delivery, if it is kept.
func (r *Relay) release(addr string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if k := r.conns[addr]; k != nil {
		k.busy, k.used = false, time.Now()
	}
}

func (r *Relay) drop(addr string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if k := r.conns[addr]; k != nil {
		k.c.Close()
		delete(r.conns, addr)
	}
}

func (r *Relay) closeConns() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for a, k := range r.conns {
		k.c.Close()
		delete(r.conns, a)
	}
}
