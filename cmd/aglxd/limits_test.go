package main

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aglx/ledger/bridge"
	"github.com/aglx/ledger/protocol"
)

// TestConnectionLimit: a connection over --max-connections gets 429 and is
// closed; a peer over the limit that says nothing on the TLS port (its
// refusal's TLS handshake waits to read) holds up neither the next TLS
// connection once a slot is free nor the node's shutdown. It held both:
// the refusal ran on the accept loop with only a write deadline.
func TestConnectionLimit(t *testing.T) {
	m := startNodeWith(t, t.TempDir(), func(c *Config) { c.ConnectionsMax = 1 })

	first := dial(t, m.TCPAddr())
	first.Write([]byte("AGLX/1.0 TCP\nFROM: agent://a.local\nTO: agent://b.local\nTYPE: task.cancel\n\n{\"task_id\": \"t1\", \"reason\": \"r\"}\n"))
	first.Flush()
	readReply(t, first) // served: the one slot is taken

	over := dial(t, m.TCPAddr())
	if e := readError(t, over); e.Status != 429 {
		t.Fatalf("a connection over the limit got %+v, want 429", e)
	}

	silent, err := net.Dial("tcp", m.TLSAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()

	first.Close()
	for deadline := time.Now().Add(10 * time.Second); m.bridge.Counters().ConnectionsOpen != 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first connection never closed")
		}
	}
	c := dialTLS(t, m) // fails within 5 s if the TLS accept loop is stuck
	c.Write([]byte("AGLX/1.0 TCP\nFROM: agent://a.local\nTO: agent://b.local\nTYPE: task.cancel\n\n{\"task_id\": \"t2\", \"reason\": \"r\"}\n"))
	c.Flush()
	readReply(t, c)
	c.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- m.Close(ctx) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("the node did not stop while a silent peer was being refused")
	}
}

// TestConnectionsPerHost: one host may hold only its share of the
// connections. A peer that opened every slot with silent connections (each
// kept for the idle timeout, and reopened) locked out every other agent,
// and every security message with them, since TLS shares the pool
// (helper-52). Its next connection, plain or TLS, gets 429 naming the
// per-host limit; another host would still be served.
func TestConnectionsPerHost(t *testing.T) {
	m := startNodeWith(t, t.TempDir(), func(c *Config) { c.ConnectionsMax, c.ConnectionsPerHostMax = 8, 2 })
	for range 2 {
		c := dial(t, m.TCPAddr())
		c.Write([]byte("AGLX/1.0 TCP\nFROM: agent://a.local\nTO: agent://b.local\nTYPE: task.cancel\n\n{\"task_id\": \"t1\", \"reason\": \"r\"}\n"))
		c.Flush()
		readReply(t, c) // served
	}
	for _, addr := range []string{m.TCPAddr(), m.TLSAddr()} {
		var over net.Conn
		var err error
		if addr == m.TLSAddr() {
			over, err = tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) // the refusal comes over TLS
		} else {
			over, err = net.Dial("tcp", addr)
		}
		if err != nil {
			t.Fatal(err)
		}
		over.SetDeadline(time.Now().Add(10 * time.Second))
		b, _ := io.ReadAll(over)
		over.Close()
		if !strings.Contains(string(b), "429") || !strings.Contains(string(b), "from one host") {
			t.Fatalf("a third connection from one host to %s got %q; want 429 naming the per-host limit", addr, b)
		}
	}
	if got := m.bridge.Counters().ConnectionsOpen; got != 2 {
		t.Fatalf("%d connections open, want the host's 2", got)
	}
}

