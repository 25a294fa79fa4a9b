package main

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/aglx/ledger/bridge"
	"github.com/aglx/ledger/protocol"
)

// relayLanes is bridge's relayLanesMax, and relayRetryLanes its
// relayRetryLanesMax: the lanes there are, and those retries may hold.
const (
	relayLanes      = 64
	relayRetryLanes = relayLanes / 2
)

// TestRelaySlowAddresseesLeaveLanesForOthers: 64 addressees that take a
// frame and never answer hold every lane for one delivery timeout. Until
// 2026-12-01 that stopped the relay: nothing behind a message that found no
// lane was even looked at, and at each of their retries they took every
// lane again (helper-82). Now:
//   - the relay goes on past a message waiting for a lane (the message to
//     an unregistered agent behind it is settled while the tarpits still
//     hold their lanes, with no attempt failed yet), and the waiting
//     message is delivered once a lane ends;
//   - their retries hold at most half the lanes, so a message to a working
//     addressee sent while they are retried is delivered before any retry
//     fails.
func TestRelaySlowAddresseesLeaveLanesForOthers(t *testing.T) {
	const timeout = 2 * time.Second
	m := startNodeWith(t, t.TempDir(), func(c *Config) { c.Relay = true; c.relayTimeout = timeout })
	sink := listenAgent(t, "127.0.0.1:0")
	registerAt(t, m, "agent://sink.local", sink.ln.Addr().String())
	registerTarpits(t, m)
	c := dial(t, m.TCPAddr())
	send := func(to, task string) { t.Helper(); relayCancel(t, c, to, task) }
	// waitFor polls the relay's counters until ok holds.
	waitFor := func(what string, ok func(bridge.RelayCounters) bool) bridge.RelayCounters {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
			if rc := m.relay.Counters(); ok(rc) {
				return rc
			}
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s: %+v", what, m.relay.Counters())
			}
		}
	}

	for i := range relayLanes {
		send(fmt.Sprintf("agent://slow%02d.local", i), fmt.Sprintf("s%d", i))
	}
	waitFor("every lane busy", func(rc bridge.RelayCounters) bool { return rc.Lanes == relayLanes })
	send("agent://sink.local", "first")
	send("agent://nobody.local", "lost")
	rc := waitFor("the message after the waiting one", func(rc bridge.RelayCounters) bool { return rc.Undeliverable >= 1 })
	if rc.Failed != 0 || rc.WaitingForLane != 1 {
		t.Fatalf("when the relay settled the message behind the one waiting for a lane: %+v; want no attempt failed yet and one message waiting", rc)
	}
	if f := sink.next(t, 30*time.Second); f.Type() != "task.cancel" {
		t.Fatalf("the sink got %s", f.Type())
	}
	if rc := m.relay.Counters(); rc.Failed == 0 || rc.WaitingForLane != 0 {
		t.Fatalf("after the waiting message was delivered: %+v; want it delivered once a tarpit's attempt failed", rc)
	}

	// The first attempts have failed; the tarpits are down for the first
	// back-off, then retried, at most relayRetryLanes at a time.
	waitFor("the first attempts to fail", func(rc bridge.RelayCounters) bool { return rc.Failed >= relayLanes })
	waitFor("their lanes to end", func(rc bridge.RelayCounters) bool { return rc.Lanes <= 1 })
	waitFor("the retries", func(rc bridge.RelayCounters) bool { return rc.Lanes >= relayRetryLanes })
	send("agent://sink.local", "second")
	if f := sink.next(t, 30*time.Second); f.Type() != "task.cancel" {
		t.Fatalf("the sink got %s", f.Type())
	}
	if rc := m.relay.Counters(); rc.Failed != relayLanes {
		t.Fatalf("when the sink got its message: %+v; want it delivered while the retries still held their lanes, before any of them failed", rc)
	}
	most := int64(0)
	waitFor("every tarpit's second attempt", func(rc bridge.RelayCounters) bool {
		most = max(most, rc.Lanes)
		return rc.Failed >= 2*relayLanes
	})
	// The sink's lane may be counted beside the retries' while it lasts.
	if most > relayRetryLanes+1 {
		t.Fatalf("retries held %d lanes at once; want at most %d", most, relayRetryLanes)
	}
}

