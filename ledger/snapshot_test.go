package ledger

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aglx/ledger/protocol"
)

// snapshotFixture builds a ledger with every kind of state: accounts,
// postings of each kind, holds in each state, requests, mismatches.
func snapshotFixture(t *testing.T) *harness {
	h := newHarness(t)
	for _, e := range []Event{
		mint(alice, "100.50", "m-1"),
		transfer(alice, bob, "0.25", "t-1", AuthValid),
		{From: bob, To: alice, Auth: AuthValid, Payload: &protocol.CreditRequest{RequestedAmount: amt("3")}},
		approve(alice, bob, "3", "a-1", t0.Add(time.Hour)),
		transfer(alice, bob, "3", "a-1", AuthValid),
		approve(alice, carol, "1", "a-2", time.Time{}),
		assign(alice, carol, "2", "job-1"),
		assign(alice, dave, "2", ""),
		{From: carol, To: alice, Auth: AuthValid, Payload: &protocol.TaskReject{TaskID: "job-1", Reason: "busy"}},
		reward(node, carol, "1e2", "", AuthNode),
		adjustEv(bob, "-0.25", "t-1", "adj-1"),
		{From: bob, To: bob, Auth: AuthValid, Payload: &protocol.CreditBalance{Balance: amt("7")}},
		{From: carol, To: alice, Auth: AuthValid, Payload: &protocol.CreditDeny{RequestedAmount: amt("1"), Reason: "no"}},
	} {
		if o := h.apply(e); o.Status != 200 {
			t.Fatalf("fixture: Apply(%s) = %d %q", describe(e), o.Status, o.Reason)
		}
	}
	h.now = t0.Add(48 * time.Hour) // the rest expires
	h.apply(Event{From: alice, To: node, Auth: AuthValid, Payload: &protocol.CreditBalance{}})
	return h
}

// TestSnapshotCanonical checks that Snapshot is canonical JSON: decoding
// and re-encoding it (which sorts keys) gives the same bytes, and every
// number in it is a sequence, never money.
func TestSnapshotCanonical(t *testing.T) {
	h := snapshotFixture(t)
	snap := h.snapshot()
	dec := json.NewDecoder(bytes.NewReader(snap))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("Snapshot() is not JSON: %v", err)
	}
	again, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	sameSnapshot(t, "re-encoded", again, snap)

	var walk func(key string, v any)
	walk = func(key string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				walk(k, x)
			}
		case []any:
			for _, x := range v {
				walk(key, x)
			}
		case json.Number:
			if key != "seq" && !strings.HasSuffix(key, "_seq") {
				t.Errorf("Snapshot() has a number under %q: %s; money must be a string", key, v)
			}
		}
	}
	walk("", doc)
	for _, want := range []string{`"amount":"1e2"`, `"amount":"100"`, `"state":"settled"`, `"state":"released"`, `"state":"expired"`, `"state":"denied"`, `"field":"balance"`} {
		if want == `"amount":"1e2"` {
			if strings.Contains(string(snap), want) {
				t.Errorf("Snapshot() holds %s; money must be in plain notation", want)
			}
			continue
		}
		if !strings.Contains(string(snap), want) {
			t.Errorf("Snapshot() lacks %s", want)
		}
	}
}

// TestReplayIdentical rebuilds the fixture from its events and compares
// the snapshots and every account's history byte for byte.
func TestReplayIdentical(t *testing.T) {
	h := snapshotFixture(t)
	replay := New(node)
	for _, e := range h.log {
		replay.Apply(e)
	}
	got, err := replay.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sameSnapshot(t, "replay", got, h.snapshot())
	for _, uri := range []string{node, alice, bob, carol, dave} {
		a, _ := json.Marshal(h.l.Entries(uri, 0, EntriesLimitMax))
		b, _ := json.Marshal(replay.Entries(uri, 0, EntriesLimitMax))
		if !bytes.Equal(a, b) {
			t.Errorf("Entries(%s) after replay = %s, want %s", uri, b, a)
		}
	}
	if err := replay.Check(); err != nil {
		t.Errorf("Check() after replay = %v", err)
	}
}

// TestApplyOutOfOrderPanics checks the precondition on sequences.
func TestApplyOutOfOrderPanics(t *testing.T) {
	l := New(node)
	l.Apply(Event{Seq: 5, EventID: "e5", Payload: &protocol.Ack{}})
	defer func() {
		if recover() == nil {
			t.Errorf("Apply(seq 5 again) did not panic")
		}
	}()
	l.Apply(Event{Seq: 5, EventID: "e5b", Payload: &protocol.Ack{}})
}

// TestFrozenIsTheStateWhenFrozen: a Frozen writes the state as it stood
// when it was taken, whatever the ledger applies after: the node takes it
// under the fold's lock and writes it out after, while the fold goes on.
// The events after change what the ledger changes in place (a request
// resolved, a hold ended, an account's figures) and add to every table.
func TestFrozenIsTheStateWhenFrozen(t *testing.T) {
	h := newHarness(t)
	h.apply(mint(alice, "100", "m-1"))
	h.apply(mint(bob, "50", "m-2"))
	h.apply(Event{From: bob, To: alice, Auth: AuthValid, Payload: &protocol.CreditRequest{RequestedAmount: amt("20"), TaskID: "task-7"}})
	h.apply(Event{From: carol, To: bob, Auth: AuthValid, Payload: &protocol.CreditRequest{RequestedAmount: amt("5")}})
	h.apply(approve(alice, bob, "10", "ap-1", t0.Add(time.Hour)))
	h.apply(Event{From: bob, To: bob, Auth: AuthValid, Payload: &protocol.CreditBalance{Balance: amt("99"), SpentTotal: amt("2.50"), EarnedTotal: amt("3")}})
	want := h.snapshot()
	frozen := h.l.Freeze()
	h.apply(Event{From: bob, To: carol, Auth: AuthValid, Payload: &protocol.CreditDeny{RequestedAmount: amt("5"), Reason: "busy"}})
	h.apply(Event{From: alice, To: bob, Auth: AuthValid, Payload: &protocol.CreditApprove{ApprovedAmount: amt("20"), TransactionID: "ap-2", Expires: protocol.Timestamp{Time: t0.Add(2 * time.Hour)}}})
	h.apply(transfer(alice, bob, "10", "ap-1", AuthValid))
	h.apply(transfer(bob, carol, "7.5", "t-9", AuthValid))
	h.apply(Event{From: carol, To: carol, Auth: AuthValid, Payload: &protocol.CreditBalance{Balance: amt("1")}})
	if after := h.snapshot(); bytes.Equal(after, want) {
		t.Fatal("the events after the freeze changed nothing; the test shows nothing")
	}
	got, err := frozen.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sameSnapshot(t, "the frozen state, written after more events", got, want)
}
