package main

import (
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/protocol"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// gateProxy forwards TCP connections to upstream and can hold every byte
// back: a NATS server that is alive but does not answer.
type gateProxy struct {
	ln       net.Listener
	upstream string

	mu    sync.Mutex
	open  chan struct{} // closed while bytes may flow
	conns []net.Conn
	// held counts the bytes from the node waiting at the closed gate, so
	// that a test can wait for its batch to be there instead of sleeping.
	held atomic.Int64
}

func startGateProxy(t *testing.T, upstream string) *gateProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &gateProxy{ln: ln, upstream: upstream, open: make(chan struct{})}
	close(p.open)
	t.Cleanup(p.stop)
	go func() {
		for {
			down, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", upstream)
			if err != nil {
				down.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, down, up)
			p.mu.Unlock()
			go p.pipe(up, down, &p.held)
			go p.pipe(down, up, nil)
		}
	}()
	return p
}

// pipe copies src to dst, waiting at the gate before each write; held,
// if not nil, counts the bytes that wait.
func (p *gateProxy) pipe(dst, src net.Conn, held *atomic.Int64) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			open := p.open
			p.mu.Unlock()
			select {
			case <-open:
			default:
				if held != nil {
					held.Add(int64(n))
				}
				<-open
				if held != nil {
					held.Add(-int64(n))
				}
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				dst.Close()
			}
			return
		}
	}
}

func (p *gateProxy) pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.open = make(chan struct{})
}

func (p *gateProxy) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
	default:
		close(p.open)
	}
}

func (p *gateProxy) stop() {
	p.resume()
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}

// TestNoReplyBeforeDurable holds JetStream's answers back, with a proxy
// between the node and its NATS server, and shows that a frame is not
// answered while its event is not stored: the write-ahead stream does not
// have it, and the agent has no reply. Once the server answers again, the
// reply comes, and the event it names is in the log.
func TestNoReplyBeforeDurable(t *testing.T) {
	ns := startExternalNATS(t)
	proxy := startGateProxy(t, ns.Addr().String())

	m := startNodeWith(t, t.TempDir(), func(c *Config) { c.NATSURL = "nats://" + proxy.ln.Addr().String() })
	t.Cleanup(proxy.resume) // runs first: a failure must not leave the node stopping against a mute server
	c := dial(t, m.TCPAddr())
	c.Write(referenceFiles(t)[3]) // task.result: recorded, then acked
	c.Flush()
	readAck(t, c) // the path works

	// The node's own view of the write-ahead stream, bypassing the proxy.
	direct, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	js, _ := jetstream.New(direct)
	walMsgs := func() uint64 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		st, err := js.Stream(ctx, events.StreamNameDefault+"_WAL")
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Msgs
	}
	before := walMsgs()

	proxy.pause()
	c.Write(referenceFiles(t)[3])
	c.Flush()
	replies := make(chan *protocol.Frame, 1)
	go func() {
		f, err := c.ReadReply()
		if err != nil {
			close(replies)
			return
		}
		replies <- f
	}()
	select {
	case f := <-replies:
		t.Fatalf("a reply came while JetStream could not answer: %v %s", f, f.Body)
	case <-time.After(1500 * time.Millisecond):
	}
	if got := walMsgs(); got != before {
		t.Fatalf("the write-ahead stream grew from %d to %d through a closed gate", before, got)
	}

	proxy.resume()
	var f *protocol.Frame
	select {
	case f = <-replies:
	case <-time.After(30 * time.Second):
		t.Fatal("no reply after JetStream answered again")
	}
	if f == nil || f.Type() != "ack" {
		t.Fatalf("reply after the pause: %v", f)
	}
	if got := walMsgs(); got <= before {
		t.Fatalf("acknowledged, but the write-ahead stream still holds %d batches", got)
	}
	a := eventOf(t, f)
	ev := getEvent(t, m, openLogAt(t, ns.ClientURL()), a.Seq)
	if ev.ID != a.EventID || ev.Type != "task.result" {
		t.Fatalf("the reply names %+v; the log holds %+v", a, ev)
	}
}

// TestShutdownEndsWhileTheLogIsStuck: JetStream stops answering (a hung
// server) while a frame waits for its batch, with an ack timeout far
// beyond the test's deadlines. Stopping the node with a short deadline
// must end at that deadline, not when the frame's wait does: a stuck log
// must not keep the node from exiting.
func TestShutdownEndsWhileTheLogIsStuck(t *testing.T) {
	ns := startExternalNATS(t)
	proxy := startGateProxy(t, ns.Addr().String())
	m := startNodeWith(t, t.TempDir(), func(c *Config) {
		c.NATSURL = "nats://" + proxy.ln.Addr().String()
		c.ackTimeout = 10 * time.Minute
	})
	t.Cleanup(proxy.resume)
	c := dial(t, m.TCPAddr())
	c.Write(referenceFiles(t)[3])
	c.Flush()
	readAck(t, c)

	proxy.pause()
	c.Write(referenceFiles(t)[3]) // its batch is never answered
	c.Flush()
	// Wait until the node's batch waits at the gate (more than a PING's
	// bytes), so that the stop finds it in flight.
	for deadline := time.Now().Add(20 * time.Second); proxy.held.Load() < int64(len(referenceFiles(t)[3])); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the node's batch never reached the gate (%d bytes wait there)", proxy.held.Load())
		}
	}
	closed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		closed <- m.Close(ctx)
	}()
	select {
	case err := <-closed:
		if err == nil {
			t.Fatal("Close reported a clean stop, with a frame unanswered")
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Close did not return a minute after its one-second deadline")
	}
}
