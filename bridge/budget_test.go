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
	// fill gives ServerBytesMax/ConnBytesMax connections their full share,
	// so that ServerBytesMax is used up.
	fill := func(t *testing.T, b *budget) []*conn {
		var conns []*conn
		for range ServerBytesMax / ConnBytesMax {
			c := newConn()
			conns = append(conns, c)
			mustReturn(t, acquired(b, c, ConnBytesMax), "a connection's full share")
		}
		return conns
	}
	t.Run("a large frame is not overtaken by small ones", func(t *testing.T) {
		b := newBudget()
		full := fill(t, b)
		big, small := newConn(), newConn()
		mustReturn(t, acquired(b, big, 1), "big's first frame")
		mustReturn(t, acquired(b, small, 1), "small's first frame")
		bigWait := acquired(b, big, ConnBytesMax/2)
		waitQueued(t, b, 1)
		smallWait := acquired(b, small, 1)
		waitQueued(t, b, 2)
		b.release(full[0], ConnBytesMax/4) // room for small, not for big
		if returns(smallWait) {
			t.Fatal("a small frame overtook the large one that came first")
		}
		b.release(full[0], ConnBytesMax/4+2) // now room for big (the two first frames count too)
		mustReturn(t, bigWait, "the large frame, once there is room")
		if returns(smallWait) {
			t.Fatal("the small frame was taken past ServerBytesMax")
		}
		b.release(full[1], 1)
		mustReturn(t, smallWait, "the small frame, after the large one")
	})
	t.Run("a connection at its own bound holds up no one", func(t *testing.T) {
		b := newBudget()
		greedy, other := newConn(), newConn()
		mustReturn(t, acquired(b, greedy, ConnBytesMax), "greedy's full share")
		greedyWait := acquired(b, greedy, 1)
		if returns(greedyWait) {
			t.Fatal("taken past ConnBytesMax")
		}
		mustReturn(t, acquired(b, other, 1), "another connection's first frame")
		mustReturn(t, acquired(b, other, 1), "another connection's second frame, with greedy waiting")
		b.release(greedy, 1)
		mustReturn(t, greedyWait, "greedy, after its own reply")
	})
	t.Run("a release lets through only whom it makes room for", func(t *testing.T) {
		b := newBudget()
		full := fill(t, b)
		var waits []chan struct{}
		for range 3 {
			c := newConn()
			mustReturn(t, acquired(b, c, 1), "a first frame")
			waits = append(waits, acquired(b, c, ConnBytesMax/2))
			waitQueued(t, b, len(waits)) // queued in this order
		}
		for _, w := range waits {
			if returns(w) {
				t.Fatal("taken past ServerBytesMax")
			}
		}
		b.release(full[0], ConnBytesMax/2+3) // room for one (the three first frames count too)
		mustReturn(t, waits[0], "the first waiting reader")
		if returns(waits[1]) || returns(waits[2]) {
			t.Fatal("a release made room for one reader and let more through")
		}
		b.mu.Lock()
		queued := len(b.queue)
		b.mu.Unlock()
		if queued != 2 {
			t.Fatalf("%d readers queued; want 2", queued)
		}
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

// waitQueued waits until n readers wait in b's queue, so that a test
// knows the order they queued in.
func waitQueued(t *testing.T, b *budget, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b.mu.Lock()
		queued := len(b.queue)
		b.mu.Unlock()
		if queued == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d readers queued; want %d", queued, n)
		}
		time.Sleep(time.Millisecond)
	}
}