// TestRelayOwesWhatWaitsForALane: a message waiting for a lane when the
// node stops is owed in the relay's saved cursor, like one in a lane, and
// the next start delivers it.
func TestRelayOwesWhatWaitsForALane(t *testing.T) {
	dir := t.TempDir()
	cfg := func(c *Config) { c.Relay = true; c.relayTimeout = 2 * time.Second }
	m := startNodeWith(t, dir, cfg)
	sink := listenAgent(t, "127.0.0.1:0")
	registerAt(t, m, "agent://sink.local", sink.ln.Addr().String())
	registerTarpits(t, m)
	c := dial(t, m.TCPAddr())
	send := func(to string) uint64 { t.Helper(); return relayCancel(t, c, to, "t") }
	for i := range relayLanes {
		send(fmt.Sprintf("agent://slow%02d.local", i))
	}
	for deadline := time.Now().Add(30 * time.Second); m.relay.Counters().Lanes != relayLanes; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("every lane busy: %+v", m.relay.Counters())
		}
	}
	seq := send("agent://sink.local")
	for deadline := time.Now().Add(30 * time.Second); m.relay.Counters().WaitingForLane != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the sink's message waiting for a lane: %+v", m.relay.Counters())
		}
	}
	m.Close(context.Background())
	if rc := m.relay.Counters(); rc.Cursor >= int64(seq) || rc.Delivered != 0 {
		t.Fatalf("after stopping: %+v; want the cursor before the waiting message (seq %d), nothing delivered", rc, seq)
	}

	m = startNodeWith(t, dir, cfg)
	if f := sink.next(t, 30*time.Second); f.Type() != "task.cancel" {
		t.Fatalf("the sink got %s", f.Type())
	}
}

// slowAcker is an agent that acknowledges every frame, after delay.
func slowAcker(t *testing.T, delay time.Duration) string {
	t.Helper()
	return agentListener(t, func(c net.Conn, f *protocol.Frame) bool {
		time.Sleep(delay) // the agent's own pace, not a wait for the test
		ack := &protocol.Frame{Headers: []protocol.Header{{Name: "FROM", Value: f.To()}, {Name: "TO", Value: f.From()}, {Name: "TYPE", Value: "ack"}}, Body: []byte(`{}`)}
		_, err := c.Write(protocol.Encode(ack))
		return err == nil
	})
}

// TestRelayWaitingMessageIsNotStarvedByBusyLanes: 64 addressees that
// answer, slowly, and are kept busy hold every lane; a message for a 65th
// is delivered all the same. Fed on while a message waited, their lanes
// never ended, and it waited for as long as they were kept busy
// (helper-85).
func TestRelayWaitingMessageIsNotStarvedByBusyLanes(t *testing.T) {
	m := startNodeWith(t, t.TempDir(), func(c *Config) { c.Relay = true })
	sink := listenAgent(t, "127.0.0.1:0")
	registerAt(t, m, "agent://sink.local", sink.ln.Addr().String())
	slow := make([]string, relayLanes)
	for i := range slow {
		slow[i] = fmt.Sprintf("agent://slow%02d.local", i)
		registerAt(t, m, slow[i], slowAcker(t, 200*time.Millisecond))
	}
	c := dial(t, m.TCPAddr())
	burst := func(tos ...string) {
		t.Helper()
		for _, to := range tos {
			c.Write(fmt.Appendf(nil, "AGLX/1.0 TCP\nFROM: agent://src.local\nTO: %s\nTYPE: task.cancel\n\n{\"task_id\": \"t\", \"reason\": \"r\"}\n", to))
		}
		c.Flush()
		for range tos {
			if f, _ := readReply(t, c); f.Value(protocol.HeaderStatus) != "202 Accepted" {
				t.Fatalf("task.cancel: %s %s", f.Value(protocol.HeaderStatus), f.Body)
			}
		}
	}
	burst(slow...)
	burst(slow...)
	for deadline := time.Now().Add(30 * time.Second); m.relay.Counters().Lanes != relayLanes; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("every lane busy: %+v", m.relay.Counters())
		}
	}
	burst("agent://sink.local")
	// Every slow addressee gets a message for each it answers, so its lane
	// always has one more; the sink's must still come, and before the
	// slow ones have answered many more.
	for rounds := 0; ; rounds++ {
		select {
		case <-sink.frames:
			return
		case <-time.After(100 * time.Millisecond):
		}
		if rounds == 100 {
			t.Fatalf("the sink's message waited through %d rounds of messages to busy addressees: %+v", rounds, m.relay.Counters())
		}
		burst(slow...)
	}
}

// registerTarpits registers relayLanes tarpits, agent://slowNN.local.
func registerTarpits(t *testing.T, m *Main) {
	t.Helper()
	for i := range relayLanes {
		addr, _ := tarpit(t)
		registerAt(t, m, fmt.Sprintf("agent://slow%02d.local", i), addr)
	}
}

// relayCancel sends a task.cancel to another agent on c, which the node
// must record for the relay (202), and returns its event's seq.
func relayCancel(t *testing.T, c *bridge.Client, to, task string) uint64 {
	t.Helper()
	c.Write(fmt.Appendf(nil, "AGLX/1.0 TCP\nFROM: agent://src.local\nTO: %s\nTYPE: task.cancel\n\n{\"task_id\": %q, \"reason\": \"r\"}\n", to, task))
	c.Flush()
	f, a := readReply(t, c)
	if f.Value(protocol.HeaderStatus) != "202 Accepted" {
		t.Fatalf("task.cancel to %s: %s %s", to, f.Value(protocol.HeaderStatus), f.Body)
	}
	return a.Seq
}
