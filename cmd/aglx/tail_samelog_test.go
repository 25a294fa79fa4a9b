package main

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aglx/ledger/events"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestTailNoticesAnotherLogBehindTheAddress: tail resumes by sequence
// after a reconnection. When the same store comes back behind the address,
// it goes on with the next event; when another one does (a node started
// on another data dir behind the same port), it ends with an error naming
// both logs and prints none of the new log's events. It used to wait in
// silence for the old log's next sequence, and then print the new log's
// events from there as if they followed on (helper-133).
func TestTailNoticesAnotherLogBehindTheAddress(t *testing.T) {
	tests := []struct {
		name      string
		sameStore bool
	}{
		{"the same store comes back", true},
		{"another store comes up", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			addr := freeLoopbackAddr(t)
			dir := t.TempDir()
			first := startLogAt(t, dir, addr)
			appendEvents(ctx, t, first.log, 3)

			var out syncBuffer
			tailCtx, stopTail := context.WithCancel(ctx)
			defer stopTail()
			done := make(chan error, 1)
			go func() { done <- runTail(tailCtx, []string{"--nats", "nats://" + addr, "--json"}, &out) }()
			waitForLines(ctx, t, &out, 3)

			first.stop()
			if !tt.sameStore {
				dir = t.TempDir()
			}
			second := startLogAt(t, dir, addr)
			defer second.stop()
			// The new log gets more events than the old one had, so that
			// a tail resuming at the old sequence would print some.
			appendEvents(ctx, t, second.log, 6)

			if tt.sameStore {
				waitForLines(ctx, t, &out, 9)
				stopTail()
				if err := <-done; err != nil {
					t.Fatalf("tail ended with %v after the same store came back", err)
				}
				return
			}
			for {
				if n := strings.Count(out.String(), "\n"); n != 3 {
					t.Fatalf("tail printed %d events; want only the first log's 3:\n%s", n, out.String())
				}
				select {
				case err := <-done:
					if err == nil || !strings.Contains(err.Error(), "now serves a log made at") {
						t.Fatalf("tail ended with %v; want it to say that another log is served now", err)
					}
					if n := strings.Count(out.String(), "\n"); n != 3 {
						t.Fatalf("tail printed %d events; want only the first log's 3:\n%s", n, out.String())
					}
					return
				case <-ctx.Done():
					t.Fatalf("tail did not notice another log behind %s; it printed:\n%s", addr, out.String())
				case <-time.After(10 * time.Millisecond):
				}
			}
		})
	}
}

// TestTailRecheckNoticesAStreamMadeAgain: on a server that stays up, a
// stream deleted and made again brings no reconnection; the read's
// consumer goes on in the new stream. tail's periodic question
// (sameLog.recheck, every logRecheckEvery) finds the other creation time,
// and finds nothing while the stream stays the same (helper-136).
func TestTailRecheckNoticesAStreamMadeAgain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	addr := freeLoopbackAddr(t)
	r := startLogAt(t, t.TempDir(), addr)
	appendEvents(ctx, t, r.log, 2)
	nc, err := nats.Connect("nats://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	reader, err := events.Attach(ctx, nc, "")
	if err != nil {
		t.Fatal(err)
	}
	created, err := reader.Created(ctx)
	if err != nil {
		t.Fatal(err)
	}
	same := &sameLog{nc: nc, lg: reader, url: addr, created: created}
	if err := same.recheck(ctx); err != nil {
		t.Fatalf("recheck of the same stream = %v, want nil", err)
	}
	r.stopLog()
	js, err := jetstream.New(r.nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteStream(ctx, events.StreamNameDefault); err != nil {
		t.Fatal(err)
	}
	again, err := events.Open(ctx, r.nc, events.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close(context.Background())
	if err := same.recheck(ctx); !errors.Is(err, errAnotherLog) {
		t.Fatalf("recheck after the stream was made again = %v, want errAnotherLog", err)
	}
}

// runningLog is an embedded server with the node's log on it.
type runningLog struct {
	log     *events.Log
	nc      *nats.Conn // the node's connection
	stopLog func()     // closes the log only
	stop    func()
}

// startLogAt starts an embedded server listening on addr with its store in
// dir, and opens the log on it.
func startLogAt(t *testing.T, dir, addr string) runningLog {
	t.Helper()
	s, err := events.StartServer(events.ServerConfig{DataDir: dir, Listen: addr})
	if err != nil {
		t.Fatal(err)
	}
	nc, err := s.Connect("test")
	if err != nil {
		s.Shutdown()
		t.Fatal(err)
	}
	l, err := events.Open(context.Background(), nc, events.Config{}, nil)
	if err != nil {
		nc.Close()
		s.Shutdown()
		t.Fatal(err)
	}
	var logOnce, once sync.Once
	stopLog := func() { logOnce.Do(func() { l.Close(context.Background()) }) }
	stop := func() {
		once.Do(func() {
			stopLog()
			nc.Close()
			s.Shutdown()
		})
	}
	t.Cleanup(stop)
	return runningLog{log: l, nc: nc, stopLog: stopLog, stop: stop}
}

// freeLoopbackAddr is a TCP address on 127.0.0.1 that was free a moment
// ago, for a server that must come back on the same port.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// appendEvents appends n task.rejects to l and waits until they are
// published.
func appendEvents(ctx context.Context, t *testing.T, l *events.Log, n int) {
	t.Helper()
	var last uint64
	for range n {
		last = appendReject(ctx, t, l, time.Now(), []byte(`{"task_id": "t1", "reason": "busy"}`))
	}
	if err := l.WaitPublished(ctx, last); err != nil {
		t.Fatal(err)
	}
}

// waitForLines polls until out holds n lines.
func waitForLines(ctx context.Context, t *testing.T, out *syncBuffer, n int) {
	t.Helper()
	for strings.Count(out.String(), "\n") < n {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %d lines, got:\n%s", n, out.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
}
