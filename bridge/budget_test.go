package bridge

import (
	"testing"
	"time"
)

// TestBudget: a reader waits while a frame would take its connection past
// ConnBytesMax or all connections past ServerBytesMax, goes on when
// replies give bytes back, always takes a frame when nothing else is in
// flight on its connection (so a frame larger than a bound still passes,
// and peers that do not read their replies cannot stall the others), and
// stops waiting when its connection stops reading.
func TestBudget(t *testing.T) {
	newConn := func() *conn { return &conn{stopped: make(chan struct{})} }
	// acquired reports whether acquire returned within a moment.
	acquired := func(b *budget, c *conn, n int64) chan struct{} {
		done := make(chan struct{})
		go func() { b.acquire(c, n); close(done) }()
		return done
	}
	returns := func(done chan struct{}) bool {
		select {
		case <-done:
			return true
		case <-time.After(50 * time.Millisecond):
			return false
		}
	}
	mustReturn := func(t *testing.T, done chan struct{}, what string) {
		t.Helper()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: acquire still waits", what)
		}
	}

	t.Run("one connection", func(t *testing.T) {
		b, c := newBudget(), newConn()
		mustReturn(t, acquired(b, c, ConnBytesMax+1), "a frame larger than the bound, nothing in flight")
		wait := acquired(b, c, 1)
		if returns(wait) {
			t.Fatal("a second frame was taken past ConnBytesMax")
		}
		b.release(c, ConnBytesMax+1)
		mustReturn(t, wait, "after the first frame's reply")
		if c.bytesInFlight != 1 || b.used != 1 {
			t.Fatalf("in flight: conn %d, all %d; want 1, 1", c.bytesInFlight, b.used)
		}
	})
	t.Run("all connections", func(t *testing.T) {
		b := newBudget()
		var conns []*conn
		for range ServerBytesMax / ConnBytesMax {
			c := newConn()
			conns = append(conns, c)
			mustReturn(t, acquired(b, c, ConnBytesMax), "a connection's full share")
		}
		late := newConn()
		mustReturn(t, acquired(b, late, 1), "a connection's first frame, whatever the others hold")
		wait := acquired(b, late, 1)
		if returns(wait) {
			t.Fatal("a second frame was taken past ServerBytesMax")
		}
		b.release(conns[0], ConnBytesMax)
		mustReturn(t, wait, "after another connection's reply")
	})
	t.Run("a stop ends the wait", func(t *testing.T) {
		b, c := newBudget(), newConn()
		b.acquire(c, ConnBytesMax)
		wait := acquired(b, c, ConnBytesMax)
		if returns(wait) {
			t.Fatal("taken past ConnBytesMax")
		}
		close(c.stopped)
		b.wake()
		mustReturn(t, wait, "after the connection stopped reading")
	})
}
