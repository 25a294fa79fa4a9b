package bridge

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"net"
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
	go runner.Run(ctx)
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
