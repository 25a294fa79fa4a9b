package main

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/projections"
	"github.com/aglx/ledger/protocol"
)

// Tests of the relay's bounds and of what counts as a delivery, each from
// a review's finding.

// waitRelayCursor waits until the relay has settled everything up to the
// log's last event.
func waitRelayCursor(t *testing.T, m *Main) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if last := m.log.Published(); last > 0 && uint64(m.relay.Counters().Cursor) >= last {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the relay did not catch up: %+v, published %d", m.relay.Counters(), m.log.Published())
		}
	}
}

// TestRelayOneHopWithAnEmptyRelayedBy: an empty RELAYED-BY counted as
// none, and the node appended its own after it; a message sent to an
// address that leads back to the node went round for ever, stored again
// on every pass.
func TestRelayOneHopWithAnEmptyRelayedBy(t *testing.T) {
	m := startNodeWith(t, t.TempDir(), func(c *Config) { c.Relay = true })
	registerAt(t, m, "agent://loop.local", m.TCPAddr())
	c := dial(t, m.TCPAddr())
	c.Write([]byte("AGLX/1.0 TCP\nFROM: agent://src.local\nTO: agent://loop.local\nTYPE: task.cancel\nRELAYED-BY:\n\n{\"task_id\": \"t1\", \"reason\": \"r\"}\n"))
	c.Flush()
	readReply(t, c)
	waitRelayCursor(t, m)
	if got := m.relay.Counters(); got.Delivered != 0 {
		t.Fatalf("a message that arrived with RELAYED-BY was relayed %d times: %+v", got.Delivered, got)
	}
	// Without the header it is relayed once; the copy that comes back
	// carries one RELAYED-BY, the node's, and stops there.
	c.Write([]byte("AGLX/1.0 TCP\nFROM: agent://src.local\nTO: agent://loop.local\nTYPE: task.cancel\n\n{\"task_id\": \"t2\", \"reason\": \"r\"}\n"))
	c.Flush()
	readReply(t, c)
	for deadline := time.Now().Add(20 * time.Second); m.relay.Counters().Delivered == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the message was not relayed")
		}
	}
	waitRelayCursor(t, m)
	if got := m.relay.Counters(); got.Delivered != 1 {
		t.Fatalf("one message was relayed %d times", got.Delivered)
	}
}

