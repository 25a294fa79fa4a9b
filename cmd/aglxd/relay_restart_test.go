package main

import (
	"context"
	"encoding/json"
	"net"
	"testing"
	"time"

	"github.com/aglx/ledger/bridge"
	"github.com/aglx/ledger/protocol"
)

// TestRelayRestartRetriesOnlyWhatItOwes: a restart delivers again only the
// messages the relay still owed, with their attempts. Until 2026-12-01 the
// saved cursor was held back by the oldest message still being retried
// (its retries last about half an hour), so a restart, even a clean one,
// delivered every message relayed since then again, to every addressee.
func TestRelayRestartRetriesOnlyWhatItOwes(t *testing.T) {
	dir := t.TempDir()
	sink := listenAgent(t, "127.0.0.1:0")
	// An address nobody listens on, until the addressee comes back.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := ln.Addr().String()
	ln.Close()

	send := func(m *Main, to, body string) {
		t.Helper()
		c := dial(t, m.TCPAddr())
		c.Write([]byte("AGLX/1.0 TCP\nFROM: agent://src.local\nTO: " + to + "\nTYPE: task.cancel\n\n" + body + "\n"))
		c.Flush()
		if f, _ := readReply(t, c); f.Value(protocol.HeaderStatus) != "202 Accepted" {
			t.Fatalf("task.cancel to %s: %s %s", to, f.Value(protocol.HeaderStatus), f.Body)
		}
	}
	waitFor := func(m *Main, what string, cond func(bridge.RelayCounters) bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !cond(m.relay.Counters()); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %+v", what, m.relay.Counters())
			}
		}
	}

	m := startNodeWith(t, dir, func(c *Config) { c.Relay = true })
	registerAt(t, m, "agent://sink.local", sink.ln.Addr().String())
	registerAt(t, m, "agent://away.local", deadAddr)
	owed := `{"task_id":"t0","reason":"for an addressee that is down"}`
	send(m, "agent://away.local", owed)
	waitFor(m, "the relay never tried the absent addressee", func(c bridge.RelayCounters) bool { return c.Retrying == 1 })
	for i, body := range []string{`{"task_id":"t1","reason":"one"}`, `{"task_id":"t2","reason":"two"}`} {
		send(m, "agent://sink.local", body)
		if f := sink.next(t, 20*time.Second); string(f.Body) != body {
			t.Fatalf("delivery %d: %s, want %s", i, f.Body, body)
		}
	}
	waitFor(m, "the sink's deliveries were never counted", func(c bridge.RelayCounters) bool { return c.Delivered == 2 })
	m.Close(context.Background())

	// What the cursor names as owed: the one message, with its attempt.
	m2 := startNodeWith(t, dir, func(c *Config) { c.Relay = false })
	kv, err := m2.log.JetStream().KeyValue(context.Background(), bridge.RelayCursorBucket)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(context.Background(), "cursor")
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Cursor  uint64 `json:"cursor"`
		Pending []struct {
			Seq      uint64 `json:"seq"`
			Attempts int    `json:"attempts"`
			Addr     string `json:"addr"`
		} `json:"pending"`
	}
	if err := json.Unmarshal(e.Value(), &rec); err != nil || len(rec.Pending) != 1 || rec.Pending[0].Attempts != 1 || rec.Pending[0].Addr != deadAddr {
		t.Fatalf("the saved cursor %s (%v): want one message owed, after one attempt at %s", e.Value(), err, deadAddr)
	}
	m2.Close(context.Background())

	back := listenAgent(t, deadAddr)
	m = startNodeWith(t, dir, func(c *Config) { c.Relay = true })
	if f := back.next(t, 30*time.Second); string(f.Body) != owed {
		t.Fatalf("after the restart the owed message's addressee got %s, want %s", f.Body, owed)
	}
	// The sink's lane delivers in order: had the restart gone back over
	// t1 and t2, they would arrive before this one.
	marker := `{"task_id":"t3","reason":"after the restart"}`
	send(m, "agent://sink.local", marker)
	if f := sink.next(t, 20*time.Second); string(f.Body) != marker {
		t.Fatalf("after the restart the sink got %s first, want only the new %s", f.Body, marker)
	}
	waitFor(m, "the owed message was never counted delivered", func(c bridge.RelayCounters) bool { return c.Delivered == 2 && c.Retrying == 0 })
}
