package bridge

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/aglx/ledger/events"
)

// TestShutdownEndsARefusalsDrain: a connection over the limit gets its
// 429, and the node then reads and drops its input for up to
// refuseTimeout (refuseConn). A peer that reads the 429 and keeps the
// connection open must not hold the node's stop for that long.
func TestShutdownEndsARefusalsDrain(t *testing.T) {
	l, quiet := openBenchLog(t)
	srv := New(l, Config{ConnectionsMax: 1}, quiet)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.ServeTCP(ln, events.TransportTCP)
	first, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	for deadline := time.Now().Add(10 * time.Second); srv.Counters().ConnectionsOpen != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first connection was never served")
		}
	}
	over, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer over.Close()
	over.SetDeadline(time.Now().Add(10 * time.Second))
	f, err := NewClient(over).ReadReply()
	if err != nil {
		t.Fatal(err)
	}
	if f.Type() != "error" {
		t.Fatalf("a connection over the limit got %s, want its 429", f.Type())
	}
	// over stays open and silent: the node is discarding its input now.
	if took := timedShutdown(t, srv); took > refuseTimeout*3/4 {
		t.Fatalf("Shutdown took %v with a refused connection left open; it waited out the refusal's drain", took)
	}
}

// TestShutdownEndsALingerAfterAFatalFrame: after a frame that ends its
// connection (garbage where a start line belongs), the node answers and
// then reads and drops the peer's input for up to lingerTimeout, so that
// the close is no reset. A peer that reads its error and keeps the
// connection open must not hold the node's stop for that long, whether
// the linger began before the stop or the stop came first.
func TestShutdownEndsALingerAfterAFatalFrame(t *testing.T) {
	l, quiet := openBenchLog(t)
	srv := New(l, Config{}, quiet)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.ServeTCP(ln, events.TransportTCP)
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte("hello world\n")); err != nil {
		t.Fatal(err)
	}
	f, err := NewClient(c).ReadReply()
	if err != nil {
		t.Fatal(err)
	}
	if f.Type() != "error" {
		t.Fatalf("garbage got %s, want an error", f.Type())
	}
	// c stays open and silent: the node is discarding its input now.
	if took := timedShutdown(t, srv); took > lingerTimeout*3/4 {
		t.Fatalf("Shutdown took %v with a connection lingering after a fatal frame", took)
	}
}

// timedShutdown stops srv, within 10 s, and returns how long it took.
func timedShutdown(t *testing.T, srv *Server) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	return time.Since(start)
}
