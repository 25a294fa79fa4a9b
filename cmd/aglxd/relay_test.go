package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aglx/ledger/bridge"
	"github.com/aglx/ledger/protocol"
)

// fakeAgent is an agent's own AGLX listener: it answers every frame with an
// ack and hands the frame to the test.
type fakeAgent struct {
	ln     net.Listener
	frames chan *protocol.Frame
	mu     sync.Mutex
	conns  []net.Conn
}

// stop closes the listener and every connection: the agent is gone.
func (a *fakeAgent) stop() {
	a.ln.Close()
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, c := range a.conns {
		c.Close()
	}
}

func listenAgent(t *testing.T, addr string) *fakeAgent {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	a := &fakeAgent{ln: ln, frames: make(chan *protocol.Frame, 16)}
	t.Cleanup(a.stop)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			a.mu.Lock()
			a.conns = append(a.conns, c)
			a.mu.Unlock()
			go func() {
				defer c.Close()
				dec := protocol.NewDecoder(c, protocol.DecoderOptions{})
				for {
					f, err := dec.Decode()
					if err != nil {
						return
					}
					a.frames <- f
					ack := &protocol.Frame{Headers: []protocol.Header{{Name: "FROM", Value: f.To()}, {Name: "TO", Value: f.From()}, {Name: "TYPE", Value: "ack"}}, Body: []byte(`{}`)}
					if _, err := c.Write(protocol.Encode(ack)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return a
}

func (a *fakeAgent) next(t *testing.T, within time.Duration) *protocol.Frame {
	t.Helper()
	select {
	case f := <-a.frames:
		return f
	case <-time.After(within):
		t.Fatalf("the agent received nothing within %s", within)
		return nil
	}
}

// TestRelayDeliversToTheRegisteredAddress: a message from one agent to
// another is recorded, acknowledged 202, and delivered to the address the
// addressee registered, unchanged but for a RELAYED-BY header; while the
// addressee is down, delivery is retried until it is back.
func TestRelayDeliversToTheRegisteredAddress(t *testing.T) {
	m := startNodeWith(t, t.TempDir(), func(c *Config) { c.Relay = true })
	sink := listenAgent(t, "127.0.0.1:0")
	host, port, _ := net.SplitHostPort(sink.ln.Addr().String())
	p, _ := strconv.Atoi(port)

	c := dial(t, m.TCPAddr())
	c.Write(fmt.Appendf(nil, "AGLX/1.0 TCP\nFROM: agent://sink.local\nTO: %s\nTYPE: registry.update\n\n{\"agent_name\": \"Sink\", \"address\": %q, \"port\": %d, \"status\": \"READY\", \"ttl\": 3600}\n", m.cfg.Name, host, p))
	c.Flush()
	if f, _ := readReply(t, c); f.Type() != "registry.ack" {
		t.Fatalf("registry.update: %s %s", f.Type(), f.Body)
	}

	// Compact, as the relay writes bodies (relayBody): byte for byte what
	// the addressee reads.
	body := `{"task":"data.analyze","priority":2,"payload":{"dataset_url":"http://src.local/d.csv"}}`
	send := func() {
		c.Write([]byte("AGLX/1.0 TCP\nFROM: agent://src.local\nTO: agent://sink.local\nTYPE: task.assign\n\n" + body + "\n"))
		c.Flush()
		if f, _ := readReply(t, c); f.Value(protocol.HeaderStatus) != "202 Accepted" {
			t.Fatalf("task.assign to another agent: %s %s", f.Value(protocol.HeaderStatus), f.Body)
		}
	}
	send()
	got := sink.next(t, 20*time.Second)
	if got.Type() != "task.assign" || got.From() != "agent://src.local" || got.To() != "agent://sink.local" ||
		!bytes.Equal(got.Body, []byte(body)) || got.Value(bridge.HeaderRelayedBy) != m.cfg.Name {
		t.Fatalf("delivered %+v", got)
	}

	// The addressee goes away; the next message waits for it.
	addr := sink.ln.Addr().String()
	sink.stop()
	send()
	for deadline := time.Now().Add(20 * time.Second); m.relay.Counters().Failed == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the relay never tried the absent addressee")
		}
	}
	back := listenAgent(t, addr)
	if f := back.next(t, 30*time.Second); !bytes.Equal(f.Body, []byte(body)) {
		t.Fatalf("redelivered %+v", f)
	}
}

// TestRelayStaysInItsNetworks: an agent that registers an address outside
// --relay-networks gets its messages recorded but never has the node
// connect there.
func TestRelayStaysInItsNetworks(t *testing.T) {
	m := startNodeWith(t, t.TempDir(), func(c *Config) { c.Relay = true })
	c := dial(t, m.TCPAddr())
	c.Write(fmt.Appendf(nil, "AGLX/1.0 TCP\nFROM: agent://far.local\nTO: %s\nTYPE: registry.update\n\n{\"agent_name\": \"Far\", \"address\": \"10.1.0.42\", \"port\": 2594, \"status\": \"READY\", \"ttl\": 3600}\n", m.cfg.Name))
	c.Write([]byte("AGLX/1.0 TCP\nFROM: agent://src.local\nTO: agent://far.local\nTYPE: task.cancel\n\n{\"task_id\": \"t1\", \"reason\": \"r\"}\n"))
	c.Flush()
	readReply(t, c)
	readReply(t, c)
	for deadline := time.Now().Add(20 * time.Second); m.relay.Counters().Undeliverable == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the relay did not refuse the address outside its networks: %+v", m.relay.Counters())
		}
	}
	if got := m.relay.Counters(); got.Failed != 0 || got.Delivered != 0 {
		t.Fatalf("the relay tried to reach 10.1.0.42: %+v", got)
	}
}

