package main

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestRelayRepliesThatAreNotReceipts: an addressee that answers a relayed
// message on the relay's connection with something other than an ack or
// error (its task.result, say), or with a reply larger than the relay
// reads (relayReplyBodyMax), has it taken as the receipt, once, not as a
// failed delivery to try again. The first is counted as unexpected, so
// an operator can see that answers are being lost (helper-82: they were
// dropped without a word).
func TestRelayRepliesThatAreNotReceipts(t *testing.T) {
	cancel := "AGLX/1.0 TCP\nFROM: agent://src.local\nTO: %s\nTYPE: task.cancel\n\n{\"task_id\": \"n%d\", \"reason\": \"r\"}\n"
	tests := []struct {
		name       string
		reply      string
		unexpected int64
	}{
		{name: "a task.result", reply: "AGLX/1.0 TCP\nFROM: agent://w.local\nTO: agent://src.local\nTYPE: task.result\n\n{\"task_id\":\"n0\",\"status\":\"SUCCESS\"}\n", unexpected: 1},
		{name: "an ack far larger than the relay reads", reply: "AGLX/1.0 TCP\nFROM: agent://w.local\nTO: agent://src.local\nTYPE: ack\n\n{\"pad\":\"" + strings.Repeat("x", 1<<20) + "\"}\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := startNodeWith(t, t.TempDir(), func(c *Config) { c.Relay = true })
			addr, got := oneFrameAgent(t, []byte(tc.reply))
			registerAt(t, m, "agent://w.local", addr)
			relayOnce(t, m, got, fmt.Sprintf(cancel, "agent://w.local", 0))
			deadline := time.Now().Add(10 * time.Second)
			for m.relay.Counters().UnexpectedReplies != tc.unexpected && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			if got := m.relay.Counters().UnexpectedReplies; got != tc.unexpected {
				t.Fatalf("unexpected replies %d, want %d", got, tc.unexpected)
			}
		})
	}
}