// ackingAgent answers every frame with an ack and counts the connections
// open to it.
func ackingAgent(t *testing.T, open *atomic.Int64) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			open.Add(1)
			go func() {
				defer open.Add(-1)
				defer c.Close()
				dec := protocol.NewDecoder(c, protocol.DecoderOptions{})
				for {
					f, err := dec.Decode()
					if err != nil {
						return
					}
					ack := &protocol.Frame{Headers: []protocol.Header{{Name: "FROM", Value: f.To()}, {Name: "TO", Value: f.From()}, {Name: "TYPE", Value: "ack"}}, Body: []byte(`{}`)}
					if _, err := c.Write(protocol.Encode(ack)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// TestRelayBoundsItsConnections: a connection outlived its lane, closed
// only when a later delivery to its address failed, so every address ever
// delivered to kept a socket. At most relayLanesMax (64) are kept.
func TestRelayBoundsItsConnections(t *testing.T) {
	m := startNodeWith(t, t.TempDir(), func(c *Config) { c.Relay = true })
	const n = 100
	var open atomic.Int64
	c := dial(t, m.TCPAddr())
	for i := range n {
		host, port, _ := net.SplitHostPort(ackingAgent(t, &open))
		p, _ := strconv.Atoi(port)
		c.Write(fmt.Appendf(nil, "AGLX/1.0 TCP\nFROM: agent://a%d.local\nTO: %s\nTYPE: registry.update\n\n{\"agent_name\": \"A\", \"address\": %q, \"port\": %d, \"ttl\": 3600}\n", i, m.cfg.Name, host, p))
	}
	for i := range n {
		c.Write(fmt.Appendf(nil, "AGLX/1.0 TCP\nFROM: agent://src.local\nTO: agent://a%d.local\nTYPE: task.cancel\n\n{\"task_id\": \"t%d\", \"reason\": \"r\"}\n", i, i))
	}
	c.Flush()
	for range 2 * n {
		readReply(t, c)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got := m.relay.Counters()
		if got.Delivered == n && open.Load() <= 64 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%+v; %d connections open to agents, want at most 64", got, open.Load())
		}
	}
}

// TestRelayDeadAddressesLeaveRoom: four dead addresses with 256 messages
// each filled the relay's whole bound of pending messages, and nothing for
// a live agent was delivered until their back-offs ran out, half an hour
// later.
func TestRelayDeadAddressesLeaveRoom(t *testing.T) {
	m := startNodeWith(t, t.TempDir(), func(c *Config) { c.Relay = true })
	// The sink first, so that no dead address is a port it is handed
	// next (TestRelayBoundsRetriesPerAddress).
	sink := listenAgent(t, "127.0.0.1:0")
	for d := range 4 {
		registerAt(t, m, fmt.Sprintf("agent://dead%d.local", d), freeAddr(t))
	}
	registerAt(t, m, "agent://sink.local", sink.ln.Addr().String())
	c := dial(t, m.TCPAddr())
	n := 0
	for d := range 4 {
		for i := range 256 {
			c.Write(fmt.Appendf(nil, "AGLX/1.0 TCP\nFROM: agent://src.local\nTO: agent://dead%d.local\nTYPE: task.cancel\n\n{\"task_id\": \"d%d-%d\", \"reason\": \"r\"}\n", d, d, i))
			n++
		}
	}
	c.Write([]byte("AGLX/1.0 TCP\nFROM: agent://src.local\nTO: agent://sink.local\nTYPE: task.cancel\n\n{\"task_id\": \"live\", \"reason\": \"r\"}\n"))
	c.Flush()
	for range n + 1 {
		readReply(t, c)
	}
	select {
	case <-sink.frames:
	case <-time.After(20 * time.Second):
		t.Fatalf("the live agent's message was not delivered: dead addresses hold the relay (%+v)", m.relay.Counters())
	}
}

// TestRelayRetriesARefusal: an addressee's "429 try again later" (or a
// 503) was taken as its receipt, and the message was never sent again.
func TestRelayRetriesARefusal(t *testing.T) {
	b := startNodeWith(t, t.TempDir(), func(c *Config) { c.Name = "registry://b.local"; c.ConnectionsMax = 1 })
	hold := dial(t, b.TCPAddr()) // takes B's only slot
	a := startNodeWith(t, t.TempDir(), func(c *Config) { c.Relay = true })
	registerAt(t, a, "agent://atb.local", b.TCPAddr())
	c := dial(t, a.TCPAddr())
	c.Write([]byte("AGLX/1.0 TCP\nFROM: agent://src.local\nTO: agent://atb.local\nTYPE: task.cancel\n\n{\"task_id\": \"late\", \"reason\": \"r\"}\n"))
	c.Flush()
	readReply(t, c)
	for deadline := time.Now().Add(20 * time.Second); a.relay.Counters().Failed == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the refused attempt is not counted as failed: %+v", a.relay.Counters())
		}
	}
	hold.Close() // B has room again: the retry gets through
	l := openLogAt(t, b.NATSURL())
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		n := 0
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := l.Read(ctx, events.ReadOptions{Subjects: []string{"aglx.ev.task.>"}}, func(*events.Envelope) error { n++; return nil })
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the message never reached B: %+v", a.relay.Counters())
		}
	}
}

