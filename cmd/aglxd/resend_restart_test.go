package main

import (
	"context"
	"testing"

	"github.com/aglx/ledger/protocol"
)

// TestResendAfterARestartWeighsEveryHeader: the duplicate index rebuilt
// from the log at start knows every header of the first message, as
// stored: the same frame sent again after a restart (its header names in
// other letters) is a duplicate, and one that names another request in
// IN-REPLY-TO under the same ID gets 409 (helper-86).
func TestResendAfterARestartWeighsEveryHeader(t *testing.T) {
	dir := t.TempDir()
	const head = "AGLX/1.0 TCP\nFROM: agent://a.local\nTO: agent://b.local\nTYPE: task.result\nID: a-7\n"
	frame := func(headers string) []byte {
		return []byte(head + headers + "\n{\"task_id\":\"t\",\"status\":\"SUCCESS\"}\n")
	}

	m := startNode(t, dir)
	c := dial(t, m.TCPAddr())
	c.Write(frame("IN-REPLY-TO: req-1\nX-Trace: t1\n"))
	c.Flush()
	_, first := readAck(t, c)
	m.Close(context.Background())

	m = startNode(t, dir)
	c = dial(t, m.TCPAddr())
	c.Write(frame("x-trace: t1\nin-reply-to: req-1\n"))
	c.Flush()
	if _, again := readAck(t, c); !again.Duplicate || again.Seq != first.Seq {
		t.Fatalf("the same message after a restart = %+v; want a duplicate of %+v", again, first)
	}
	c.Write(frame("IN-REPLY-TO: req-2\nX-Trace: t1\n"))
	c.Flush()
	if f, err := c.ReadReply(); err != nil || f.Value(protocol.HeaderStatus) != "409 Conflict" {
		t.Fatalf("an answer to another request under the ID after a restart = %v %v; want 409", f, err)
	}
}
