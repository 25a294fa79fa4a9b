package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
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
	// An agent without a key that carries a placeholder for a signature:
	// the fold refuses it as such, and the reply must say so, not 202
	// for a message the relay withholds (helper-58).
	c.Write([]byte("AGLX/1.0 TCP\nFROM: agent://nokey.local\nTO: agent://owner.local\nTYPE: task.result\n\n" +
		"{\"task_id\": \"t1\", \"status\": \"SUCCESS\", \"signature\": \"rsa-sha256:0f3c9a...\"}\n"))
	c.Flush()
	if f, _ := readReply(t, c); f.Value(protocol.HeaderStatus) != "401 Unauthorized" {
		t.Fatalf("a task.result with a placeholder signature from an agent without a key: %s %s; want 401", f.Value(protocol.HeaderStatus), f.Body)
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

// TestRelayWritesNoLineOfTheSendersChoosing: --relay-networks bounds the
// addresses the relay connects to, not what listens there. A body laid
// out over lines put a line of the sender's choosing ("FLUSHALL") before
// whatever local service an agent registered as its address (helper-56).
// The relay writes a body on one line now: every line it writes starts
// as AGLX's do.
func TestRelayWritesNoLineOfTheSendersChoosing(t *testing.T) {
	m := startNodeWith(t, t.TempDir(), func(c *Config) { c.Relay = true })
	ln, err := net.Listen("tcp", "127.0.0.1:0") // stands in for a line-based local service
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// The service reads the frame's lines: its head, and its body by the
	// CONTENT-LENGTH the relay writes.
	lines := make(chan string, 64)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		r := bufio.NewReader(c)
		n := 0
		for {
			l, err := r.ReadString('\n')
			if err != nil {
				return
			}
			l = strings.TrimSuffix(l, "\n")
			lines <- l
			if v, ok := strings.CutPrefix(l, "CONTENT-LENGTH: "); ok {
				n, _ = strconv.Atoi(v)
			}
			if l == "" {
				break
			}
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(r, body); err != nil {
			return
		}
		for _, l := range strings.Split(string(body), "\n") {
			lines <- l
		}
		close(lines)
	}()
	registerAt(t, m, "agent://svc.local", ln.Addr().String())
	body := "{\"task_id\": \"t1\", \"reason\":\n\"FLUSHALL\"\n}"
	c := dial(t, m.TCPAddr())
	c.Write(fmt.Appendf(nil, "AGLX/1.0 TCP\nFROM: agent://src.local\nTO: agent://svc.local\nTYPE: task.cancel\nCONTENT-LENGTH: %d\n\n%s", len(body), body))
	c.Flush()
	readReply(t, c)
	deadline := time.After(20 * time.Second)
	var got []string
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				for i, l := range got {
					if i > 0 && l != "" && !strings.HasPrefix(l, "{") && !strings.Contains(strings.SplitN(l, " ", 2)[0], ":") {
						t.Fatalf("the relay wrote the line %q, which does not start as an AGLX line does:\n%s", l, strings.Join(got, "\n"))
					}
				}
				return
			}
			got = append(got, l)
		case <-deadline:
			t.Fatalf("the relayed frame never ended with its body; lines so far:\n%s", strings.Join(got, "\n"))
		}
	}
}
