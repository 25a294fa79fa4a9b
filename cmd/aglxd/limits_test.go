package main

import (
	"context"
	"net"
	"testing"
	"time"
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
