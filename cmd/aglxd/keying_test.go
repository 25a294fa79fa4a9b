package main

import (
	"fmt"
	"testing"

	"github.com/aglx/ledger/protocol"
)

// TestFrameBehindAKeyBindingWaitsForTheFold: an agent binds its first key
// and, on the same connection and before the answer, sends an unsigned
// task.result, which its new key now requires signed. The edge looked up
// the sender's key when it read the frame and found none, so it answered
// 202 ("queued for delivery") while the fold refused the message (401)
// and the relay withheld it. A frame read while a key request of its
// connection is unanswered now waits for the fold's verdict.
func TestFrameBehindAKeyBindingWaitsForTheFold(t *testing.T) {
	m := rfStartNode(t, t.TempDir(), "")
	node := m.cfg.Name
	sec := dialTLS(t, m)
	const kai = "agent://kai.local"
	k := rfNewKey(t, protocol.KeyEd25519)
	bind := rfSign(t, k, rfFrame(kai, node, "auth.request",
		fmt.Sprintf(`{"agent_id":"kai","public_key":%q,"timestamp":%q}`, rfPub(k), rfStamp(0))))
	result := rfFrame(kai, "agent://lea.local", "task.result", `{"task_id":"t-1","status":"done"}`)
	for _, f := range []*protocol.Frame{bind, result} {
		if err := sec.Write(protocol.Encode(f)); err != nil {
			t.Fatal(err)
		}
	}
	if err := sec.Flush(); err != nil {
		t.Fatal(err)
	}
	auth, _ := readReply(t, sec)
	rfWant(t, "auth.request", auth, "auth.response", 200)
	reply, _ := readReply(t, sec)
	rfWant(t, "the unsigned task.result behind it", reply, "error", 401)
}
