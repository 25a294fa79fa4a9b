package bridge

import (
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// HTTPConnectionsMax bounds the HTTP API's open connections; further ones
// wait in the listen backlog until one closes, or until a kept-alive
// connection that is idle is closed to make room.
const HTTPConnectionsMax = 256 // connections

// HTTPHeaderBytesMax bounds a request's headers. The API reads a path and
// a few query parameters; Go's default, 1 MiB, let the 256 connections
// hold 256 MiB of headers at once (helper-98). Past it (and the 4 KiB
// net/http allows beyond) the server answers 431 itself.
const HTTPHeaderBytesMax = 64 << 10 // bytes

// LimitListener lets at most n connections from ln be open at once: the
// HTTP API reads projection state under the fold's read lock, and any
// number of clients must not be able to hold it, or the node's memory.
//
// Its ConnState must be the server's ConnState hook: a connection kept
// alive between requests holds its slot for the server's IdleTimeout, and
// with every slot held so, until 2026-11-30, a new client (the
// orchestrator's health check among them) waited that long. Now, when all
// slots are taken, the connection idle longest is closed, as the server
// may close any idle kept-alive connection; a client retries its request
// on a new one.
//
// A connection whose client does not read its answer holds its slot, in
// the server's eyes active, for the whole write timeout (a minute): 256
// clients that asked for a page of history and read nothing kept
// /healthz waiting in the listen backlog until the orchestrator gave up
// on the node (helper-88). So when no connection is idle, the one whose
// write has been stuck longest, for at least writeStallMax, is closed
// instead: at capacity, clients that do not read their answers go first.
func LimitListener(ln net.Listener, n int) *LimitedListener {
	return &LimitedListener{Listener: ln, slots: make(chan struct{}, n), done: make(chan struct{}),
		idle: map[net.Conn]time.Time{}, open: map[*limitConn]struct{}{}, wentIdle: make(chan struct{}, 1), grace: halfReceivedGrace}
}

// writeStallMax is how long a write to a client must have been stuck
// before its connection may be closed to make room: a client that reads
// its answer takes it within milliseconds on any network the API serves.
const writeStallMax = time.Second

// LimitedListener is LimitListener's listener.
type LimitedListener struct {
	net.Listener
	slots     chan struct{}
	done      chan struct{}
	closeOnce sync.Once

	mu       sync.Mutex
	idle     map[net.Conn]time.Time  // open connections the server keeps alive between requests, since when
	open     map[*limitConn]struct{} // every connection holding a slot
	wentIdle chan struct{}           // a connection became idle (capacity 1)
	grace    time.Duration           // halfReceivedGrace; set before serving
}

// halfReceivedGrace is how long after its last byte came in an idle
// connection is taken to be receiving its next request, and is not closed
// to make room. net/http calls a connection active only once a request's
// headers are in, and starts ReadHeaderTimeout only after its first four
// bytes: a client that trickled one byte now and then held its slot for
// the whole idle timeout. A request's bytes come in together; a pause
// this long is no request coming in.
const halfReceivedGrace = time.Second

// Accept takes the next connection and waits for a free slot for it,
// closing the longest-idle connection whenever none is free. It takes the
// connection first, so that idle ones are closed only for a client that
// is there: the one waiting is the only connection beyond n.
func (l *LimitedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	for {
		select {
		case l.slots <- struct{}{}:
			return l.limited(c), nil
		default:
		}
		l.closeIdlest()
		select {
		case l.slots <- struct{}{}:
			return l.limited(c), nil
		case <-l.wentIdle: // one may be closed now
		case <-time.After(l.grace): // or one's grace may be over
		case <-l.done:
			c.Close()
			return nil, net.ErrClosed
		}
	}
}

// limited wraps a connection that got a slot. It counts as having read
// when it was accepted, so that it has halfReceivedGrace to send its
// first bytes before it may be closed to make room.
func (l *LimitedListener) limited(c net.Conn) *limitConn {
	lc := &limitConn{Conn: c}
	lc.release = func() {
		l.mu.Lock()
		delete(l.open, lc)
		l.mu.Unlock()
		<-l.slots
	}
	lc.lastRead.Store(time.Now().UnixNano())
	l.mu.Lock()
	l.open[lc] = struct{}{}
	l.mu.Unlock()
	return lc
}

// ConnState is the http.Server's ConnState hook: it tracks which
// connections are idle. A new connection, with no request read yet, is
// idle too: one that sends nothing held its slot for the whole
// ReadHeaderTimeout, which net/http starts only with the first bytes, and
// a client reopening silent connections kept health checks waiting for
// seconds each (helper-52).
func (l *LimitedListener) ConnState(c net.Conn, st http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if st != http.StateIdle && st != http.StateNew {
		delete(l.idle, c)
		return
	}
	l.idle[c] = time.Now()
	select {
	case l.wentIdle <- struct{}{}:
	default:
	}
}

// closeIdlest closes the connection idle the longest, if any is, and
// else the one whose write has been stuck longest, if one has been for
// writeStallMax. The server calls a connection active only once a
// request's headers are in, so one that read bytes within
// halfReceivedGrace is taking a request and is left alone: closing it
// cost its client the answer.
func (l *LimitedListener) closeIdlest() {
	l.mu.Lock()
	var oldest net.Conn
	var since time.Time
	now := time.Now().UnixNano()
	for c, t := range l.idle {
		if lc, ok := c.(*limitConn); ok && now-lc.lastRead.Load() < int64(l.grace) {
			continue
		}
		if oldest == nil || t.Before(since) {
			oldest, since = c, t
		}
	}
	if oldest == nil {
		stuck := now - int64(writeStallMax)
		for lc := range l.open {
			if w := lc.writing.Load(); w != 0 && w <= stuck {
				oldest, stuck = lc, w
			}
		}
	}
	delete(l.idle, oldest)
	l.mu.Unlock()
	if oldest != nil {
		oldest.Close()
	}
}

// Held reports how many connections hold a slot, and how many of them
// are idle between requests: with every slot held and none idle, a new
// connection waits until one goes idle or a write has been stuck for
// writeStallMax.
func (l *LimitedListener) Held() (open, idle int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.open), len(l.idle)
}

func (l *LimitedListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
	// lastRead is when a read last returned bytes, and writing when the
	// write in progress began (0: none), in Unix nanoseconds.
	lastRead, writing atomic.Int64
}

// Write writes b in pieces of writePieceMax, stamping writing before
// each: net/http hands a whole body to one Write, and stamped once, a
// client reading a third of a megabyte steadily over a slow link looked
// stuck after a second and was cut (helper-89). Stuck now means no piece
// went out for writeStallMax.
func (c *limitConn) Write(b []byte) (int, error) {
	defer c.writing.Store(0)
	n := 0
	for n < len(b) {
		c.writing.Store(time.Now().UnixNano())
		m, err := c.Conn.Write(b[n:min(len(b), n+writePieceMax)])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// writePieceMax is the most a connection writes at once: at 32 KiB a
// piece, a client reading at 32 KB/s or more is never taken for stuck.
const writePieceMax = 32 << 10 // bytes

func (c *limitConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.lastRead.Store(time.Now().UnixNano())
	}
	return n, err
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