// TestHTTPQueryValues: a query value that is not a number is a 400 that
// names it, not read as nothing.
func TestHTTPQueryValues(t *testing.T) {
	m := startNode(t, t.TempDir())
	tests := []struct {
		path string
		want int
	}{
		{"/v1/ledger/mismatches?limit=abc", http.StatusBadRequest},
		{"/v1/ledger/mismatches?after=-1", http.StatusBadRequest},
		{"/v1/agents?limit=ten", http.StatusBadRequest},
		{"/v1/mentors?limit=x", http.StatusBadRequest},
		{"/v1/ledger/mismatches?limit=5000000", http.StatusOK}, // out of range: the largest page
		{"/v1/agents?limit=10", http.StatusOK},
		// Numbers too large for an int are numbers still: the largest
		// page, and after every sequence.
		{"/v1/agents?limit=99999999999999999999", http.StatusOK},
		{"/v1/mentors?limit=99999999999999999999", http.StatusOK},
		{"/v1/ledger/mismatches?limit=99999999999999999999&after=99999999999999999999", http.StatusOK},
		// Zero or less asks for nothing, and got the largest page.
		{"/v1/ledger/mismatches?limit=0", http.StatusBadRequest},
		{"/v1/agents?limit=-1", http.StatusBadRequest},
		{"/v1/mentors?limit=-99999999999999999999", http.StatusBadRequest},
		// A path that is no endpoint answers in JSON too.
		{"/v1/nothing", http.StatusNotFound},
	}
	// Another method: 405 on a known path, 404 on an unknown one, in JSON.
	for path, want := range map[string]int{"/v1/stats": http.StatusMethodNotAllowed, "/v1/nothing": http.StatusNotFound} {
		resp, err := http.Post("http://"+m.HTTPAddr()+path, "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("POST %s = %d (%s); want %d in JSON", path, resp.StatusCode, resp.Header.Get("Content-Type"), want)
		}
	}
	for _, tc := range tests {
		resp, err := http.Get("http://" + m.HTTPAddr() + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		ct := resp.Header.Get("Content-Type")
		resp.Body.Close()
		if resp.StatusCode != tc.want || ct != "application/json" {
			t.Errorf("GET %s = %d (%s), want %d in JSON", tc.path, resp.StatusCode, ct, tc.want)
		}
	}
}

// TestPlainFrameOnTheTLSPort: a frame sent in the clear to the TLS port
// got the connection closed without a word (helper-52); it now gets a 400
// in the clear that says what the port takes.
func TestPlainFrameOnTheTLSPort(t *testing.T) {
	m := startNode(t, t.TempDir())
	c, err := net.Dial("tcp", m.TLSAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "AGLX/1.0 TCP\nFROM: agent://a.local\nTO: agent://b.local\nTYPE: task.cancel\n\n{\"task_id\": \"t1\", \"reason\": \"r\"}\n")
	b, _ := io.ReadAll(c)
	if !strings.Contains(string(b), "400") || !strings.Contains(string(b), "TLS only") {
		t.Fatalf("a plain frame on the TLS port got %q; want a 400 saying the port takes TLS only", b)
	}
}

// TestHTTPAnswersWhileStarting: the start's repair and duplicate-index
// rebuild take seconds on a long log, and the HTTP port was not open
// meanwhile, so a health check saw a refused connection, as from a dead
// node (helper-53). The port is open from the start and answers 503
// "starting" until the node serves.
func TestHTTPAnswersWhileStarting(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DataDir, cfg.HTTP = t.TempDir(), "127.0.0.1:0"
	m := NewMain(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer m.Close(context.Background())
	if err := m.serveHTTPEarly(); err != nil { // what Run does first
		t.Fatal(err)
	}
	for _, path := range []string{"/healthz", "/readyz", "/v1/node"} {
		resp, err := http.Get("http://" + m.HTTPAddr() + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), `"status":"starting"`) || resp.Header.Get("Retry-After") != "1" {
			t.Fatalf("GET %s while starting: %d %s, Retry-After %q; want 503 starting, and 1", path, resp.StatusCode, b, resp.Header.Get("Retry-After"))
		}
	}
}

// TestEmptyIDIsRefused: an empty ID header was taken and the frame stored
// with no dedup key at all, though the refusal text says 1 to 128 bytes
// (helper-52). It is refused at the edge; stored events are read as before.
func TestEmptyIDIsRefused(t *testing.T) {
	m := startNode(t, t.TempDir())
	c := dial(t, m.TCPAddr())
	c.Write([]byte("AGLX/1.0 TCP\nFROM: agent://a.local\nTO: agent://b.local\nTYPE: task.cancel\nID:\n\n{\"task_id\": \"t1\", \"reason\": \"r\"}\n"))
	c.Flush()
	if e := readError(t, c); e.Status != 400 || !strings.Contains(e.Reason, "ID header") {
		t.Fatalf("a frame with an empty ID: %+v; want 400 naming the ID header", e)
	}
}

// TestHTTPHeadersAreBounded: a request whose headers pass
// bridge.HTTPHeaderBytesMax is refused (431) before any handler runs; one
// under it is served. Go's default let each of the 256 connections hold a
// megabyte of headers (helper-98).
func TestHTTPHeadersAreBounded(t *testing.T) {
	m := startNode(t, t.TempDir())
	for _, tc := range []struct {
		name   string
		header int // bytes of one header's value
		want   int
	}{
		{"small", 1 << 10, http.StatusOK},
		{"past the bound", 2 * bridge.HTTPHeaderBytesMax, http.StatusRequestHeaderFieldsTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest("GET", "http://"+m.HTTPAddr()+"/healthz", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-Padding", strings.Repeat("a", tc.header))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("GET /healthz with a header of %d bytes: %d, want %d", tc.header, resp.StatusCode, tc.want)
			}
		})
	}
}

// TestConnectionLimitRefusalSurvivesTheSendersFrame: a peer over the
// connection limit that sends a large frame before it reads still gets to
// send it whole and then reads its 429. The node used to write the refusal
// and close at once, with the frame unread: the kernel then answers the
// rest of the frame with a reset, so the sender's write failed with
// "connection reset" and the reason was lost with it (helper-130).
func TestConnectionLimitRefusalSurvivesTheSendersFrame(t *testing.T) {
	m := startNodeWith(t, t.TempDir(), func(c *Config) { c.ConnectionsMax = 1 })
	first := dial(t, m.TCPAddr())
	first.Write([]byte("AGLX/1.0 TCP\nFROM: agent://a.local\nTO: agent://b.local\nTYPE: task.cancel\n\n{\"task_id\": \"t1\", \"reason\": \"r\"}\n"))
	first.Flush()
	readReply(t, first) // served: the one slot is taken

	body := `{"task_id": "t2", "reason": "` + strings.Repeat("x", protocol.BodySizeMaxDefault-64) + `"}`
	frame := "AGLX/1.0 TCP\nFROM: agent://a.local\nTO: agent://b.local\nTYPE: task.cancel\n\n" + body + "\n"
	for i := range 3 {
		over, err := net.Dial("tcp", m.TCPAddr())
		if err != nil {
			t.Fatal(err)
		}
		over.SetDeadline(time.Now().Add(20 * time.Second))
		if _, err := io.WriteString(over, frame); err != nil {
			over.Close()
			t.Fatalf("attempt %d: sending a %d-byte frame to a node at its connection limit failed: %v", i, len(frame), err)
		}
		c := bridge.NewClient(over)
		if e := readError(t, c); e.Status != 429 {
			t.Fatalf("attempt %d: got %+v, want 429", i, e)
		}
		over.Close()
	}
}
