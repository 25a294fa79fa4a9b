package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aglx/ledger/bridge"
	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/protocol"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// startNode runs a node on random loopback ports in dir and stops it when
// the test ends.
func startNode(t *testing.T, dir string) *Main {
	t.Helper()
	return startNodeLogging(t, dir, nil)
}

// startNodeLogging is startNode with the node's log (text, INFO and up)
// written to logs; nil: none, or stderr with -v.
func startNodeLogging(t *testing.T, dir string, logs io.Writer) *Main {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Relay = false // tests register addresses off loopback; only the relay test relays
	cfg.DataDir = dir
	cfg.Listen, cfg.UDP, cfg.HTTP, cfg.NATSListen = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.TLSListen = "127.0.0.1:0"
	lg := slog.New(slog.NewTextHandler(io.Discard, nil))
	switch {
	case logs != nil:
		lg = slog.New(slog.NewTextHandler(logs, nil))
	case testing.Verbose():
		lg = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	m := NewMain(cfg, lg)
	if err := m.Run(context.Background()); err != nil {
		m.Close(context.Background())
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return m
}

// referenceFiles returns the reference example frames in their order.
func referenceFiles(t *testing.T) [][]byte {
	t.Helper()
	paths, err := filepath.Glob("../../testdata/reference/*.aglx")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no reference frames: %v", err)
	}
	sort.Strings(paths)
	var out [][]byte
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

func dial(t *testing.T, addr string) *bridge.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := bridge.Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	c.Conn().SetDeadline(time.Now().Add(60 * time.Second))
	t.Cleanup(func() { c.Close() })
	return c
}

// dialTLS connects to the node's TLS port, trusting the self-signed
// certificate it made in its data dir.
func dialTLS(t *testing.T, m *Main) *bridge.Client {
	t.Helper()
	cfg, err := bridge.ClientTLS(filepath.Join(m.cfg.DataDir, "tls", "cert.pem"), "", "localhost")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := bridge.DialTLS(ctx, m.TLSAddr(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.Conn().SetDeadline(time.Now().Add(60 * time.Second))
	t.Cleanup(func() { c.Close() })
	return c
}

type ackBody struct {
	EventID   string `json:"event_id"`
	Seq       uint64 `json:"seq"`
	Duplicate bool   `json:"duplicate"`
}

type errorBody struct {
	Status int    `json:"status"`
	Reason string `json:"reason"`
}

func readAck(t *testing.T, c *bridge.Client) (*protocol.Frame, ackBody) {
	t.Helper()
	f, err := c.ReadReply()
	if err != nil {
		t.Fatalf("reading reply: %v", err)
	}
	if f.Type() != "ack" {
		t.Fatalf("reply TYPE %q, want ack: %s", f.Type(), f.Body)
	}
	return f, eventOf(t, f)
}

// readReply reads any reply to a stored message: an ack, a domain answer
// or a domain refusal; each names the event.
func readReply(t *testing.T, c *bridge.Client) (*protocol.Frame, ackBody) {
	t.Helper()
	f, err := c.ReadReply()
	if err != nil {
		t.Fatalf("reading reply: %v", err)
	}
	return f, eventOf(t, f)
}

func eventOf(t *testing.T, f *protocol.Frame) ackBody {
	t.Helper()
	var a ackBody
	if err := json.Unmarshal(f.Body, &a); err != nil || a.EventID == "" || a.Seq == 0 {
		t.Fatalf("%s reply body %s names no event: %v", f.Type(), f.Body, err)
	}
	return a
}

func readError(t *testing.T, c *bridge.Client) errorBody {
	t.Helper()
	f, err := c.ReadReply()
	if err != nil {
		t.Fatalf("reading reply: %v", err)
	}
	var e errorBody
	if f.Type() != "error" || json.Unmarshal(f.Body, &e) != nil {
		t.Fatalf("reply %s %s, want an error", f.Type(), f.Body)
	}
	if st := f.Value(protocol.HeaderStatus); !strings.HasPrefix(st, fmt.Sprint(e.Status)+" ") {
		t.Fatalf("STATUS header %q disagrees with body status %d", st, e.Status)
	}
	return e
}

func openLog(t *testing.T, m *Main) *events.Log {
	t.Helper()
	return openLogAt(t, m.NATSURL())
}

// openLogAt attaches a reader to the log on the NATS server at url.
func openLogAt(t *testing.T, url string) *events.Log {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	l, err := events.Attach(context.Background(), nc, events.StreamNameDefault)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestReferenceFramesBackToBack sends every reference example over one
// connection without waiting: each gets one reply, in order, and the log
// holds each frame with its headers and body bytes as sent. The connection
// is TLS, as the reference's security messages require. The zone.confirm
// is refused before it is recorded (403): it carries a session token.
func TestReferenceFramesBackToBack(t *testing.T) {
	m := startNode(t, t.TempDir())
	frames := referenceFiles(t)
	c := dialTLS(t, m)
	for _, b := range frames {
		if err := c.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	l := openLog(t, m)
	var last uint64
	for i, b := range frames {
		sent, err := protocol.NewDecoder(bytes.NewReader(b), protocol.DecoderOptions{}).Decode()
		if err != nil {
			t.Fatal(err)
		}
		if sent.Type() == protocol.TypeZoneConfirm {
			if e := readError(t, c); e.Status != 403 {
				t.Fatalf("frame %d, zone.confirm: %+v; want 403, not recorded", i+1, e)
			}
			continue
		}
		reply, a := readReply(t, c)
		if a.Seq <= last {
			t.Fatalf("frame %d: seq %d after %d: replies out of order", i+1, a.Seq, last)
		}
		last = a.Seq
		if got := reply.Value(protocol.HeaderInReplyTo); got != a.EventID {
			t.Fatalf("frame %d: IN-REPLY-TO %q, want the event id %q", i+1, got, a.EventID)
		}
		if reply.Value(protocol.HeaderID) == "" || reply.To() != sent.From() {
			t.Fatalf("frame %d: reply without ID or not addressed to %s: %+v", i+1, sent.From(), reply.Headers)
		}
		ev := getEvent(t, m, l, a.Seq)
		if ev.ID != a.EventID || !bytes.Equal(ev.Body, sent.Body) || !reflect.DeepEqual(ev.Headers, sent.Headers) {
			t.Fatalf("frame %d: stored %+v\nsent %+v", i+1, ev, sent)
		}
	}
	if c.CloseWrite() != nil {
		t.Fatal("close write")
	}
	if f, err := c.ReadReply(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last reply got %+v, %v; want the node to close", f, err)
	}
}

// getEvent reads the event at seq once it is in the event stream: an ack
// means the event is durable, and readers see it a moment later.
func getEvent(t *testing.T, m *Main, l *events.Log, seq uint64) *events.Envelope {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.log.WaitPublished(ctx, seq); err != nil {
		t.Fatal(err)
	}
	ev, err := l.Get(ctx, seq)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// TestRestartKeepsEventsAndProjections stops a node and starts another on the
// same data dir: the events are there and the projections catch up to the
// same state.
func TestRestartKeepsEventsAndProjections(t *testing.T) {
	dir := t.TempDir()
	m := startNode(t, dir)
	c := dialTLS(t, m)
	for _, b := range referenceFiles(t) {
		c.Write(b)
	}
	c.CloseWrite()
	n := 0 // replies that name an event: all but the refused zone.confirm
	for {
		f, err := c.ReadReply()
		if err != nil {
			break
		}
		if bytes.Contains(f.Body, []byte(`"seq":`)) {
			n++
		}
	}
	before := statsOf(t, m, uint64(n))
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	m2 := startNode(t, dir)
	after := statsOf(t, m2, uint64(n))
	if !bytes.Equal(before, after) {
		t.Fatalf("stats after restart\n%s\nwant\n%s", after, before)
	}
	c2 := dial(t, m2.TCPAddr())
	c2.Write(referenceFiles(t)[0])
	c2.Flush()
	if _, a := readReply(t, c2); a.Seq != uint64(n)+1 {
		t.Fatalf("first event after restart has seq %d, want %d", a.Seq, n+1)
	}
}

// statsOf waits until the projections have applied seq and returns the
// stats projection's snapshot.
func statsOf(t *testing.T, m *Main, seq uint64) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.runner.WaitFor(ctx, seq); err != nil {
		t.Fatal(err)
	}
	var snap []byte
	var err error
	m.runner.View(func(uint64) { snap, err = m.stats.Snapshot() })
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// TestPlainNATSClientSeesEvents subscribes with nothing but nats.go on the
// documented subjects.
func TestPlainNATSClientSeesEvents(t *testing.T) {
	m := startNode(t, t.TempDir())
	nc, err := nats.Connect(m.NATSURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	sub, err := nc.SubscribeSync("aglx.ev.credit.>")
	if err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	frames := referenceFiles(t)
	c := dial(t, m.TCPAddr())
	c.Write(frames[0])  // task.assign: not credit
	c.Write(frames[14]) // credit.transfer from owner01 to worker05
	c.Flush()
	readReply(t, c)
	_, a := readReply(t, c) // refused (no credits), but recorded
	msg, err := sub.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	const want = "aglx.ev.credit.transfer.agent~owner01_local.agent~worker05_local"
	if msg.Subject != want || msg.Header.Get(events.HdrEventID) != a.EventID {
		t.Fatalf("got %s (event %s), want %s (event %s)", msg.Subject, msg.Header.Get(events.HdrEventID), want, a.EventID)
	}
	if !bytes.Contains(frames[14], msg.Data) || msg.Data[0] != '{' {
		t.Fatalf("data %q is not the frame's body", msg.Data)
	}
}

// TestBadInput sends each kind of bad input on its own connection and checks
// the status of the error reply, while a healthy connection keeps working.
func TestBadInput(t *testing.T) {
	m := startNode(t, t.TempDir())
	healthy := dial(t, m.TCPAddr())
	good := "AGLX/1.0 TCP\nFROM: agent://a.local\nTO: agent://b.local\nTYPE: task.result\n\n{\"task_id\":\"t1\",\"status\":\"SUCCESS\"}\n"
	tests := []struct {
		name   string
		in     string
		status int
		closes bool // the node hangs up after the error
	}{
		{"garbage", "\x00\x01garbage bytes\r\n", 400, true},
		{"truncated", "AGLX/1.0 TCP\nFROM: agent://a.local\nTYPE: task.result\n\n{\"task_id\":", 400, true},
		{"oversized header", "AGLX/1.0 TCP\nX-BIG: " + strings.Repeat("x", protocol.HeaderLineSizeMax+1) + "\n\n{}\n", 413, true},
		{"oversized body", "AGLX/1.0 TCP\nFROM: agent://a.local\nTO: agent://b.local\nTYPE: task.result\n\n{\"x\":\"" + strings.Repeat("y", protocol.BodySizeMaxDefault) + "\"}\n", 413, true},
		{"unknown version", "AGLX/9.9 TCP\nFROM: agent://a.local\nTYPE: task.result\n\n{}\n", 505, true},
		{"invalid json", "AGLX/1.0 TCP\nFROM: agent://a.local\nTO: agent://b.local\nTYPE: task.result\n\n{\"task_id\": nope}\n", 400, false},
		{"missing type", "AGLX/1.0 TCP\nFROM: agent://a.local\nTO: agent://b.local\n\n{\"task_id\":\"t\"}\n", 400, false},
		{"unknown type", "AGLX/1.0 TCP\nFROM: agent://a.local\nTO: agent://b.local\nTYPE: task.explode\n\n{}\n", 400, false},
		// CONTENT-LENGTH never moves the next frame (docs/PROTOCOL.md).
		{"content length 0 with a body", "AGLX/1.0 TCP\nFROM: agent://a.local\nTO: agent://b.local\nTYPE: task.result\nCONTENT-LENGTH: 0\n\n{\"task_id\":\"t\"}\n", 400, false},
		{"no body, no content length", "AGLX/1.0 TCP\nFROM: agent://a.local\nTO: agent://b.local\nTYPE: task.result\n\n", 400, false},
		// Bare CR line ends would merge this frame with the next: refused, closed.
		{"bare CR line ends", "AGLX/1.0 TCP\rFROM: agent://a.local\rTO: agent://b.local\rTYPE: task.result\r\r{\"task_id\":\"t\"}\r", 400, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, m.TCPAddr())
			c.Write([]byte(tc.in))
			if tc.name == "truncated" {
				c.CloseWrite()
			} else {
				c.Write([]byte(good))
				c.Flush()
			}
			if e := readError(t, c); e.Status != tc.status || e.Reason == "" {
				t.Fatalf("error %+v, want status %d with a reason", e, tc.status)
			}
			if tc.closes {
				if f, err := c.ReadReply(); err == nil {
					t.Fatalf("after a fatal error got %s; want the connection closed", f.Type())
				}
			} else {
				readAck(t, c) // the good frame behind the bad one
			}
			healthy.Write([]byte(good))
			healthy.Flush()
			readAck(t, healthy)
		})
	}
	t.Run("udp of a tcp-only type", func(t *testing.T) {
		uc, err := net.Dial("udp", m.UDPAddr())
		if err != nil {
			t.Fatal(err)
		}
		defer uc.Close()
		uc.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := uc.Write(referenceFiles(t)[14]); err != nil { // credit.transfer
			t.Fatal(err)
		}
		buf := make([]byte, 64<<10)
		n, err := uc.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		f, err := protocol.DecodeDatagram(buf[:n], protocol.DecoderOptions{})
		if err != nil || f.Type() != "error" || !strings.HasPrefix(f.Value(protocol.HeaderStatus), "400") {
			t.Fatalf("UDP reply %+v, %v; want a 400 error", f, err)
		}
		if got := m.bridge.Counters().UDPRefused; got != 1 {
			t.Fatalf("UDPRefused = %d, want 1", got)
		}
	})
}

// TestSecurityMessagesNeedTLS: auth, key and zone messages in the clear are
// refused with 403 naming the TLS port, whatever their body (a malformed
// one used to get a 400 about its fields, coaching the sender to fix it and
// send it in the clear again), and accepted over TLS.
func TestSecurityMessagesNeedTLS(t *testing.T) {
	m := startNode(t, t.TempDir())
	auth := referenceFiles(t)[26] // auth.request
	frames := map[string][]byte{
		"the reference auth.request":    auth,
		"auth.request without a key":    []byte("AGLX/1.0 TCP\nFROM: agent://a.local\nTO: registry://localhost\nTYPE: auth.request\n\n{\"agent_id\":\"a\"}\n"),
		"zone.join without a proof":     []byte("AGLX/1.0 TCP\nFROM: agent://a.local\nTO: registry://localhost\nTYPE: zone.join\n\n{\"zone_id\":\"z\"}\n"),
		"key.rotate with a bad CREDITS": []byte("AGLX/1.0 TCP\nFROM: agent://a.local\nTO: registry://localhost\nTYPE: key.rotate\nCREDITS: -1\n\n{}\n"),
	}
	for name, f := range frames {
		c := dial(t, m.TCPAddr())
		c.Write(f)
		c.Flush()
		if e := readError(t, c); e.Status != 403 || !strings.Contains(e.Reason, m.TLSAddr()) {
			t.Errorf("%s over plain TCP: %+v, want 403 naming %s", name, e, m.TLSAddr())
		}
	}
	// Over TLS it is taken: recorded, and its placeholder signature then
	// refused by the registry (401), as any unreadable signature is.
	tc := dialTLS(t, m)
	tc.Write(auth)
	tc.Flush()
	if f, _ := readReply(t, tc); f.Type() != "error" || !strings.HasPrefix(f.Value(protocol.HeaderStatus), "401 ") {
		t.Errorf("the reference auth.request over TLS: %s %s %s; want it recorded and refused 401 for its placeholder signature", f.Type(), f.Value(protocol.HeaderStatus), f.Body)
	}
}

// TestUDPAnnounceIsRecorded sends the reference announce as a datagram.
func TestUDPAnnounceIsRecorded(t *testing.T) {
	m := startNode(t, t.TempDir())
	uc, err := net.Dial("udp", m.UDPAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	announce := referenceFiles(t)[13]
	if _, err := uc.Write(announce); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.runner.WaitFor(ctx, 1); err != nil {
		t.Fatal(err)
	}
	ev := getEvent(t, m, openLog(t, m), 1)
	if ev.Type != "agent.announce" || ev.Transport != events.TransportUDP || ev.To != "" || !bytes.Contains(announce, ev.Body) {
		t.Fatalf("stored %+v", ev)
	}
	// A datagram sent again with an ID stores nothing new, and the
	// counters say so (each resend counted as appended).
	withID := bytes.Replace(announce, []byte("TYPE: agent.announce\n"), []byte("TYPE: agent.announce\nID: udp-1\n"), 1)
	for range 3 {
		uc.Write(withID)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		c := m.bridge.Counters()
		if c.UDPAppended == 2 && c.FramesDuplicate == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after one announce and three copies of another: %+v; want 2 appended, 2 duplicates", c)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPipelinedConnections runs several connections that each pipeline
// frames with ID headers; replies come back one per frame, in order.
func TestPipelinedConnections(t *testing.T) {
	m := startNode(t, t.TempDir())
	const conns, perConn = 4, 200
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for ci := 0; ci < conns; ci++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			c, err := bridge.Dial(ctx, m.TCPAddr())
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			go func() {
				for i := 0; i < perConn; i++ {
					c.Write([]byte(fmt.Sprintf("AGLX/1.0 TCP\nFROM: agent://c%d.local\nTO: agent://w.local\nTYPE: task.result\nID: c%d-%d\n\n{\"task_id\":\"t%d\",\"status\":\"SUCCESS\"}\n", ci, ci, i, i)))
				}
				c.CloseWrite()
			}()
			var last uint64
			for i := 0; i < perConn; i++ {
				f, err := c.ReadReply()
				if err != nil {
					errs <- fmt.Errorf("conn %d reply %d: %w", ci, i, err)
					return
				}
				var a ackBody
				json.Unmarshal(f.Body, &a)
				if want := fmt.Sprintf("c%d-%d", ci, i); f.Value(protocol.HeaderInReplyTo) != want || a.Seq <= last {
					errs <- fmt.Errorf("conn %d reply %d: IN-REPLY-TO %q seq %d after %d", ci, i, f.Value(protocol.HeaderInReplyTo), a.Seq, last)
					return
				}
				last = a.Seq
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestResendWithSameIDIsIdempotent sends the same frame with the same ID
// twice: one event, and the second reply names it.
func TestResendWithSameIDIsIdempotent(t *testing.T) {
	m := startNode(t, t.TempDir())
	c := dial(t, m.TCPAddr())
	frame := "AGLX/1.0 TCP\nFROM: agent://a.local\nTO: agent://b.local\nTYPE: task.result\nID: once\n\n{\"task_id\":\"t\",\"status\":\"SUCCESS\"}\n"
	c.Write([]byte(frame + frame))
	c.Flush()
	_, first := readAck(t, c)
	_, second := readAck(t, c)
	if !second.Duplicate || second.Seq != first.Seq || second.EventID != first.EventID {
		t.Fatalf("resend acked as %+v, want the first event %+v marked duplicate", second, first)
	}
}

// TestHealthz: ok while the store takes events. The embedded JetStream
// shuts itself down when its disk fills and stays down; /healthz said ok
// all along, while every frame waited 30 s for a 503 (helper-53). It is
// 503 now, and says what to do.
func TestHealthz(t *testing.T) {
	m := startNode(t, t.TempDir())
	health := func() (int, map[string]any) {
		resp, err := http.Get("http://" + m.HTTPAddr() + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body
	}
	if code, body := health(); code != http.StatusOK || body["status"] != "ok" {
		t.Fatalf("/healthz = %d %v", code, body)
	}
	if err := m.ns.DisableJetStream(); err != nil { // as the server does itself on a full disk
		t.Fatal(err)
	}
	if code, body := health(); code != http.StatusServiceUnavailable || !strings.Contains(fmt.Sprint(body["error"]), "JetStream is shut down") {
		t.Fatalf("/healthz with JetStream shut down = %d %v; want 503 saying so", code, body)
	} else if _, ok := body["log_last_seq"]; ok {
		// The log could not say where it ends; a 0 drew it as empty.
		t.Fatalf("/healthz with JetStream shut down names a log position: %v", body)
	}
	resp, err := http.Get("http://" + m.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if b, _ := io.ReadAll(resp.Body); !strings.Contains(string(b), "aglx_healthy 0\n") {
		t.Errorf("/metrics with JetStream shut down lacks aglx_healthy 0")
	}
}

// TestNATSReadersCannotWrite: a client on --nats-listen without credentials
// may read the log but neither append to it, nor edit or delete streams,
// nor move the relay's cursor.
func TestNATSReadersCannotWrite(t *testing.T) {
	m := startNodeWith(t, t.TempDir(), func(c *Config) { c.Relay = true })
	js := jetStreamAt(t, m.NATSURL())
	// A denied request gets no answer, so each attempt ends at its deadline.
	try := func(op func(ctx context.Context) error) error {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		return op(ctx)
	}
	for name, op := range map[string]func(ctx context.Context) error{
		"append to": func(ctx context.Context) error {
			_, err := js.Publish(ctx, "aglx.ev.task.assign.agent~x.agent~y", []byte(`{}`))
			return err
		},
		"delete": func(ctx context.Context) error { return js.DeleteStream(ctx, events.StreamNameDefault) },
		"move the relay cursor of": func(ctx context.Context) error {
			_, err := js.Publish(ctx, "$KV."+bridge.RelayCursorBucket+".cursor", []byte("0"))
			return err
		},
		"create": func(ctx context.Context) error {
			_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "SHADOW", Subjects: []string{"shadow.>"}})
			return err
		},
		"update": func(ctx context.Context) error {
			_, err := js.UpdateStream(ctx, jetstream.StreamConfig{Name: events.StreamNameDefault, Subjects: []string{"x.>"}})
			return err
		},
	} {
		if err := try(op); err == nil {
			t.Fatalf("a reader could %s a stream", name)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := js.Stream(ctx, events.StreamNameDefault); err != nil {
		t.Fatalf("a reader cannot look up the stream: %v", err)
	}
}

// TestReadersCannotAnswerIntoTheLog: a reader's request may name any reply
// subject, and JetStream answers there. When readers shared the node's
// account, an answer sent to a subject inside the event stream was stored
// as an event (and made the node lose the acknowledged event promised that
// sequence). Readers now have an account of their own, their replies are
// mapped back into it, and the log holds only the node's events; reading,
// pulling and subscribing still work.
func TestReadersCannotAnswerIntoTheLog(t *testing.T) {
	m := startNodeWith(t, t.TempDir(), func(c *Config) { c.Relay = true })
	c := dial(t, m.TCPAddr())
	c.Write(referenceFiles(t)[3]) // task.result: seq 1
	c.Flush()
	readAck(t, c)
	rd, err := nats.Connect(m.NATSURL())
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	js, err := jetstream.New(rd)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := js.CreateConsumer(ctx, events.StreamNameDefault, jetstream.ConsumerConfig{AckPolicy: jetstream.AckNonePolicy})
	if err != nil {
		t.Fatalf("a reader cannot create a pull consumer: %v", err)
	}
	for _, r := range []struct{ subject, reply string }{
		{"$JS.API.INFO", "aglx.ev.task.result.agent~evil_local.agent~x_local"},
		{"$JS.API.STREAM.INFO." + events.StreamNameDefault, "$KV." + bridge.RelayCursorBucket + ".cursor"},
		{"$JS.API.CONSUMER.MSG.NEXT." + events.StreamNameDefault + "." + cons.CachedInfo().Name, "aglx.ev.task.result.agent~evil_local.agent~y_local"},
	} {
		if err := rd.PublishRequest(r.subject, r.reply, []byte(`{"batch":1}`)); err != nil {
			t.Fatal(err)
		}
	}
	rd.Flush()
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for range batch.Messages() {
		n++
	}
	if n != 1 {
		t.Fatalf("a reader's pull consumer fetched %d events, want the one", n)
	}
	c.Write(referenceFiles(t)[3]) // the next event must land at seq 2, right after the node's first
	c.Flush()
	if _, a := readAck(t, c); a.Seq != 2 {
		t.Fatalf("the next frame was acked at seq %d; want 2", a.Seq)
	}
	if err := m.log.WaitPublished(ctx, 2); err != nil {
		t.Fatal(err)
	}
	last, err := m.log.LastSeq(ctx)
	if err != nil || last != 2 || m.log.Healthy() != nil {
		t.Fatalf("the event stream ends at %d (%v), health %v; want the node's two events only", last, err, m.log.Healthy())
	}
}

// TestMetrics: /metrics counts what the node did, in Prometheus's format.
func TestMetrics(t *testing.T) {
	m := startNode(t, t.TempDir())
	c := dial(t, m.TCPAddr())
	// task.result with an ID, sent twice: the resend stores nothing, and
	// counted as appended made the counter disagree with the log.
	f := bytes.Replace(referenceFiles(t)[3], []byte("TYPE: task.result\n"), []byte("TYPE: task.result\nID: metrics-1\n"), 1)
	for range 2 {
		c.Write(f)
		c.Flush()
		readAck(t, c)
	}
	resp, err := http.Get("http://" + m.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, want := range []string{"aglx_frames_appended_total 1\n", "aglx_frames_duplicate_total 1\n", "aglx_wal_commits_total 1\n", "aglx_wal_committed_events_total 1\n", "# TYPE aglx_connections_open gauge\n",
		"# TYPE aglx_wal_commit_duration_seconds histogram\n", "aglx_wal_commit_duration_seconds_bucket{le=\"+Inf\"} 1\n", "aglx_wal_commit_duration_seconds_count 1\n", "aglx_ack_duration_seconds_count 2\n",
		"# TYPE aglx_ed25519_failed_batches_total counter\n", "aglx_healthy 1\n", "aglx_projections_ready 1\n",
		"# TYPE aglx_applied_seq gauge\n", "# TYPE aglx_fold_state_saved_seq gauge\n", "aglx_fold_state_save_failures_total 0\n", "# TYPE aglx_nats_disconnects_total counter\n", "# TYPE aglx_nats_slow_consumers_total counter\n", "# TYPE aglx_published_seq gauge\n", "# TYPE aglx_store_free_bytes gauge\naglx_store_free_bytes "} {
		if !strings.Contains(string(b), want) {
			t.Fatalf("/metrics lacks %q:\n%s", want, b)
		}
	}
}

// TestUDPRefusalsAnswerOverUDP: a datagram the node refuses gets an error
// datagram whose start line says UDP (it said TCP), no larger than the
// datagram it answers.
func TestUDPRefusalsAnswerOverUDP(t *testing.T) {
	m := startNode(t, t.TempDir())
	uc, err := net.Dial("udp", m.UDPAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	// Long enough for the answer to fit: a node answers a datagram only
	// with fewer bytes than it got, so that it cannot amplify a spoofed one.
	dg := []byte("AGLX/1.0 UDP\nFROM: agent://a.local\nTO: registry://localhost\nTYPE: task.cancel\n\n{\"task_id\": \"t\", \"reason\": \"" + strings.Repeat("r", 500) + "\"}\n")
	buf := make([]byte, 64<<10)
	for deadline := time.Now().Add(10 * time.Second); ; {
		if time.Now().After(deadline) {
			t.Fatal("no answer to a refused datagram")
		}
		uc.Write(dg)
		uc.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		n, err := uc.Read(buf)
		if err != nil {
			continue // a datagram may be lost; send again
		}
		if !bytes.HasPrefix(buf[:n], []byte("AGLX/1.0 UDP\n")) || !bytes.Contains(buf[:n], []byte("TYPE: error")) || n > len(dg) {
			t.Fatalf("answer %q, want an error datagram over UDP no larger than %d bytes", buf[:n], len(dg))
		}
		return
	}
}
