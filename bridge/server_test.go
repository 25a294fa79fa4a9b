package bridge

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/projections"
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

// stalledFolds is an Answerer whose projections never apply anything, as
// when a fold is stuck: Answer waits until its context ends.
type stalledFolds struct{ asked chan struct{} }

func (stalledFolds) Answers(string) bool { return true }
func (stalledFolds) Ready(uint64) bool   { return false }
func (s stalledFolds) Answer(ctx context.Context, _ uint64) (projections.Reply, bool, error) {
	select {
	case s.asked <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return projections.Reply{}, false, ctx.Err()
}

// TestShutdownEndsWhileTheFoldsAreStalled: a frame is durable and its
// writer waits for the projections' answer, which never comes. A stop
// with a one-second deadline must end then, not after AnswerTimeout.
func TestShutdownEndsWhileTheFoldsAreStalled(t *testing.T) {
	l, quiet := openBenchLog(t)
	folds := stalledFolds{asked: make(chan struct{}, 1)}
	srv := New(l, Config{Answerer: folds}, quiet)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.ServeTCP(ln, events.TransportTCP)
	c, err := Dial(context.Background(), ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write(benchFrame(0))
	c.Flush()
	select {
	case <-folds.asked:
	case <-time.After(30 * time.Second):
		t.Fatal("the frame's writer never asked the projections for an answer")
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown = %v; want its deadline, with a frame unanswered", err)
	}
	if took := time.Since(start); took >= AnswerTimeout {
		t.Fatalf("Shutdown took %s with a one-second deadline: it waited out AnswerTimeout (%s)", took, AnswerTimeout)
	}
}

// TestStalledFoldsAnswerPipelinedFramesTogether: while the projections do
// not apply (a full disk kept the events from the event stream), every
// frame read is answered 202 once AnswerTimeout has passed since it was
// read. Each reply used to wait its own AnswerTimeout after the writer
// reached it, one after another: 256 frames in flight on one connection
// took 43 minutes, and the client gave up (helper-109).
func TestStalledFoldsAnswerPipelinedFramesTogether(t *testing.T) {
	l, quiet := openBenchLog(t)
	c := serveAndDial(t, New(l, Config{Answerer: stalledFolds{asked: make(chan struct{}, 1)}}, quiet))
	const frames = 5
	start := time.Now()
	for i := range frames {
		c.Write(benchFrame(i))
	}
	c.Flush()
	// Sequentially, the last reply would come after frames × AnswerTimeout.
	c.Conn().SetReadDeadline(start.Add((frames - 1) * AnswerTimeout))
	for i := range frames {
		f, err := c.ReadReply()
		if err != nil {
			t.Fatalf("reply %d of %d, %s after the frames were sent: %v; the replies waited one after another", i+1, frames, time.Since(start).Round(time.Second), err)
		}
		if f.Type() != "ack" || !strings.HasPrefix(f.Value("STATUS"), "202") {
			t.Fatalf("reply %d: %s %s %s, want an ack with 202", i+1, f.Type(), f.Value("STATUS"), f.Body)
		}
	}
}

// serveAndDial serves srv over TCP on loopback and dials it; the client
// is closed, and the server stopped within a second, when the test ends.
func serveAndDial(t *testing.T, srv *Server) *Client {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.ServeTCP(ln, events.TransportTCP)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	c, err := Dial(context.Background(), ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// failingListener fails its first Accept calls as a process out of file
// descriptors does, then accepts.
type failingListener struct {
	net.Listener
	fails atomic.Int32
}

func (l *failingListener) Accept() (net.Conn, error) {
	if l.fails.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// TestAcceptOutlivesRunningOutOfFiles: accept errors that pass (EMFILE,
// ENFILE, ENOBUFS) make the server wait and try again; it ended, and the
// node went on without its listener.
func TestAcceptOutlivesRunningOutOfFiles(t *testing.T) {
	l, quiet := openBenchLog(t)
	srv := New(l, Config{}, quiet)
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &failingListener{Listener: inner}
	ln.fails.Store(5)
	served := make(chan error, 1)
	go func() { served <- srv.ServeTCP(ln, events.TransportTCP) }()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		select {
		case err := <-served:
			if !errors.Is(err, ErrServerClosed) {
				t.Errorf("ServeTCP ended with %v, want ErrServerClosed after Shutdown", err)
			}
		case <-ctx.Done():
			t.Error("ServeTCP did not return after Shutdown")
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, inner.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Conn().SetDeadline(time.Now().Add(10 * time.Second))
	c.Write([]byte("AGLX/1.0 TCP\nFROM: agent://a.local\nTO: agent://b.local\nTYPE: task.cancel\n\n{\"task_id\": \"t\", \"reason\": \"r\"}\n"))
	c.Flush()
	f, err := c.ReadReply()
	if err != nil {
		t.Fatalf("no reply after the failed accepts: %v", err)
	}
	if f.Type() != "ack" {
		t.Fatalf("reply %s %s, want an ack", f.Type(), f.Body)
	}
}

// TestPipelineBoundsUnansweredFrames: a connection owes at most
// PipelineMax replies; then the node reads nothing more from it. With the
// replies held up (the folds never answer), only that many frames reach
// the log. Each of the connection's two queues took PipelineMax, so it
// read about twice that, and more.
func TestPipelineBoundsUnansweredFrames(t *testing.T) {
	l, quiet := openBenchLog(t)
	const pipeline = 2
	c := serveAndDial(t, New(l, Config{Answerer: stalledFolds{asked: make(chan struct{}, 1)}, PipelineMax: pipeline}, quiet))
	for i := range 10 {
		c.Write(benchFrame(i))
	}
	c.Flush()
	for deadline := time.Now().Add(10 * time.Second); l.Published() < pipeline; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d frames reached the log, want %d", l.Published(), pipeline)
		}
	}
	// Reading more would take a moment; give it one, then count again.
	time.Sleep(300 * time.Millisecond)
	if got := l.Published(); got != pipeline {
		t.Fatalf("%d frames reached the log with their replies held up, want PipelineMax = %d", got, pipeline)
	}
}

type failingPacketConn struct {
	net.PacketConn
	fails atomic.Int32
}

func (c *failingPacketConn) ReadFrom(b []byte) (int, net.Addr, error) {
	if c.fails.Add(-1) >= 0 {
		return 0, nil, &net.OpError{Op: "read", Net: "udp", Err: os.NewSyscallError("recvfrom", syscall.ENOBUFS)}
	}
	return c.PacketConn.ReadFrom(b)
}

// TestUDPOutlivesReadErrors: a read error that passes (ENOBUFS, an ICMP
// error on the socket) makes the UDP port wait and read again; it ended,
// and the node went on without its UDP port.
func TestUDPOutlivesReadErrors(t *testing.T) {
	l, quiet := openBenchLog(t)
	srv := New(l, Config{}, quiet)
	inner, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pc := &failingPacketConn{PacketConn: inner}
	pc.fails.Store(5)
	served := make(chan error, 1)
	go func() { served <- srv.ServeUDP(pc) }()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		select {
		case err := <-served:
			if !errors.Is(err, ErrServerClosed) {
				t.Errorf("ServeUDP ended with %v, want ErrServerClosed after Shutdown", err)
			}
		case <-ctx.Done():
			t.Error("ServeUDP did not return after Shutdown")
		}
	}()
	uc, err := net.Dial("udp", inner.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	announce := []byte("AGLX/1.0 UDP\nFROM: agent://a.local\nTYPE: agent.announce\n\n{\"agent_name\": \"a\"}\n")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for l.Published() == 0 { // datagrams may be lost; send until one is stored
		if _, err := uc.Write(announce); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-served:
			t.Fatalf("ServeUDP ended after read errors: %v", err)
		case <-ctx.Done():
			t.Fatal("no datagram was stored after the read errors")
		case <-time.After(20 * time.Millisecond):
		}
	}
}