// TestFederationPushEndsAtShutdown: a peer that accepts and never answers
// held the node's Close for the push's whole timeout (10 s).
func TestFederationPushEndsAtShutdown(t *testing.T) {
	peer, got := tarpit(t)
	m := startNodeWith(t, t.TempDir(), func(c *Config) {
		c.Name = "registry://main.local"
		c.SyncTo, c.SyncInterval = []string{"registry://backup.local@" + peer + "?plain"}, 100*time.Millisecond
	})
	register(t, m, "agent://node42.local")
	select {
	case <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("the push never reached the peer")
	}
	done := make(chan struct{})
	go func() { m.Close(context.Background()); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close waited for the push to a peer that never answers")
	}
}

// TestRelaySkipsWhatTheNodeRefused: a credit.transfer the ledger refused
// (no funds) was still delivered to its addressee, RELAYED-BY the node,
// which could read it as a payment. What the node refused stays in the
// log, undelivered.
func TestRelaySkipsWhatTheNodeRefused(t *testing.T) {
	m := startNodeWith(t, t.TempDir(), func(c *Config) { c.Relay = true })
	sink := listenAgent(t, "127.0.0.1:0")
	registerAt(t, m, "agent://sink.local", sink.ln.Addr().String())
	c := dial(t, m.TCPAddr())
	c.Write([]byte("AGLX/1.0 TCP\nFROM: agent://broke.local\nTO: agent://sink.local\nTYPE: credit.transfer\n\n" +
		`{"amount": "5", "currency": "AGLX", "reason": "r", "timestamp": "2025-10-29T19:02:40Z", "transaction_id": "tx-broke"}` + "\n"))
	c.Flush()
	if f, _ := readReply(t, c); f.Type() != "error" {
		t.Fatalf("the transfer without funds: %s %s, want the ledger's refusal", f.Type(), f.Body)
	}
	c.Write([]byte("AGLX/1.0 TCP\nFROM: agent://broke.local\nTO: agent://sink.local\nTYPE: task.cancel\n\n{\"task_id\": \"t\", \"reason\": \"r\"}\n"))
	c.Flush()
	readReply(t, c)
	select {
	case f := <-sink.frames:
		if f.Type() != protocol.TypeTaskCancel {
			t.Fatalf("the addressee got %s %s first; the refused transfer must not reach it", f.Type(), f.Body)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("nothing was delivered: %+v", m.relay.Counters())
	}
}

// TestRelayHoldsWhatItCannotVouchFor: a message whose verdict the node no
// longer knows (the relay resumed far behind the log's end, past
// projections.RefusalsMax refusals) is not delivered: it may have been a
// refused transfer. Until 2026-11-30 "not known" was taken for "not
// refused". The outbox is made to forget here by a flood of refusals of
// events far ahead, as the relay cannot be put a million refusals behind
// in a test.
func TestRelayHoldsWhatItCannotVouchFor(t *testing.T) {
	m := startNodeWith(t, t.TempDir(), func(c *Config) { c.Relay = true })
	sink := listenAgent(t, "127.0.0.1:0")
	registerAt(t, m, "agent://sink.local", sink.ln.Addr().String())
	for i := range uint64(projections.RefusalsMax + 1) {
		m.outbox.Put(1<<40+i, projections.Reply{Type: protocol.TypeError})
	}
	before := m.relay.Counters().Undeliverable
	c := dial(t, m.TCPAddr())
	c.Write([]byte("AGLX/1.0 TCP\nFROM: agent://a.local\nTO: agent://sink.local\nTYPE: task.cancel\n\n{\"task_id\": \"t\", \"reason\": \"r\"}\n"))
	c.Flush()
	readReply(t, c)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if rc := m.relay.Counters(); rc.Delivered > 0 {
			t.Fatalf("delivered though its verdict is unknown: %+v", rc)
		} else if rc.Undeliverable > before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the relay never settled the message: %+v", m.relay.Counters())
		}
	}
	select {
	case f := <-sink.frames:
		t.Fatalf("delivered %s %s though its verdict is unknown", f.Type(), f.Body)
	default:
	}
}
