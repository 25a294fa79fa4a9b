package ledger

import (
	"bytes"
	"fmt"
	"time"

	"github.com/aglx/ledger/protocol"
)

// Test fixtures: the node and a few agents.
const (
	node  = "registry://node.local"
	alice = "agent://alice.local"
	bob   = "agent://bob.local"
	carol = "agent://carol.local"
	dave  = "agent://dave.local"
)

// t0 is the receive time of the first event of every scripted test.
var t0 = time.Date(2025, 10, 29, 18, 0, 0, 0, time.UTC)

// harness applies events with growing sequence numbers and asserts after
// every one that the balances still sum to zero.
type harness struct {
	t   tb
	l   *Ledger
	seq uint64
	now time.Time
	log []Event // every event applied, as applied
}

// tb is what the harness needs of a *testing.T or a *rapid.T.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
}

func newHarness(t tb) *harness {
	return &harness{t: t, l: New(node), now: t0}
}

// apply fills in Seq, and EventID and Time where the event leaves them
// empty, applies it, and checks the sum.
func (h *harness) apply(e Event) Outcome {
	h.t.Helper()
	h.seq++
	e.Seq = h.seq
	if e.EventID == "" {
		e.EventID = fmt.Sprintf("01EV%08d", h.seq)
	}
	if e.Time.IsZero() {
		e.Time = h.now
	}
	h.log = append(h.log, e)
	o := h.l.Apply(e)
	if err := h.l.checkSum(); err != nil {
		h.t.Fatalf("after Apply(%s): %v", describe(e), err)
	}
	return o
}

// snapshot returns the ledger's Snapshot or fails the test.
func (h *harness) snapshot() []byte {
	h.t.Helper()
	b, err := h.l.Snapshot()
	if err != nil {
		h.t.Fatalf("Snapshot() error: %v", err)
	}
	return b
}

// figures returns "balance/available" of uri, the form the tests compare.
func (h *harness) figures(uri string) string {
	v, _ := h.l.Account(uri)
	return v.Balance.String() + "/" + v.Available.String()
}

// amt parses an amount or panics; test amounts are literals.
func amt(s string) *protocol.Amount {
	a, err := protocol.ParseAmount(s)
	if err != nil {
		panic(err)
	}
	return a
}

func transfer(from, to, amount, txID string, auth Auth) Event {
	return Event{From: from, To: to, Auth: auth, Payload: &protocol.CreditTransfer{
		Amount: amt(amount), Currency: protocol.Currency, TransactionID: txID,
	}}
}

// mint issues credits: a transfer from the node, signed with its key.
func mint(to, amount, txID string) Event { return transfer(node, to, amount, txID, AuthNode) }

func approve(from, to, amount, txID string, expires time.Time) Event {
	p := &protocol.CreditApprove{ApprovedAmount: amt(amount), TransactionID: txID}
	if !expires.IsZero() {
		p.Expires = protocol.Timestamp{Time: expires}
	}
	return Event{From: from, To: to, Auth: AuthValid, Payload: p}
}

func reward(from, to, amount, taskID string, auth Auth) Event {
	return Event{From: from, To: to, Auth: auth, Payload: &protocol.CreditReward{Amount: amt(amount), TaskID: taskID}}
}

func adjustEv(to, amount, txID, msgID string) Event {
	return Event{From: node, To: to, Auth: AuthNode, MessageID: msgID, Payload: &protocol.CreditAdjust{
		TransactionID: txID, Adjustment: amt(amount), Reason: "correction",
	}}
}

func assign(owner, worker, credits, taskID string) Event {
	e := Event{From: owner, To: worker, Auth: AuthValid, Payload: &protocol.TaskAssign{TaskID: taskID, Task: "data.analyze"}}
	if credits != "" {
		e.Credits = amt(credits)
	}
	return e
}

// describe prints an event for failure messages.
func describe(e Event) string {
	return fmt.Sprintf("seq %d %T %s->%s auth=%s %+v", e.Seq, e.Payload, e.From, e.To, e.Auth, e.Payload)
}

// sameSnapshot fails the test if two snapshots differ, showing where.
func sameSnapshot(t tb, what string, got, want []byte) {
	t.Helper()
	if bytes.Equal(got, want) {
		return
	}
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	lo := max(0, i-80)
	t.Fatalf("%s: snapshots differ at byte %d:\n got  ...%s\n want ...%s", what, i, got[lo:min(len(got), i+80)], want[lo:min(len(want), i+80)])
}
