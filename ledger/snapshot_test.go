package ledger

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"runtime"
	"slices"
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

// TestWriteToIsMarshal: the snapshot written a posting at a time is, byte
// for byte, json.Marshal of the whole document as Snapshot made it before
// it streamed (so every digest taken before still matches), for an empty
// ledger and one with every kind of state; and WriteTo's list of members
// is snapshotDoc's, in its order, so a field added to one and not the
// other fails here instead of changing digests silently.
func TestWriteToIsMarshal(t *testing.T) {
	for _, tc := range []struct {
		name string
		l    *Ledger
	}{
		{"empty", newHarness(t).l},
		{"every kind of state", snapshotFixture(t).l},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.l.Freeze()
			d := f.doc
			d.Accounts, d.Transactions = slices.Clone(d.Accounts), slices.Clone(d.Transactions)
			d.AdjustKeys, d.RewardKeys = slices.Clone(d.AdjustKeys), slices.Clone(d.RewardKeys)
			d.SignedKeys, d.TaskKeys = slices.Clone(d.SignedKeys), slices.Clone(d.TaskKeys)
			sortDoc(&d)
			if f.n > 0 {
				d.Postings = make([]snapshotPosting, f.n)
				for i := range f.n {
					d.Postings[i] = f.tables.snapshotPosting(uint32(i))
				}
			}
			want, err := json.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			n, err := f.WriteTo(&got)
			if err != nil || n != int64(got.Len()) {
				t.Fatalf("WriteTo = %d, %v; wrote %d bytes", n, err, got.Len())
			}
			sameSnapshot(t, "written a posting at a time", got.Bytes(), want)
		})
	}
	typ := reflect.TypeFor[snapshotDoc]()
	fields := snapshotFields(&snapshotDoc{})
	if typ.NumField() != len(fields) {
		t.Fatalf("snapshotDoc has %d fields, WriteTo writes %d", typ.NumField(), len(fields))
	}
	for i, f := range fields {
		if tag := typ.Field(i).Tag.Get("json"); tag != f.name {
			t.Errorf("member %d: WriteTo writes %q where snapshotDoc has %q", i, f.name, tag)
		}
	}
}

// failingWriter fails every write.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// TestWriteToSaysWhyItFailed: a snapshot that could not be written is an
// error, not a short digest of what was.
func TestWriteToSaysWhyItFailed(t *testing.T) {
	if _, err := snapshotFixture(t).l.Freeze().WriteTo(failingWriter{}); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("WriteTo to a failing writer: %v", err)
	}
}

// heapProbe is a writer that, once past half of a snapshot's bytes,
// measures the heap held at that moment.
type heapProbe struct {
	n, at int64
	held  uint64
}

func (p *heapProbe) Write(b []byte) (int, error) {
	if p.n < p.at && p.n+int64(len(b)) >= p.at {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		p.held = m.HeapAlloc
	}
	p.n += int64(len(b))
	return len(b), nil
}

// TestDigestHoldsNoWholeSnapshot: a digest of a large ledger does not hold
// its snapshot, or its postings' views, in memory at once. Made whole, a
// snapshot took about 700 bytes a posting at its peak: some 7 GB for ten
// million postings, on a node that makes one whenever a client asks
// /v1/ledger/digest and the last was not too dear.
func TestDigestHoldsNoWholeSnapshot(t *testing.T) {
	const accounts, postings = 1_000, 100_000
	l := New(node)
	seq := uint64(0)
	for i := range accounts {
		seq++
		l.Apply(Event{Seq: seq, EventID: fmt.Sprintf("mint-%d", i), Time: t0, From: node, To: fmt.Sprintf("agent://a%04d.local", i), Auth: AuthNode,
			Payload: &protocol.CreditTransfer{Amount: amt("1000000"), Currency: protocol.Currency, TransactionID: fmt.Sprintf("mint-%d", i)}})
	}
	one := amt("1")
	for i := range postings {
		seq++
		l.Apply(Event{Seq: seq, EventID: fmt.Sprintf("t-%d", i), Time: t0, From: fmt.Sprintf("agent://a%04d.local", i%accounts),
			To: fmt.Sprintf("agent://a%04d.local", (i+1)%accounts), Auth: AuthValid,
			Payload: &protocol.CreditTransfer{Amount: one, Currency: protocol.Currency, TransactionID: fmt.Sprintf("tx-%d", i)}})
	}
	f := l.Freeze()
	var size countWriter
	size.w = io.Discard
	if _, err := f.WriteTo(&size); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	probe := &heapProbe{at: size.n / 2}
	if _, err := f.WriteTo(probe); err != nil {
		t.Fatal(err)
	}
	grown := int64(probe.held) - int64(before.HeapAlloc)
	if limit := size.n / 8; grown > limit {
		t.Fatalf("half way through a snapshot of %d bytes (%d postings) the heap had grown by %d bytes; a digest must not hold the snapshot (at most %d)",
			size.n, postings+accounts, grown, limit)
	}
}