// TestRelayResumesAfterRestart: the relay keeps its position across a
// restart. A message whose addressee was down when the node stopped is
// delivered after the restart, once the addressee is back; one delivered
// before the restart is not delivered again.
func TestRelayResumesAfterRestart(t *testing.T) {
	dir := t.TempDir()
	sink := listenAgent(t, "127.0.0.1:0")
	addr := sink.ln.Addr().String()
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	send := func(m *Main, body string) {
		t.Helper()
		c := dial(t, m.TCPAddr())
		c.Write([]byte("AGLX/1.0 TCP\nFROM: agent://src.local\nTO: agent://sink.local\nTYPE: task.cancel\n\n" + body + "\n"))
		c.Flush()
		if f, _ := readReply(t, c); f.Value(protocol.HeaderStatus) != "202 Accepted" {
			t.Fatalf("task.cancel: %s %s", f.Value(protocol.HeaderStatus), f.Body)
		}
	}

	m := startNodeWith(t, dir, func(c *Config) { c.Relay = true })
	c := dial(t, m.TCPAddr())
	c.Write(fmt.Appendf(nil, "AGLX/1.0 TCP\nFROM: agent://sink.local\nTO: %s\nTYPE: registry.update\n\n{\"agent_name\": \"Sink\", \"address\": %q, \"port\": %d, \"status\": \"READY\", \"ttl\": 3600}\n", m.cfg.Name, host, p))
	c.Flush()
	if f, _ := readReply(t, c); f.Type() != "registry.ack" {
		t.Fatalf("registry.update: %s %s", f.Type(), f.Body)
	}
	first := `{"task_id":"t1","reason":"delivered before the restart"}`
	send(m, first)
	if f := sink.next(t, 20*time.Second); string(f.Body) != first {
		t.Fatalf("delivered %s", f.Body)
	}
	// Delivered once the relay has read the sink's ack: stopping the sink
	// before that would fail the delivery, and a failed one is retried.
	for deadline := time.Now().Add(20 * time.Second); m.relay.Counters().Delivered != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the first delivery was never counted: %+v", m.relay.Counters())
		}
	}
	sink.stop()
	waiting := `{"task_id":"t2","reason":"recorded while the addressee was down"}`
	send(m, waiting)
	for deadline := time.Now().Add(20 * time.Second); m.relay.Counters().Retrying == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the relay never tried the absent addressee: %+v", m.relay.Counters())
		}
	}
	m.Close(context.Background())

	back := listenAgent(t, addr)
	m = startNodeWith(t, dir, func(c *Config) { c.Relay = true })
	if f := back.next(t, 20*time.Second); string(f.Body) != waiting {
		t.Fatalf("after the restart the relay delivered %s first, want %s", f.Body, waiting)
	}
	last := `{"task_id":"t3","reason":"after the restart"}`
	send(m, last)
	if f := back.next(t, 20*time.Second); string(f.Body) != last {
		t.Fatalf("delivered %s, want %s", f.Body, last)
	}
}

