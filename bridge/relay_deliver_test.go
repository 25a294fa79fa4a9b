package bridge

import (
	"context"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/protocol"
)

// deliverAgent is an addressee on loopback: serve gets each frame read,
// with the number of the connection it came on (from 0) and its place on
// it, and says whether to go on reading that connection. Every frame's
// connection number is sent on the channel returned. The test's end
// closes the listener and every connection.
func deliverAgent(t *testing.T, serve func(c net.Conn, conn, frame int) bool) (addr string, frames <-chan int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	ch := make(chan int, 16)
	go func() {
		for n := 0; ; n++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go func(n int, c net.Conn) {
				dec := protocol.NewDecoder(c, protocol.DecoderOptions{})
				for i := 0; ; i++ {
					if _, err := dec.Decode(); err != nil {
						return
					}
					ch <- n
					if !serve(c, n, i) {
						return
					}
				}
			}(n, c)
		}
	}()
	return ln.Addr().String(), ch
}

// deliverRelay is a Relay for calling deliver directly, and a message for
// it to deliver.
func deliverRelay(t *testing.T, timeout time.Duration) (*Relay, *events.Envelope) {
	r := &Relay{NodeURI: "agent://node.local", Lg: slog.New(slog.NewTextHandler(io.Discard, nil)), Timeout: timeout}
	t.Cleanup(r.closeConns)
	env := &events.Envelope{Seq: 1, ID: "e1", Type: "task.cancel", To: "agent://b.local", Declared: "TCP",
		Headers: []protocol.Header{{Name: "FROM", Value: "agent://a.local"}, {Name: "TO", Value: "agent://b.local"}, {Name: "TYPE", Value: "task.cancel"}},
		Body:    []byte(`{"task_id": "t1", "reason": "r"}`)}
	return r, env
}

// relayAck is an addressee's receipt as an AGLX peer writes it: the frame,
// then the line end after its body.
const relayAck = "AGLX/1.0 TCP\nFROM: agent://b.local\nTYPE: ack\nCONTENT-LENGTH: 2\n\n{}\n"

// TestRelayKeepsTheConnectionAfterAReceipt: the line end after a reply's
// body is the end of the reply, not bytes nobody asked for. It was left in
// the read buffer, and the check for stray bytes (Client.Buffered) dropped
// every kept connection before its next message: each delivery opened a
// new connection, and the redial of a connection closed while idle never
// ran.
func TestRelayKeepsTheConnectionAfterAReceipt(t *testing.T) {
	addr, frames := deliverAgent(t, func(c net.Conn, _, _ int) bool {
		io.WriteString(c, relayAck)
		return true
	})
	r, env := deliverRelay(t, 5*time.Second)
	for i := range 3 {
		if err := r.deliver(context.Background(), addr, env); err != nil {
			t.Fatalf("delivery %d: %v", i, err)
		}
		if got := <-frames; got != 0 {
			t.Fatalf("message %d went out on connection %d, not on the one kept from the first", i, got)
		}
	}
}

// TestRelayDeliveryKeepsToItsTimeout: one delivery takes at most the
// relay's timeout (relayTimeout: "connecting, writing, and reading the
// addressee's reply"; RELAY.md: "A delivery can take up to the relay's
// 10-second timeout"). An addressee that took a message on a kept
// connection, held it almost the whole timeout and then closed got the
// redial meant for a connection closed while idle, with a timeout of its
// own: the delivery took nearly two timeouts, holding the lane (and, with
// 64 such addressees, every lane) that long.
func TestRelayDeliveryKeepsToItsTimeout(t *testing.T) {
	const timeout = 400 * time.Millisecond
	addr, frames := deliverAgent(t, func(c net.Conn, conn, frame int) bool {
		switch {
		case conn == 0 && frame == 0: // a receipt; the connection is kept
			io.WriteString(c, relayAck)
		case conn == 0: // held most of the timeout, then closed
			time.Sleep(timeout * 3 / 4)
			c.Close()
			return false
		}
		return true // on a new connection: never answered
	})
	r, env := deliverRelay(t, timeout)
	if err := r.deliver(context.Background(), addr, env); err != nil {
		t.Fatalf("first delivery: %v", err)
	}
	<-frames
	start := time.Now()
	err := r.deliver(context.Background(), addr, env)
	took := time.Since(start)
	if err == nil {
		t.Fatalf("second delivery counted as delivered without a receipt")
	}
	if got := <-frames; got != 0 {
		t.Fatalf("the second message went out on connection %d, not on the one kept from the first", got)
	}
	if took > timeout+timeout/4 {
		t.Fatalf("the delivery took %v, past the relay's timeout of %v (%v)", took, timeout, err)
	}
}
