package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aglx/ledger/bridge"
	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/protocol"
	"github.com/nats-io/nats-server/v2/server"
)

// healthz returns /healthz's status code and body.
func healthz(t *testing.T, m *Main) (int, string) {
	t.Helper()
	code, b := rfGet(t, m, "/healthz", 0)
	return code, strings.TrimSpace(string(b))
}

// answerOf reads a reply that may be an ack or an error.
func answerOf(t *testing.T, c *bridge.Client) (*protocol.Frame, ackBody) {
	t.Helper()
	f, err := c.ReadReply()
	if err != nil {
		t.Fatalf("reading reply: %v", err)
	}
	if f.Type() == "ack" {
		return f, eventOf(t, f)
	}
	return f, ackBody{}
}

// resendUntilAcked sends frame i on c until it is acked, as an agent told
// 503 would, and fails if that takes longer than wait.
func resendUntilAcked(t *testing.T, m *Main, c *bridge.Client, i int, wait time.Duration) ackBody {
	t.Helper()
	for deadline := time.Now().Add(wait); ; time.Sleep(100 * time.Millisecond) {
		c.Write(restartFrame(i))
		c.Flush()
		f, a := answerOf(t, c)
		if f.Type() == "ack" {
			return a
		}
		if !strings.HasPrefix(f.Value("STATUS"), "503 ") {
			t.Fatalf("frame r-%d: %s %s %s", i, f.Type(), f.Value("STATUS"), f.Body)
		}
		if time.Now().After(deadline) {
			code, body := healthz(t, m)
			t.Fatalf("frame r-%d still refused after %s: %s; /healthz %d %s", i, wait, f.Body, code, body)
		}
	}
}

// TestNATSOutageLongerThanTheAckTimeout: the operator's NATS server is
// away for longer than the node's ack timeout while a frame is waiting.
// The frame gets 503; /healthz says why; and once the server is back, the
// node takes frames again by itself, without a restart and without any
// frame arriving to prompt it. The frame refused during the outage, sent
// again, is acked once.
func TestNATSOutageLongerThanTheAckTimeout(t *testing.T) {
	storeDir := t.TempDir()
	ns, err := startNATSAt(t, storeDir, server.RANDOM_PORT)
	if err != nil {
		t.Fatal(err)
	}
	port := ns.Addr().(*net.TCPAddr).Port
	current := ns
	t.Cleanup(func() { current.Shutdown(); current.WaitForShutdown() })
	const ackTimeout = time.Second
	m := startNodeWith(t, t.TempDir(), func(c *Config) { c.NATSURL = ns.ClientURL(); c.ackTimeout = ackTimeout })
	resendUntilAcked(t, m, dial(t, m.TCPAddr()), 0, 10*time.Second)

	current.Shutdown()
	current.WaitForShutdown()
	c := dial(t, m.TCPAddr())
	c.Write(restartFrame(1))
	c.Flush()
	if f, _ := answerOf(t, c); !strings.HasPrefix(f.Value("STATUS"), "503 ") {
		t.Fatalf("a frame while NATS is away: %s %s %s", f.Type(), f.Value("STATUS"), f.Body)
	}
	if code, body := healthz(t, m); code != http.StatusServiceUnavailable {
		t.Fatalf("/healthz while NATS is away: %d %s", code, body)
	}
	// The outage lasts a few ack timeouts: every attempt the node makes
	// to learn the write-ahead stream's end meanwhile fails.
	time.Sleep(3 * ackTimeout)
	current = restartNATSAt(t, storeDir, port)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if code, _ := healthz(t, m); code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			code, body := healthz(t, m)
			t.Fatalf("/healthz 30 s after NATS came back: %d %s", code, body)
		}
	}
	a := resendUntilAcked(t, m, dial(t, m.TCPAddr()), 1, 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.log.WaitPublished(ctx, a.Seq); err != nil {
		t.Fatal(err)
	}
	if stored := storedByID(t, current.ClientURL()); len(stored) != 2 || stored["r-1"].Seq != a.Seq {
		t.Fatalf("stored %d events, r-1 at %v; want 2, r-1 at %d", len(stored), stored["r-1"], a.Seq)
	}
}

