package events

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// TestReaderLimits: a review (helper-98) found that readers had no bounds
// of their own: one connection held 200,000 subscriptions (117 MiB of the
// node's heap), one host held 1,999 connections and only the server's
// 65,536 applied, and a pull could wait longer than the server kept the
// way back to it. Each row goes past one bound as readers do, and the
// server (or JetStream) refuses with its own error; at the same time the
// node's own connection subscribes past the readers' bound, appends and
// reads, and the readers' gate answers a reader already connected.
func TestReaderLimits(t *testing.T) {
	for _, tc := range []struct {
		name string
		// past goes one past the bound and returns what was answered,
		// and what ends the readers' load.
		past func(t *testing.T, s *Server) (said string, release func())
		want string
		cfg  ServerConfig
	}{
		{"subscriptions of one reader's connection", pastReaderSubscriptions, "maximum subscriptions exceeded", ServerConfig{}},
		{"readers' connections", pastReaderConnections, "maximum account active connections exceeded", ServerConfig{}},
		// The server's bound lowered to testConnectionsMax, so that the
		// silent connections past it open well within its auth timeout.
		{"connections not yet past CONNECT", pastServerConnections, "maximum connections exceeded", ServerConfig{connectionsMax: testConnectionsMax}},
		{"a pull longer than ReaderPullExpiresMax", pastReaderPullExpires, "Exceeded MaxRequestExpires of " + ReaderPullExpiresMax.String(), ServerConfig{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, l, nc, rd := startWithReaderConfig(t, tc.cfg)
			appendAll(t, l, testEnvelope(1, "task.assign", "agent://a.local", "agent://b.local"))
			said, release := tc.past(t, s)
			defer release()
			if !strings.Contains(said, tc.want) {
				t.Fatalf("past the bound, the server said %q; want %q", said, tc.want)
			}
			// The node's own connection is not held to the readers' bounds.
			for i := range ReaderSubscriptionsMax + 1 {
				sub, err := nc.SubscribeSync(fmt.Sprintf("aglx.test.node.%d", i))
				if err != nil {
					t.Fatal(err)
				}
				defer sub.Unsubscribe()
			}
			if err := nc.Flush(); err != nil || nc.LastError() != nil {
				t.Fatalf("the node's connection with %d subscriptions: %v, %v", ReaderSubscriptionsMax+1, err, nc.LastError())
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if a, err := l.Append(ctx, testEnvelope(2, "task.assign", "agent://a.local", "agent://b.local")).Wait(ctx); err != nil || a.Seq != 2 {
				t.Fatalf("the node's append with readers at the bound: %+v, %v; want seq 2", a, err)
			}
			if err := l.WaitPublished(ctx, 2); err != nil {
				t.Fatalf("the node's event stream with readers at the bound: %v", err)
			}
			n := 0
			if err := l.Read(ctx, ReadOptions{}, func(*Envelope) error { n++; return nil }); err != nil || n != 2 {
				t.Fatalf("the node's read with readers at the bound: %d events, %v; want 2", n, err)
			}
			if got := readerRequest(t, rd, "$JS.API.STREAM.INFO."+StreamNameDefault, nil); got != "" {
				t.Fatalf("the readers' gate with readers at the bound: %s", got)
			}
		})
	}
}

// pastReaderSubscriptions subscribes one reader's connection to one
// subject more than ReaderSubscriptionsMax.
func pastReaderSubscriptions(t *testing.T, s *Server) (string, func()) {
	errs := make(chan error, 16)
	rd, err := nats.Connect(s.ClientURL(), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		select {
		case errs <- err:
		default:
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	for i := range ReaderSubscriptionsMax {
		if _, err := rd.SubscribeSync(fmt.Sprintf("x.%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := rd.Flush(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errs:
		t.Fatalf("a reader's %d subscriptions were refused: %v", ReaderSubscriptionsMax, err)
	default:
	}
	rd.SubscribeSync("x.one-more")
	rd.Flush()
	select {
	case err := <-errs:
		if rd.IsClosed() {
			t.Errorf("the server closed the reader's connection for a subscription too many")
		}
		return err.Error(), rd.Close
	case <-time.After(10 * time.Second):
		return "nothing", rd.Close
	}
}

// pastReaderConnections connects readers until there are one more than
// ReaderConnectionsMax (startWithReader made the first), and checks that
// a reader connects again once one has left.
func pastReaderConnections(t *testing.T, s *Server) (string, func()) {
	var conns []*nats.Conn
	release := func() {
		for _, c := range conns {
			c.Close()
		}
	}
	for range ReaderConnectionsMax - 1 {
		rd, err := nats.Connect(s.ClientURL())
		if err != nil {
			release()
			t.Fatalf("reader %d of %d: %v", len(conns)+2, ReaderConnectionsMax, err)
		}
		conns = append(conns, rd)
	}
	_, err := nats.Connect(s.ClientURL())
	if err == nil {
		return "connected", release
	}
	conns[0].Close()
	for deadline := time.Now().Add(10 * time.Second); ; {
		rd, err := nats.Connect(s.ClientURL())
		if err == nil {
			conns = append(conns, rd)
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("no reader could connect after one left: %v", err)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return err.Error(), release
}

// pastServerConnections opens, at once, one more connection than
// ServerConnectionsMax that never sends its CONNECT, and returns the
// first line a refused one got.
func pastServerConnections(t *testing.T, s *Server) (string, func()) {
	addr := strings.TrimPrefix(s.ClientURL(), "nats://")
	var (
		mu       sync.Mutex
		conns    []net.Conn
		refusals []string
		wg       sync.WaitGroup
	)
	for range testConnectionsMax + 1 {
		wg.Go(func() {
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				return
			}
			// The server sends its INFO first, then the refusal; the
			// connections it keeps hear nothing more until its auth
			// timeout (2 s).
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			r := bufio.NewReader(c)
			r.ReadString('\n')
			c.SetReadDeadline(time.Now().Add(time.Second))
			line, _ := r.ReadString('\n')
			mu.Lock()
			defer mu.Unlock()
			conns = append(conns, c)
			if strings.HasPrefix(line, "-ERR") {
				refusals = append(refusals, line)
			}
		})
	}
	wg.Wait()
	release := func() {
		for _, c := range conns {
			c.Close()
		}
	}
	for _, r := range refusals {
		if strings.Contains(r, "maximum connections exceeded") {
			return r, release
		}
	}
	if len(refusals) == 0 {
		return fmt.Sprintf("%d connections, none refused", len(conns)), release
	}
	return refusals[0], release
}

// testConnectionsMax is the server's connection bound in the row that
// goes past it: the node's own connections and the test's reader leave
// room for a few silent ones.
const testConnectionsMax = 24 // connections

// pastReaderPullExpires makes a consumer as a reader that names no
// max_expires, and pulls from it for longer than ReaderPullExpiresMax.
func pastReaderPullExpires(t *testing.T, s *Server) (string, func()) {
	rd, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	if got := readerRequest(t, rd, "$JS.API.CONSUMER.CREATE."+StreamNameDefault+".long",
		map[string]any{"stream_name": StreamNameDefault, "config": map[string]any{"durable_name": "long", "ack_policy": "none"}}); got != "" {
		t.Fatalf("the reader's consumer: %s", got)
	}
	pull := fmt.Sprintf(`{"batch":1,"expires":%d}`, (ReaderPullExpiresMax + time.Second).Nanoseconds())
	m, err := rd.Request("$JS.API.CONSUMER.MSG.NEXT."+StreamNameDefault+".long", []byte(pull), 5*time.Second)
	if err != nil {
		return err.Error(), rd.Close
	}
	if m.Header.Get("Status") == "" {
		return "an event, " + m.Header.Get(HdrEventID), rd.Close
	}
	return m.Header.Get("Status") + " " + m.Header.Get("Description"), rd.Close
}

// TestReaderResponseMappingsExpire: every pull and every acknowledgement a
// reader sends with a reply subject leaves the server a way back to it in
// the node's account, a response mapping, whether anyone waits there or
// not. At the server's default threshold 200,000 of them held 64 MiB for
// two minutes after the reader left (helper-98). Here the threshold is a
// second, as ReaderPullResponseThreshold is seconds in production, and
// the mappings are gone within two of it (the server sweeps once a
// threshold).
func TestReaderResponseMappingsExpire(t *testing.T) {
	const threshold = time.Second
	for _, tc := range []struct {
		name    string
		subject string
		body    string
	}{
		{"pulls", "$JS.API.CONSUMER.MSG.NEXT." + StreamNameDefault + ".mine", `{"batch":1,"expires":1000000000}`},
		// Of an event the consumer never delivered: JetStream does not
		// answer.
		{"acknowledgements", "$JS.ACK." + StreamNameDefault + ".mine.1.100.100.1.0", `+ACK`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, l, _, rd := startWithReaderConfig(t, ServerConfig{responseThreshold: threshold})
			appendAll(t, l, testEnvelope(1, "task.assign", "agent://a.local", "agent://b.local"))
			if got := readerRequest(t, rd, "$JS.API.CONSUMER.CREATE."+StreamNameDefault+".mine",
				map[string]any{"stream_name": StreamNameDefault, "config": map[string]any{"durable_name": "mine", "ack_policy": "explicit", "deliver_policy": "new"}}); got != "" {
				t.Fatalf("the reader's consumer: %s", got)
			}
			readers, err := s.LookupAccount(ReadersAccount)
			if err != nil {
				t.Fatal(err)
			}
			// Nobody listens on the replies: a mapping whose answer
			// finds no one goes with the answer, and one whose reader
			// unsubscribes goes with the subscription, but a pull that
			// waits, or an acknowledgement JetStream does not answer,
			// leaves its mapping until the threshold. Fewer pulls than a
			// consumer's waiting room (512) all wait.
			const n = 500
			for i := range n {
				rd.PublishRequest(tc.subject, fmt.Sprintf("nobody.listens.%d", i), []byte(tc.body))
			}
			if err := rd.Flush(); err != nil {
				t.Fatal(err)
			}
			if got := s.GlobalAccount().NumPendingAllResponses(); got < n/2 {
				t.Fatalf("%d %s left %d mappings; the test expects one each", n, tc.name, got)
			}
			rd.Close()
			left := time.Now()
			for {
				node, back := s.GlobalAccount().NumPendingAllResponses(), readers.NumPendingReverseResponses()
				if node == 0 && back == 0 {
					break
				}
				if time.Since(left) > 2*threshold+5*time.Second {
					t.Fatalf("%s after the reader left: %d response mappings in the node's account, %d reverse entries in the readers'; want none", time.Since(left).Round(time.Second), node, back)
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}

// TestReaderResponseThresholds: every export readers use keeps the way
// back for its own threshold, and a pull never waits longer than its way
// back lasts.
func TestReaderResponseThresholds(t *testing.T) {
	s, _, _, _ := startWithReader(t)
	if ReaderPullExpiresMax >= ReaderPullResponseThreshold {
		t.Fatalf("a pull may wait %s, its way back lasts %s", ReaderPullExpiresMax, ReaderPullResponseThreshold)
	}
	for _, im := range readerImports(StreamNameDefault) {
		t.Run(im.from, func(t *testing.T) {
			got, err := s.GlobalAccount().ServiceExportResponseThreshold(im.to)
			if want := im.responseThreshold(); err != nil || got != want {
				t.Fatalf("ServiceExportResponseThreshold(%q) = %v, %v; want %v", im.to, got, err, want)
			}
		})
	}
}

// TestServerBounds: the embedded server runs with the node's bounds on
// connections and on what it holds for one connection, not the server's
// defaults (65,536 connections), as its monitoring says.
func TestServerBounds(t *testing.T) {
	s, _, _, _ := startWithReader(t)
	v, err := s.Server.Varz(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what      string
		got, want int64
	}{
		{"max_connections", int64(v.MaxConn), ServerConnectionsMax},
		{"max_pending", v.MaxPending, ServerPendingBytesMax},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.what, c.got, c.want)
		}
	}
}
