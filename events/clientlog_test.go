package events

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// syncBuffer is a log destination the client's callback goroutine and the
// test may share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// waitFor polls until cond holds or fails the test after a deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10s for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// serverWithClientEvents starts an embedded server for the test and
// returns ClientEvents' options for a connection named test-conn, logging
// into out.
func serverWithClientEvents(t *testing.T) (*Server, *syncBuffer, []nats.Option) {
	t.Helper()
	s, err := StartServer(ServerConfig{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	out := &syncBuffer{}
	return s, out, ClientEvents(slog.New(slog.NewTextHandler(out, nil)), "test-conn", "the test waits")
}

// TestSlowConsumerIsLoggedWithItsMeaning: when the NATS client drops
// messages for one of the node's subscriptions, the node's log says so,
// with the subject and what it costs (a read's consumer starts again and
// loses nothing; another subscription loses what was dropped), and
// /metrics counts it. Before, the library printed its own line on stderr.
func TestSlowConsumerIsLoggedWithItsMeaning(t *testing.T) {
	for _, tc := range []struct {
		name, subject, meaning, level string
	}{
		// Harmless, and met at starts that replay a long log: not a
		// warning (helper-104).
		{"a read's delivery inbox", NodeInboxPrefix + ".READ1", "nothing is lost", "level=INFO"},
		{"a wildcard subscription", NodeInboxPrefix + ".REPLIES.*", "was to receive is lost", "level=WARN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, out, opts := serverWithClientEvents(t)
			nc, err := s.Connect("test", opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			sub, err := nc.SubscribeSync(tc.subject)
			if err != nil {
				t.Fatal(err)
			}
			if err := sub.SetPendingLimits(1, -1); err != nil {
				t.Fatal(err)
			}
			before := ReadClientCounters()
			subj := strings.Replace(tc.subject, "*", "x", 1)
			for range 5 {
				if err := nc.Publish(subj, []byte("m")); err != nil {
					t.Fatal(err)
				}
			}
			nc.Flush()
			waitFor(t, "the slow consumer's log line", func() bool { return strings.Contains(out.String(), "dropped messages") })
			line := out.String()
			for _, want := range []string{tc.meaning, "subject=" + tc.subject, "nats_connection=test-conn", tc.level} {
				if !strings.Contains(line, want) {
					t.Errorf("log line lacks %q:\n%s", want, line)
				}
			}
			after := ReadClientCounters()
			if after.SlowConsumers <= before.SlowConsumers || after.AsyncErrors <= before.AsyncErrors {
				t.Errorf("counters did not count it: before %+v, after %+v", before, after)
			}
		})
	}
}

// TestLostConnectionIsLogged: a node connection that the server drops is
// logged and counted (appends fail until it is back, and an operator
// reading the log should learn why); one the node closes itself is not.
func TestLostConnectionIsLogged(t *testing.T) {
	for _, tc := range []struct {
		name   string
		end    func(*Server, *nats.Conn)
		logged bool
	}{
		{"the server goes away", func(s *Server, _ *nats.Conn) { s.Shutdown() }, true},
		{"the node closes it", func(_ *Server, nc *nats.Conn) { nc.Close() }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, out, opts := serverWithClientEvents(t)
			closed := make(chan struct{})
			nc, err := s.Connect("test", append(opts,
				nats.MaxReconnects(1), nats.ReconnectWait(10*time.Millisecond), // the node's reconnect; once here
				nats.ClosedHandler(func(*nats.Conn) { close(closed) }))...)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			before := ReadClientCounters()
			tc.end(s, nc)
			select {
			case <-closed:
			case <-time.After(10 * time.Second):
				t.Fatal("the connection did not close")
			}
			// The client runs its callbacks in order on one goroutine:
			// the disconnect's ran before the close's.
			got := strings.Contains(out.String(), "NATS connection lost; until it is back, the test waits")
			if got != tc.logged {
				t.Errorf("logged a lost connection: %v, want %v:\n%s", got, tc.logged, out.String())
			}
			if counted := ReadClientCounters().Disconnects > before.Disconnects; counted != tc.logged {
				t.Errorf("counted a disconnect: %v, want %v", counted, tc.logged)
			}
		})
	}
}
