package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/aglx/ledger/bridge"
	"github.com/aglx/ledger/protocol"
	"github.com/nats-io/nats.go/jetstream"
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
	_, saved := savedRelayCursor(t, m2)
	var rec struct {
		Cursor  uint64 `json:"cursor"`
		Pending []struct {
			Seq      uint64 `json:"seq"`
			EventID  string `json:"event_id"`
			Attempts int    `json:"attempts"`
			Addr     string `json:"addr"`
		} `json:"pending"`
	}
	// One attempt at least: on a slow machine the second, due a second
	// after the first, may have been made too.
	if err := json.Unmarshal(saved, &rec); err != nil || len(rec.Pending) != 1 || rec.Pending[0].Attempts < 1 || rec.Pending[0].Addr != deadAddr || rec.Pending[0].EventID == "" {
		t.Fatalf("the saved cursor %s (%v): want one message owed, with its event id, after an attempt at %s", saved, err, deadAddr)
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

// TestRelayRestoreChecksWhatItFinds: a message the saved cursor names as
// owed is delivered after a restart only if the stream still holds that
// event at its sequence, and only if the relay would deliver it now. A
// store put back from copies of different times (the relay's bucket newer
// than the event stream) can name a sequence that holds another event;
// restored without the relay's checks, a frame that had been relayed once
// already went out again with the node's RELAYED-BY (helper-67).
func TestRelayRestoreChecksWhatItFinds(t *testing.T) {
	dir := t.TempDir()
	sink := listenAgent(t, "127.0.0.1:0")
	m := startNodeWith(t, dir, func(c *Config) { c.Relay = true })
	registerAt(t, m, "agent://sink.local", sink.ln.Addr().String())
	c := dial(t, m.TCPAddr())
	send := func(frame string) uint64 {
		t.Helper()
		c.Write([]byte(frame))
		c.Flush()
		_, a := readReply(t, c)
		return a.Seq
	}
	hop := send("AGLX/1.0 TCP\nFROM: agent://src.local\nTO: agent://sink.local\nTYPE: task.cancel\nRELAYED-BY: registry://other.local\n\n{\"task_id\":\"hop\",\"reason\":\"relayed once already\"}\n")
	plain := send("AGLX/1.0 TCP\nFROM: agent://src.local\nTO: agent://sink.local\nTYPE: task.cancel\n\n{\"task_id\":\"plain\",\"reason\":\"x\"}\n")
	if f := sink.next(t, 20*time.Second); !strings.Contains(string(f.Body), `"plain"`) {
		t.Fatalf("first delivery %s: the frame relayed once already went out", f.Body)
	}
	for deadline := time.Now().Add(20 * time.Second); m.relay.Counters().Delivered != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the delivery was never counted: %+v", m.relay.Counters())
		}
	}
	m.Close(context.Background())

	m2 := startNodeWith(t, dir, func(c *Config) { c.Relay = false })
	kv, saved := savedRelayCursor(t, m2)
	cur := string(saved)
	if strings.HasPrefix(cur, "{") {
		t.Fatalf("the cursor names messages owed after a clean stop with nothing owed: %s", cur)
	}
	// As a bucket from another time would: the one-hop frame named as
	// owed, and the plain one named as owed under another event's id.
	planted := fmt.Sprintf(`{"cursor":%s,"pending":[{"seq":%d,"attempts":1,"due":"2020-01-01T00:00:00Z"},{"seq":%d,"event_id":"01ANOTHEREVENT0000000000000","attempts":1,"due":"2020-01-01T00:00:00Z"}]}`, cur, hop, plain)
	if _, err := kv.Put(context.Background(), "cursor", []byte(planted)); err != nil {
		t.Fatal(err)
	}
	m2.Close(context.Background())

	m = startNodeWith(t, dir, func(c *Config) { c.Relay = true })
	c = dial(t, m.TCPAddr())
	// Anything restored is queued before this is read: had either owed
	// message gone out, it would reach the sink first.
	send("AGLX/1.0 TCP\nFROM: agent://src.local\nTO: agent://sink.local\nTYPE: task.cancel\n\n{\"task_id\":\"marker\",\"reason\":\"after the restart\"}\n")
	if f := sink.next(t, 20*time.Second); !strings.Contains(string(f.Body), `"marker"`) {
		t.Fatalf("after the restart the sink got %s first; want only the new message", f.Body)
	}
}

// savedRelayCursor is the relay's cursor record as m's store holds it,
// and the bucket that holds it.
func savedRelayCursor(t *testing.T, m *Main) (jetstream.KeyValue, []byte) {
	t.Helper()
	kv, err := m.log.JetStream().KeyValue(context.Background(), bridge.RelayCursorBucket)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(context.Background(), "cursor")
	if err != nil {
		t.Fatal(err)
	}
	return kv, e.Value()
}

// TestRelayCursorPastTheStreamsEnd: a saved cursor past the event
// stream's end (a bucket newer than the stream it goes with) is lowered
// to the end at start. Started there, the relay passed over every message
// recorded up to it: answered 202, never delivered, and nothing said
// (helper-82).
func TestRelayCursorPastTheStreamsEnd(t *testing.T) {
	dir := t.TempDir()
	sink := listenAgent(t, "127.0.0.1:0")
	m := startNodeWith(t, dir, func(c *Config) { c.Relay = true })
	registerAt(t, m, "agent://sink.local", sink.ln.Addr().String())
	m.Close(context.Background())

	m2 := startNodeWith(t, dir, func(c *Config) { c.Relay = false })
	kv, saved := savedRelayCursor(t, m2)
	var cur uint64
	if _, err := fmt.Sscan(string(saved), &cur); err != nil {
		t.Fatalf("the saved cursor %q: %v", saved, err)
	}
	if _, err := kv.Put(context.Background(), "cursor", []byte(fmt.Sprint(cur+50))); err != nil {
		t.Fatal(err)
	}
	m2.Close(context.Background())

	m = startNodeWith(t, dir, func(c *Config) { c.Relay = true })
	c := dial(t, m.TCPAddr())
	body := `{"task_id":"t-1","reason":"recorded below the planted cursor"}`
	c.Write([]byte("AGLX/1.0 TCP\nFROM: agent://src.local\nTO: agent://sink.local\nTYPE: task.cancel\n\n" + body + "\n"))
	c.Flush()
	if f, a := readReply(t, c); f.Value(protocol.HeaderStatus) != "202 Accepted" || a.Seq > cur+50 {
		t.Fatalf("the message: %s seq %d; the test needs it below the planted cursor %d", f.Value(protocol.HeaderStatus), a.Seq, cur+50)
	}
	if f := sink.next(t, 20*time.Second); string(f.Body) != body {
		t.Fatalf("the sink got %s, want %s", f.Body, body)
	}
}