// TestEventStreamRefusingEvents: the event stream stops taking events (an
// operator's byte limit is reached) under a pipelined load. The node then
// acknowledges nothing new, because the write-ahead stream must never get
// further ahead of the event stream than it can hold: new frames get 503
// at once, frames already queued get 503 within moments, /healthz says
// why, and no frame waits unanswered. Once the limit is lifted the node
// takes frames again, and every acked frame is stored once.
func TestEventStreamRefusingEvents(t *testing.T) {
	ns := startExternalNATS(t)
	m := startNodeWith(t, t.TempDir(), func(c *Config) { c.NATSURL = ns.ClientURL() })
	js := jetStreamAt(t, ns.ClientURL())
	ctx := context.Background()
	first := resendUntilAcked(t, m, dial(t, m.TCPAddr()), 0, 10*time.Second)
	if err := m.log.WaitPublished(ctx, first.Seq); err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, events.StreamNameDefault)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cfg := info.Config
	cfg.MaxBytes = int64(info.State.Bytes) + 20_000 // room for a few dozen events
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}

	const total = 3000
	c := dial(t, m.TCPAddr())
	go func() {
		for i := 1; i <= total; i++ {
			if c.Write(restartFrame(i)) != nil {
				return
			}
			if i%64 == 0 && c.Flush() != nil {
				return
			}
		}
		c.Flush()
	}()
	acks := map[string]ackBody{"r-0": first}
	refused := 0
	for range total { // dial's deadline fails the test if a reply never comes
		f, a := answerOf(t, c)
		switch {
		case f.Type() == "ack":
			acks[f.Value("IN-REPLY-TO")] = a
		case strings.HasPrefix(f.Value("STATUS"), "503 "):
			refused++
		default:
			t.Fatalf("reply: %s %s %s", f.Type(), f.Value("STATUS"), f.Body)
		}
	}
	if refused == 0 {
		t.Fatalf("all %d frames were acked while the event stream took only a few dozen", total)
	}
	if code, body := healthz(t, m); code != http.StatusServiceUnavailable || !strings.Contains(body, "event stream") {
		t.Fatalf("/healthz while the event stream refuses events: %d %s", code, body)
	}
	t.Logf("%d acked, %d refused while the event stream was full", len(acks), refused)

	cfg.MaxBytes = -1
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	a := resendUntilAcked(t, m, dial(t, m.TCPAddr()), total+1, 30*time.Second)
	acks[fmt.Sprintf("r-%d", total+1)] = a
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := m.log.WaitPublished(wctx, a.Seq); err != nil {
		t.Fatal(err)
	}
	checkStoredOnce(t, ns.ClientURL(), acks)
}

// TestNATSServerAwayIsSaidAtOnce: once the operator's NATS server has
// been away longer than a reconnection takes (events.ConnDownGrace),
// /healthz says so at once, naming the lost connection, aglx_healthy is
// 0, and an append is refused with 503 at once instead of waiting out the
// ack timeout (30 s by default, 45 s here, longer than the test waits
// for an answer); and once it is back
// the node takes frames again (helper-104).
func TestNATSServerAwayIsSaidAtOnce(t *testing.T) {
	storeDir := t.TempDir()
	ns, err := startNATSAt(t, storeDir, server.RANDOM_PORT)
	if err != nil {
		t.Fatal(err)
	}
	port := ns.Addr().(*net.TCPAddr).Port
	current := ns
	t.Cleanup(func() { current.Shutdown(); current.WaitForShutdown() })
	m := startNodeWith(t, t.TempDir(), func(c *Config) { c.NATSURL = ns.ClientURL(); c.ackTimeout = 45 * time.Second })
	c := dial(t, m.TCPAddr())
	send := func(i int) *protocol.Frame {
		t.Helper()
		c.Conn().SetDeadline(time.Now().Add(15 * time.Second))
		c.Write(restartFrame(i))
		c.Flush()
		f, err := c.ReadReply()
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		return f
	}
	if f := send(0); f.Type() != "ack" {
		t.Fatalf("before: %s %s %s", f.Type(), f.Value("STATUS"), f.Body)
	}
	// On an operator's NATS the node does not know what an ack promises
	// about the disk: that server's sync_interval decides (helper-107).
	var node struct{ Fsync string }
	if err := json.Unmarshal(rfGetOK(t, m, "/v1/node", 0), &node); err != nil || node.Fsync != "nats-server" {
		t.Fatalf("/v1/node's fsync on an operator's NATS = %q (%v); want nats-server", node.Fsync, err)
	}
	ns.Shutdown()
	ns.WaitForShutdown()

	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		code, body := healthz(t, m)
		if code == http.StatusServiceUnavailable && strings.Contains(body, "NATS connection") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz with the NATS server away: %d %s", code, body)
		}
	}
	if metrics := lfGetMetrics(t, m); !strings.Contains(string(metrics), "aglx_healthy 0\n") {
		t.Fatalf("aglx_healthy is not 0 with the NATS server away:\n%s", metrics)
	}
	f := send(1)
	if f.Type() != "error" || !strings.HasPrefix(f.Value("STATUS"), "503 ") || !strings.Contains(string(f.Body), "has been lost since") {
		t.Fatalf("a frame with the NATS server away: %s %s %s", f.Type(), f.Value("STATUS"), f.Body)
	}

	current = restartNATSAt(t, storeDir, port)
	c.Conn().SetDeadline(time.Now().Add(90 * time.Second))
	resendUntilAcked(t, m, c, 1, 60*time.Second)
	if code, body := healthz(t, m); code != http.StatusOK {
		t.Fatalf("/healthz with the NATS server back: %d %s", code, body)
	}
}