// tarpit is an agent that takes connections and frames and never answers:
// a delivery to it lasts until the relay's timeout.
func tarpit(t *testing.T) (addr string, got <-chan struct{}) {
	t.Helper()
	ch := make(chan struct{}, 16)
	addr = agentListener(t, func(c net.Conn, f *protocol.Frame) bool {
		ch <- struct{}{}
		return true
	})
	return addr, ch
}

// agentListener is an agent's own listener on loopback: it takes
// connections and hands each frame it reads to serve, until serve says
// to stop reading that connection. The test's end closes the listener and
// every connection.
func agentListener(t *testing.T, serve func(c net.Conn, f *protocol.Frame) bool) string {
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
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go func() {
				dec := protocol.NewDecoder(c, protocol.DecoderOptions{})
				for {
					f, err := dec.Decode()
					if err != nil || !serve(c, f) {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// registerAt records agent uri at addr in m's registry.
func registerAt(t *testing.T, m *Main, uri, addr string) {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	c := dial(t, m.TCPAddr())
	c.Write(fmt.Appendf(nil, "AGLX/1.0 TCP\nFROM: %s\nTO: %s\nTYPE: registry.update\n\n{\"agent_name\": \"A\", \"address\": %q, \"port\": %d, \"status\": \"READY\", \"ttl\": 3600}\n", uri, m.cfg.Name, host, p))
	c.Flush()
	if f, _ := readReply(t, c); f.Type() != "registry.ack" {
		t.Fatalf("registry.update of %s: %s %s", uri, f.Type(), f.Body)
	}
}

// TestRelayIsNotHeldUpBySlowAddressee: an addressee that takes the frame
// and never answers holds its own deliveries until the relay's timeout,
// and no one else's. The sink's messages, sent after the slow one, arrive
// while the delivery to the tarpit is still waiting: when the relay
// delivered on one goroutine they could only arrive after it failed.
func TestRelayIsNotHeldUpBySlowAddressee(t *testing.T) {
	m := startNodeWith(t, t.TempDir(), func(c *Config) { c.Relay = true })
	slowAddr, slowGot := tarpit(t)
	sink := listenAgent(t, "127.0.0.1:0")
	registerAt(t, m, "agent://slow.local", slowAddr)
	registerAt(t, m, "agent://sink.local", sink.ln.Addr().String())

	c := dial(t, m.TCPAddr())
	for i, to := range []string{"agent://slow.local", "agent://sink.local", "agent://sink.local"} {
		c.Write(fmt.Appendf(nil, "AGLX/1.0 TCP\nFROM: agent://src.local\nTO: %s\nTYPE: task.cancel\n\n{\"task_id\": \"t%d\", \"reason\": \"r\"}\n", to, i))
	}
	c.Flush()
	var slowSeq uint64
	for i := range 3 {
		f, a := readReply(t, c)
		if f.Value(protocol.HeaderStatus) != "202 Accepted" {
			t.Fatalf("task.cancel: %s %s", f.Value(protocol.HeaderStatus), f.Body)
		}
		if i == 0 {
			slowSeq = a.Seq
		}
	}
	select {
	case <-slowGot:
	case <-time.After(20 * time.Second):
		t.Fatal("the tarpit never received its message")
	}
	for i := 1; i <= 2; i++ {
		f := sink.next(t, 20*time.Second)
		if want := fmt.Sprintf(`"t%d"`, i); !bytes.Contains(f.Body, []byte(want)) {
			t.Fatalf("the sink's message %d is %s, want task %s: order kept per addressee", i, f.Body, want)
		}
	}
	// The relay counts a delivery once the sink's ack is read.
	for deadline := time.Now().Add(20 * time.Second); m.relay.Counters().Delivered < 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the sink's deliveries were never counted: %+v", m.relay.Counters())
		}
	}
	if got := m.relay.Counters(); got.Failed != 0 || got.Delivered != 2 {
		t.Fatalf("when the sink had its messages: %+v; want 2 delivered and the tarpit's delivery still waiting", got)
	}
	// The sink's lane ends once it is idle; the tarpit's is still busy.
	for deadline := time.Now().Add(20 * time.Second); m.relay.Counters().Lanes != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("lanes: %+v, want the tarpit's alone", m.relay.Counters())
		}
	}

	// Stopping the node cuts the tarpit's delivery short. It is not a
	// failure of the addressee's, and it stays unsettled: the saved
	// cursor is behind it, so the next start delivers it again.
	m.Close(context.Background())
	if got := m.relay.Counters(); got.Cursor >= int64(slowSeq) || got.Failed != 0 {
		t.Fatalf("after stopping: %+v; want the cursor before seq %d and no failed attempt", got, slowSeq)
	}
}

