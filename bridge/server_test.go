package bridge

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/aglx/ledger/events"
)

// TestShutdownRightAfterServing stops a server whose Serve calls may not
// have started yet: each returns ErrServerClosed and Shutdown returns.
// Under the race detector it may also catch work counted for Shutdown's
// wait after the wait began (CI once did, through aglx's tests: ServeUDP
// counted its waiter outside the lock); the interleaving is rare, so this
// test cannot force it.
func TestShutdownRightAfterServing(t *testing.T) {
	l, quiet := openBenchLog(t)
	for range 20 {
		srv := New(l, Config{}, quiet)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		served := make(chan error, 2)
		go func() { served <- srv.ServeTCP(ln, events.TransportTCP) }()
		go func() { served <- srv.ServeUDP(pc) }()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := srv.Shutdown(ctx); err != nil {
			t.Fatalf("Shutdown = %v", err)
		}
		cancel()
		for range 2 {
			select {
			case err := <-served:
				if !errors.Is(err, ErrServerClosed) {
					t.Fatalf("Serve after Shutdown = %v, want ErrServerClosed", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("a Serve call did not return after Shutdown")
			}
		}
		ln.Close()
		pc.Close()
	}
}