// TestResourcesAreMeasured: /metrics gives what the embedded store's
// streams hold against JetStream's limit on them, the limit that stopped
// a node with a quarter of its disk free and no warning; when the TLS
// certificate ends; and the process's memory (helper-106).
func TestResourcesAreMeasured(t *testing.T) {
	m := startNode(t, t.TempDir())
	resendUntilAcked(t, m, dial(t, m.TCPAddr()), 0, 10*time.Second)
	metrics := string(lfGetMetrics(t, m))
	if i := strings.Index(metrics, "\naglx_tls_cert_not_after_timestamp_seconds "); i < 0 {
		t.Fatal("/metrics lacks aglx_tls_cert_not_after_timestamp_seconds")
	} else {
		var v int64
		fmt.Sscan(metrics[i+len("\naglx_tls_cert_not_after_timestamp_seconds "):], &v)
		if end := m.tlsCerts.NotAfter().Unix(); v != end || v < time.Now().Unix() {
			t.Fatalf("aglx_tls_cert_not_after_timestamp_seconds = %d; want the certificate's end, %d", v, end)
		}
	}
	for _, name := range []string{"aglx_store_used_bytes", "aglx_store_limit_bytes", "aglx_heap_objects_bytes", "aglx_memory_total_bytes"} {
		i := strings.Index(metrics, "\n"+name+" ")
		if i < 0 {
			t.Fatalf("/metrics lacks %s", name)
		}
		var v float64
		if _, err := fmt.Sscan(metrics[i+len(name)+2:], &v); err != nil || v <= 0 {
			t.Fatalf("%s = %v (%v); want a positive figure", name, v, err)
		}
	}
}

// TestRefusalsAreCountedByStatus: /metrics counts refusals by their
// status, so that an operator can tell agents sending bad signatures
// (401) from a store refusing writes (503) (helper-106). The log names
// every refusal, the folds' too (a 402): those were counted but not
// logged, and why a transfer was refused could not be looked up
// (helper-109).
func TestRefusalsAreCountedByStatus(t *testing.T) {
	var logs lockedBuffer
	m := startNodeLogging(t, t.TempDir(), &logs)
	c := dial(t, m.TCPAddr())
	notUTF8 := "AGLX/1.0 TCP\nFROM: agent://a.local\nTO: registry://localhost\nTYPE: registry.update\n\n{\"agent_name\": \"caf\xe9\"}\n"
	noFunds := "AGLX/1.0 TCP\nFROM: agent://b.local\nTO: agent://c.local\nTYPE: credit.transfer\n\n{\"amount\": 5, \"currency\": \"AGLX\", \"transaction_id\": \"t1\", \"timestamp\": \"" + lfNow() + "\"}\n"
	for _, f := range []string{notUTF8, notUTF8, noFunds} { // 400, 400, 402
		c.Write([]byte(f))
		c.Flush()
		answerOf(t, c)
	}
	metrics := string(lfGetMetrics(t, m))
	for _, want := range []string{
		"\naglx_frames_refused_by_status_total{status=\"400\"} 2\n",
		"\naglx_frames_refused_by_status_total{status=\"402\"} 1\n",
		"\naglx_frames_refused_by_status_total{status=\"other\"} 0\n",
		"\naglx_frames_refused_total 3\n",
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", strings.TrimSpace(want))
		}
	}
	for _, want := range []string{
		`msg="frame refused" peer=127.0.0.1:`, `from=agent://a.local type=registry.update`,
		`msg="frame refused by the projections" peer=127.0.0.1:`, `from=agent://b.local type=credit.transfer id=`,
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, logs.String())
		}
	}
	if !strings.Contains(logs.String(), `status=402 reason="\"agent://b.local\" has 0 credits available`) {
		t.Errorf("the folds' refusal is logged without its status and reason:\n%s", logs.String())
	}
}
