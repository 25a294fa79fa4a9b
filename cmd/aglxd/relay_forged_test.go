package main

import (
	"strings"
	"testing"
	"time"

	"github.com/aglx/ledger/protocol"
)

// TestRelayWithholdsForgedTaskEnds: worker.local has a key, so its
// task.result, task.reject and task.cancel must be signed. One sent in its
// name without a signature ends no hold, but it was answered 202 and the
// relay delivered it to the owner with the node's RELAYED-BY (helper-56).
// It is answered 401 now, and withheld; a genuine message sent after it
// reaches the owner first.
func TestRelayWithholdsForgedTaskEnds(t *testing.T) {
	m := startNodeWith(t, t.TempDir(), func(c *Config) { c.Relay = true })
	s := lfNewSession(t, m)
	worker := lfNewParty(t, "agent://worker.local", protocol.KeyEd25519)
	s.bind(t, worker)
	owner := listenAgent(t, "127.0.0.1:0")
	registerAt(t, m, "agent://owner.local", owner.ln.Addr().String())

	c := dial(t, m.TCPAddr())
	for _, typ := range []string{protocol.TypeTaskResult, protocol.TypeTaskReject, protocol.TypeTaskCancel} {
		c.Write([]byte("AGLX/1.0 TCP\nFROM: agent://worker.local\nTO: agent://owner.local\nTYPE: " + typ +
			"\n\n{\"task_id\": \"t1\", \"status\": \"SUCCESS\", \"reason\": \"r\", \"result\": {\"forged\": true}}\n"))
		c.Flush()
		if f, _ := readReply(t, c); f.Value(protocol.HeaderStatus) != "401 Unauthorized" {
			t.Fatalf("a %s in a keyed agent's name without a signature: %s %s; want 401", typ, f.Value(protocol.HeaderStatus), f.Body)
		}
	}
	// A genuine message to the same owner, from an agent without a key.
	c.Write([]byte("AGLX/1.0 TCP\nFROM: agent://other.local\nTO: agent://owner.local\nTYPE: task.cancel\n\n{\"task_id\": \"t2\", \"reason\": \"genuine\"}\n"))
	c.Flush()
	readReply(t, c)
	got := owner.next(t, 20*time.Second)
	if !strings.Contains(string(got.Body), "genuine") {
		t.Fatalf("the owner was handed %s from %s first; want the genuine message, the forgeries withheld", got.Type(), got.From())
	}
}