// TestRelayBoundsRetriesPerAddress: an address that refuses connections
// gets at most relayRetryPerAddressMax (256) messages waiting for a retry;
// the rest are given up at once and stay in the log, so one dead address
// cannot fill the relay's bound for everyone. A live agent's message sent
// after them is delivered.
func TestRelayBoundsRetriesPerAddress(t *testing.T) {
	m := startNodeWith(t, t.TempDir(), func(c *Config) { c.Relay = true })
	// The sink first: a port freeAddr has just let go of may be the next
	// one the system hands out, and the sink then got the dead address's
	// messages (it failed once in CI).
	sink := listenAgent(t, "127.0.0.1:0")
	registerAt(t, m, "agent://dead.local", freeAddr(t)) // nobody listens there
	registerAt(t, m, "agent://sink.local", sink.ln.Addr().String())

	const n, kept = 300, 256
	c := dial(t, m.TCPAddr())
	for i := range n {
		c.Write(fmt.Appendf(nil, "AGLX/1.0 TCP\nFROM: agent://src.local\nTO: agent://dead.local\nTYPE: task.cancel\n\n{\"task_id\": \"d%d\", \"reason\": \"r\"}\n", i))
	}
	c.Write([]byte("AGLX/1.0 TCP\nFROM: agent://src.local\nTO: agent://sink.local\nTYPE: task.cancel\n\n{\"task_id\": \"live\", \"reason\": \"r\"}\n"))
	c.Flush()
	for range n + 1 {
		if f, _ := readReply(t, c); f.Value(protocol.HeaderStatus) != "202 Accepted" {
			t.Fatalf("task.cancel: %s %s", f.Value(protocol.HeaderStatus), f.Body)
		}
	}
	if f := sink.next(t, 20*time.Second); !bytes.Contains(f.Body, []byte(`"live"`)) {
		t.Fatalf("the sink got %s", f.Body)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		got := m.relay.Counters()
		if got.Undeliverable == n-kept && got.Retrying == kept {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("counters %+v; want %d waiting for a retry and %d given up", got, kept, n-kept)
		}
	}
}

