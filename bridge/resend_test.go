package bridge

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/projections"
	"github.com/aglx/ledger/protocol"
)

// TestResendGetsTheFirstReply: PROTOCOL.md tells a client whose reply was
// lost to resend with the same ID. For a TYPE the projections answer, the
// resend got a plain ack, 200, while the first copy had been refused: an
// agent whose transfer the ledger refused (402) read that it had paid. A
// resend now gets the first reply.
func TestResendGetsTheFirstReply(t *testing.T) {
	l, quiet := openBenchLog(t)
	const node = "registry://node.local"
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ob := projections.NewOutbox()
	reg := projections.NewRegistry(projections.RegistryConfig{NodeURI: node, NodeKey: key, Outbox: ob})
	credits := projections.NewCredits(node, reg, ob)
	runner := projections.NewRunner(l, quiet, reg, credits)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	runFor(t, ctx, cancel, runner)
	srv := New(l, Config{Name: node, Answerer: projections.NewAnswers(runner, ob, projections.AnswersCredits, projections.AnswersRegistry)}, quiet)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.ServeTCP(ln, events.TransportTCP)
	defer srv.Shutdown(ctx)
	c, err := Dial(ctx, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Conn().SetDeadline(time.Now().Add(30 * time.Second))
	frame := []byte("AGLX/1.0 TCP\nFROM: agent://payer.local\nTO: " + node + "\nTYPE: credit.transfer\nID: pay-1\n\n" +
		`{"amount": "3", "currency": "AGLX", "reason": "r", "timestamp": "2025-10-29T19:02:40Z", "transaction_id": "tx-1"}` + "\n")
	send := func() *protocol.Frame {
		c.Write(frame)
		c.Flush()
		f, err := c.ReadReply()
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	first := send()
	if first.Type() != "error" || first.Value(protocol.HeaderStatus) != "402 Payment Required" {
		t.Fatalf("first send: %s %s %s, want the ledger's 402", first.Type(), first.Value(protocol.HeaderStatus), first.Body)
	}
	second := send()
	if second.Type() != first.Type() || second.Value(protocol.HeaderStatus) != first.Value(protocol.HeaderStatus) || string(second.Body) != string(first.Body) {
		t.Fatalf("the resend got %s %s %s; want the first reply, %s %s %s", second.Type(), second.Value(protocol.HeaderStatus), second.Body,
			first.Type(), first.Value(protocol.HeaderStatus), first.Body)
	}
}

// lineCounter is a slog handler that counts the lines it is given.
type lineCounter struct{ n *atomic.Int64 }

func (h lineCounter) Enabled(context.Context, slog.Level) bool  { return true }
func (h lineCounter) Handle(context.Context, slog.Record) error { h.n.Add(1); return nil }
func (h lineCounter) WithAttrs([]slog.Attr) slog.Handler        { return h }
func (h lineCounter) WithGroup(string) slog.Handler             { return h }

// TestUDPConflictsAreCountedAndLoggedAtTheEdgesRate: an agent.announce
// that reuses an ID with another body is refused (409) when it is
// appended. Over UDP that refusal was logged once per datagram, past the
// edge's log rate, and counted nowhere: a sender in a loop, with a forged
// source address even, could fill the disk unseen (helper-52).
func TestUDPConflictsAreCountedAndLoggedAtTheEdgesRate(t *testing.T) {
	l, _ := openBenchLog(t)
	var lines atomic.Int64
	srv := New(l, Config{}, slog.New(lineCounter{&lines}))
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.ServeUDP(pc)
	defer srv.Shutdown(context.Background())
	c, err := net.Dial("udp", pc.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	announce := func(i int) []byte {
		return fmt.Appendf(nil, "AGLX/1.0 UDP\nFROM: agent://n.local\nTYPE: agent.announce\nID: same\n\n{\"agent_name\":\"N%d\"}\n", i)
	}
	deadline := time.Now().Add(20 * time.Second)
	for l.Published() == 0 { // datagrams may be lost; send until the first is stored
		if time.Now().After(deadline) {
			t.Fatal("no announce was stored")
		}
		c.Write(announce(0))
		time.Sleep(10 * time.Millisecond)
	}
	const sent = 500
	start := time.Now()
	for i := 1; i <= sent; i++ {
		c.Write(announce(i))
	}
	// Refused as conflicts, or dropped unread over the rate bound
	// (udp_limit.go); the kernel may drop some.
	for c := srv.Counters(); c.UDPRefused+c.UDPLimited < sent/2; c = srv.Counters() {
		if time.Now().After(deadline) {
			t.Fatalf("counters %+v after %d conflicting announces; want them counted as refused or limited", srv.Counters(), sent)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := srv.Counters(); got.FramesRefused != got.UDPRefused {
		t.Errorf("frames refused %d, datagrams refused %d: every refused datagram is a refused frame", got.FramesRefused, got.UDPRefused)
	}
	seconds := int64(time.Since(start)/time.Second) + 1
	if n := lines.Load(); n > 2*LogLinesPerSecondMax*seconds {
		t.Errorf("%d log lines in %d s for %d conflicting announces; want at most %d a second", n, seconds, sent, LogLinesPerSecondMax)
	}
}