// TestRelayRedialsAConnectionTheAddresseeClosed: an addressee that closes
// each connection after answering (as an aglxd closes idle ones) gets the
// next message on a new connection, without a failed attempt: a quiet
// spell must not mark a live address down.
func TestRelayRedialsAConnectionTheAddresseeClosed(t *testing.T) {
	m := startNodeWith(t, t.TempDir(), func(c *Config) { c.Relay = true })
	// One frame per connection, each answered with an ack.
	addr, got := oneFrameAgent(t, []byte("AGLX/1.0 TCP\nFROM: agent://closer.local\nTO: agent://src.local\nTYPE: ack\n\n{}\n"))
	registerAt(t, m, "agent://closer.local", addr)

	c := dial(t, m.TCPAddr())
	for i := range 2 {
		c.Write(fmt.Appendf(nil, "AGLX/1.0 TCP\nFROM: agent://src.local\nTO: agent://closer.local\nTYPE: task.cancel\n\n{\"task_id\": \"c%d\", \"reason\": \"r\"}\n", i))
		c.Flush()
		readReply(t, c)
		select {
		case f := <-got:
			if want := fmt.Sprintf(`"c%d"`, i); !bytes.Contains(f.Body, []byte(want)) {
				t.Fatalf("delivered %s, want task %s", f.Body, want)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("message %d was not delivered", i)
		}
	}
	for deadline := time.Now().Add(20 * time.Second); m.relay.Counters().Delivered < 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("deliveries never counted: %+v", m.relay.Counters())
		}
	}
	if got := m.relay.Counters(); got.Failed != 0 {
		t.Fatalf("counters %+v: the closed connection counted as a failed attempt", got)
	}
}

// oneFrameAgent accepts connections and reads one frame from each; then
// it writes reply (if any) and closes the connection, and only then hands
// the frame to the test, so that the close is done when the test goes on.
func oneFrameAgent(t *testing.T, reply []byte) (addr string, got <-chan *protocol.Frame) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	ch := make(chan *protocol.Frame, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f, err := protocol.NewDecoder(c, protocol.DecoderOptions{}).Decode()
			if reply != nil {
				c.Write(reply)
			}
			c.Close()
			if err == nil {
				ch <- f
			}
		}
	}()
	return ln.Addr().String(), ch
}

// relayOnce sends frames from agent://src.local through the node and
// checks that each reaches the addressee once, in order, and that the
// relay counts each delivered and none failed.
func relayOnce(t *testing.T, m *Main, got <-chan *protocol.Frame, frames ...string) {
	t.Helper()
	c := dial(t, m.TCPAddr())
	for i, fr := range frames {
		c.Write([]byte(fr))
		c.Flush()
		if !strings.Contains(fr, "\nTYPE: ack\n") { // the node answers no ack
			readReply(t, c)
		}
		select {
		case f := <-got:
			if want := fmt.Sprintf(`"n%d"`, i); !bytes.Contains(f.Body, []byte(want)) {
				t.Fatalf("delivered %s, want the message with %s", f.Body, want)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("message %d was not delivered", i)
		}
	}
	for deadline := time.Now().Add(20 * time.Second); m.relay.Counters().Delivered < int64(len(frames)); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("deliveries never counted: %+v", m.relay.Counters())
		}
	}
	if cs := m.relay.Counters(); cs.Failed != 0 || cs.Retrying != 0 {
		t.Fatalf("counters %+v: a delivery counted as failed or waits to be sent again", cs)
	}
	select {
	case f := <-got:
		t.Fatalf("delivered a second time: %s", f.Body)
	default:
	}
}

// TestRelayDeliversAnAckWithoutWaitingForAReply: ack and error are never
// answered, so the relay must not wait for an answer to count them
// delivered (it waited 10 s, counted a failure, marked the address down
// and sent the ack again, up to ten times). The addressee closes each
// connection after one frame, so the second ack also checks that a kept
// connection the addressee closed is noticed before a message that no
// reply would show lost.
func TestRelayDeliversAnAckWithoutWaitingForAReply(t *testing.T) {
	m := startNodeWith(t, t.TempDir(), func(c *Config) { c.Relay = true })
	addr, got := oneFrameAgent(t, nil)
	registerAt(t, m, "agent://quiet.local", addr)
	ack := "AGLX/1.0 TCP\nFROM: agent://src.local\nTO: agent://quiet.local\nTYPE: ack\n\n{\"note\": \"n%d\"}\n"
	relayOnce(t, m, got, fmt.Sprintf(ack, 0), fmt.Sprintf(ack, 1))
}

// TestRelayDropsAConnectionThatAnsweredGarbage: an addressee that answers
// with something that is not AGLX (here an HTTP error) and closes has
// received the message; the next one must go out on a new connection, not
// on the old one, whose decoder would report the same garbage again and
// have the relay count a message delivered that was never sent.
func TestRelayDropsAConnectionThatAnsweredGarbage(t *testing.T) {
	m := startNodeWith(t, t.TempDir(), func(c *Config) { c.Relay = true })
	addr, got := oneFrameAgent(t, []byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"))
	registerAt(t, m, "agent://web.local", addr)
	cancel := "AGLX/1.0 TCP\nFROM: agent://src.local\nTO: agent://web.local\nTYPE: task.cancel\n\n{\"task_id\": \"n%d\", \"reason\": \"r\"}\n"
	relayOnce(t, m, got, fmt.Sprintf(cancel, 0), fmt.Sprintf(cancel, 1))
}

// TestRelayDropsAConnectionWithAStrayAnswer: an addressee that answers an
// ack (which nobody answers) leaves bytes on the kept connection; the next
// message must go out on a new connection, or its reply would be read
// from those bytes, and every later one would be one behind.
func TestRelayDropsAConnectionWithAStrayAnswer(t *testing.T) {
	m := startNodeWith(t, t.TempDir(), func(c *Config) { c.Relay = true })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	type got struct {
		f    *protocol.Frame
		conn int
	}
	frames := make(chan got, 8)
	go func() {
		for conn := 1; ; conn++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				dec := protocol.NewDecoder(c, protocol.DecoderOptions{})
				for {
					f, err := dec.Decode()
					if err != nil {
						return
					}
					typ := "ack" // answers everything, acks too (out of protocol)
					if f.Type() == "ack" {
						typ = "error"
					}
					reply := &protocol.Frame{Headers: []protocol.Header{{Name: "FROM", Value: f.To()}, {Name: "TO", Value: f.From()}, {Name: "TYPE", Value: typ}}, Body: []byte(`{}`)}
					if _, err := c.Write(protocol.Encode(reply)); err != nil {
						return
					}
					frames <- got{f, conn}
				}
			}()
		}
	}()
	registerAt(t, m, "agent://chatty.local", ln.Addr().String())
	c := dial(t, m.TCPAddr())
	c.Write([]byte("AGLX/1.0 TCP\nFROM: agent://src.local\nTO: agent://chatty.local\nTYPE: ack\n\n{\"note\": \"n0\"}\n"))
	c.Flush()
	first := <-frames
	c.Write([]byte("AGLX/1.0 TCP\nFROM: agent://src.local\nTO: agent://chatty.local\nTYPE: task.cancel\n\n{\"task_id\": \"n1\", \"reason\": \"r\"}\n"))
	c.Flush()
	readReply(t, c)
	select {
	case second := <-frames:
		if second.f.Type() != "task.cancel" || second.conn == first.conn {
			t.Fatalf("the task.cancel went out on connection %d, the one with the stray answer (%d)", second.conn, first.conn)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the task.cancel was not delivered")
	}
}
