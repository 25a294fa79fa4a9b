package ledger

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/aglx/ledger/protocol"
	"github.com/cockroachdb/apd/v3"
	"pgregory.net/rapid"
)

// Pools the property test draws from. They are small on purpose, so that
// transaction ids, task ids and message ids collide: duplicates and
// conflicts are what the test is after.
var (
	propAgents  = []string{alice, bob, carol, dave, "agent://eve.local"}
	propAmounts = []string{"0.1", "0.2", "0.3", "1", "1.0", "2.5", "3", "3.00", "5", "7.25", "10", "0.001", "12.5", "40", "100"}
	propAuths   = []Auth{AuthValid, AuthValid, AuthValid, AuthUnsigned, AuthInvalid}
)

func drawID(t *rapid.T, prefix string, n int, label string) string {
	return fmt.Sprintf("%s%d", prefix, rapid.IntRange(0, n-1).Draw(t, label))
}

// drawEvent draws one event: mostly transfers and mints, with approvals,
// settlements, time jumps, adjustments, rewards, task holds, claims and
// resends of earlier events mixed in.
func drawEvent(t *rapid.T, h *harness) Event {
	agent := func(label string) string { return rapid.SampledFrom(propAgents).Draw(t, label) }
	amount := func() string { return rapid.SampledFrom(propAmounts).Draw(t, "amount") }
	auth := func() Auth { return rapid.SampledFrom(propAuths).Draw(t, "auth") }
	if rapid.IntRange(0, 9).Draw(t, "jump") == 0 {
		h.now = h.now.Add(time.Duration(rapid.IntRange(1, 26*60).Draw(t, "minutes")) * time.Minute)
	}
	switch k := rapid.IntRange(0, 99).Draw(t, "kind"); {
	case k < 15:
		tx := fmt.Sprintf("m%d", h.seq+1)
		if rapid.IntRange(0, 3).Draw(t, "pooled") == 0 {
			tx = drawID(t, "m", 30, "tx")
		}
		return mint(agent("to"), amount(), tx)
	case k < 35:
		// A transfer with a fresh transaction_id, or one from the pool.
		tx := fmt.Sprintf("u%d", h.seq+1)
		if rapid.IntRange(0, 3).Draw(t, "pooled") == 0 {
			tx = drawID(t, "t", 40, "tx")
		}
		return transfer(agent("from"), agent("to"), amount(), tx, auth())
	case k < 45:
		// A settlement: an earlier approval's payer pays its payee.
		if a, ok := pickEarlier[*protocol.CreditApprove](t, h); ok {
			p := a.Payload.(*protocol.CreditApprove)
			paid := amount()
			if rapid.Bool().Draw(t, "in full") {
				paid = p.ApprovedAmount.String()
			}
			return transfer(a.From, a.To, paid, p.TransactionID, AuthValid)
		}
		return mint(agent("to"), amount(), drawID(t, "m", 30, "tx"))
	case k < 55:
		var expires time.Time
		if rapid.Bool().Draw(t, "expires") {
			expires = h.now.Add(time.Duration(rapid.IntRange(1, 180).Draw(t, "ttl")) * time.Minute)
		}
		e := approve(agent("from"), agent("to"), amount(), drawID(t, "t", 40, "tx"), expires)
		e.Auth = auth()
		return e
	case k < 62:
		sign := rapid.SampledFrom([]string{"", "-"}).Draw(t, "sign")
		pool := rapid.SampledFrom([]string{"t", "m"}).Draw(t, "pool")
		e := adjustEv(agent("to"), sign+amount(), drawID(t, pool, 40, "tx"), drawID(t, "adj", 20, "msg"))
		if rapid.IntRange(0, 9).Draw(t, "forged") == 0 {
			e.Auth = AuthValid
		}
		return e
	case k < 70:
		from := agent("from")
		if rapid.Bool().Draw(t, "issuance") {
			from = node
		}
		e := reward(from, agent("to"), amount(), "", auth())
		if from == node {
			e.Auth = AuthNode
		}
		if rapid.Bool().Draw(t, "task") {
			e.Payload.(*protocol.CreditReward).TaskID = drawID(t, "job", 10, "task")
		} else if rapid.Bool().Draw(t, "named") {
			e.MessageID = drawID(t, "msg", 10, "msg")
		}
		return e
	case k < 78:
		task := ""
		if rapid.Bool().Draw(t, "named") {
			task = drawID(t, "job", 10, "task")
		}
		return assign(agent("owner"), agent("worker"), amount(), task)
	case k < 85:
		// The end of an earlier task, named by task_id or event id, by
		// its worker or owner, or now and then by someone else.
		task, owner, worker := drawID(t, "job", 10, "task"), agent("owner"), agent("worker")
		if a, ok := pickEarlier[*protocol.TaskAssign](t, h); ok && rapid.IntRange(0, 4).Draw(t, "stray") != 0 {
			owner, worker, task = a.From, a.To, a.EventID
			if id := a.Payload.(*protocol.TaskAssign).TaskID; id != "" && rapid.Bool().Draw(t, "by task_id") {
				task = id
			}
		}
		switch rapid.IntRange(0, 2).Draw(t, "end") {
		case 0:
			return Event{From: worker, To: owner, Auth: AuthValid, Payload: &protocol.TaskResult{TaskID: task, Status: "SUCCESS"}}
		case 1:
			return Event{From: worker, To: owner, Auth: AuthValid, Payload: &protocol.TaskReject{TaskID: task, Reason: "busy"}}
		}
		return Event{From: owner, To: worker, Auth: AuthValid, Payload: &protocol.TaskCancel{TaskID: task}}
	case k < 90:
		from := agent("from")
		if rapid.Bool().Draw(t, "query") {
			return Event{From: from, To: node, Auth: AuthValid, Payload: &protocol.CreditBalance{}}
		}
		return Event{From: from, To: agent("to"), Auth: AuthValid, Payload: &protocol.CreditReceived{TransactionID: drawID(t, "t", 40, "tx"), Amount: amt(amount())}}
	default:
		if len(h.log) == 0 {
			return mint(agent("to"), amount(), "m0")
		}
		// A resend: the same message again, as a new event.
		e := h.log[rapid.IntRange(0, len(h.log)-1).Draw(t, "resend")]
		e.Seq, e.EventID, e.Time = 0, "", time.Time{}
		return e
	}
}

// pickEarlier draws one of the events applied so far with payload type P.
func pickEarlier[P protocol.Payload](t *rapid.T, h *harness) (Event, bool) {
	var found []int
	for i, e := range h.log {
		if _, ok := e.Payload.(P); ok {
			found = append(found, i)
		}
	}
	if len(found) == 0 {
		return Event{}, false
	}
	return h.log[rapid.SampledFrom(found).Draw(t, "earlier")], true
}

// idempotencyKey is the test's own statement of which postings may happen
// only once: a transfer per transaction_id, a reward per task or message,
// an adjustment per message.
func idempotencyKey(e Event) string {
	msg := "event " + e.EventID
	if e.MessageID != "" {
		msg = "id " + e.From + " " + e.MessageID
	}
	switch p := e.Payload.(type) {
	case *protocol.CreditTransfer:
		return "transfer " + p.TransactionID
	case *protocol.CreditReward:
		if p.TaskID != "" {
			return "reward task " + e.From + " " + e.To + " " + p.TaskID
		}
		return "reward " + msg
	case *protocol.CreditAdjust:
		return "adjust " + msg
	}
	return ""
}

// peekAhead checks AccountAt against what really happens: the figures it
// predicts for a later time are those an event at that time finds, once
// the holds due by then have expired. The event is an ack, which changes
// nothing else.
func peekAhead(t *rapid.T, h *harness) Outcome {
	at := h.now.Add(time.Duration(rapid.IntRange(1, 48*60).Draw(t, "peek minutes")) * time.Minute)
	want := map[string]AccountView{}
	for _, a := range propAgents {
		want[a], _ = h.l.AccountAt(a, at)
	}
	h.now = at
	o := h.apply(Event{From: alice, To: bob, Auth: AuthValid, Payload: &protocol.Ack{}})
	for _, a := range propAgents {
		got, _ := h.l.Account(a)
		got.Seq = want[a].Seq // AccountAt cannot know the seq of the event to come
		if fmt.Sprint(got) != fmt.Sprint(want[a]) {
			t.Fatalf("AccountAt(%s, %s) = %+v, but at that time Account = %+v", a, at, want[a], got)
		}
	}
	return o
}

// balancesSum adds every account's balance as Account reports it, in plain
// apd arithmetic wide enough for any sum: a check of the zero sum that
// does not rest on the ledger's own (checkSum, Check), which are code
// under test too (helper-110).
func balancesSum(t *rapid.T, h *harness) *apd.Decimal {
	ctx := apd.BaseContext.WithPrecision(100)
	sum := new(apd.Decimal)
	for _, a := range append([]string{node}, propAgents...) {
		v, _ := h.l.Account(a)
		if _, err := ctx.Add(sum, sum, v.Balance.Decimal()); err != nil {
			t.Fatalf("adding %s's balance %s: %v", a, v.Balance, err)
		}
	}
	return sum
}

// TestLedgerProperties applies thousands of random events and checks
// after every one: the balances sum to exactly zero; no account but the
// issuance account is below zero unless an adjustment took it there; a
// refusal or a repeat books nothing; nothing posts twice under one
// idempotency key. At the end a fresh ledger fed the same events, warmed
// in stretches (Warm), gives the same outcomes and a byte-identical
// Snapshot.
func TestLedgerProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := newHarness(t)
		posted := map[string]int{}
		debtors := map[string]bool{}
		var outcomes []Outcome
		n := rapid.IntRange(50, 500).Draw(t, "events")
		for range n {
			if rapid.IntRange(0, 19).Draw(t, "peek") == 0 {
				outcomes = append(outcomes, peekAhead(t, h))
				continue
			}
			e := drawEvent(t, h)
			postings, holds := h.l.postings.len(), h.l.holds.rows.len()
			repeats := h.l.Repeats(e)
			o := h.apply(e)
			e = h.log[len(h.log)-1]
			outcomes = append(outcomes, o)

			booked := h.l.postings.len() - postings
			if repeats && (booked != 0 || h.l.holds.rows.len() != holds) {
				t.Fatalf("Repeats(%s) said taken, yet Apply booked %d postings and %d holds", describe(e), booked, h.l.holds.rows.len()-holds)
			}
			if booked != 0 && (booked != 1 || !o.Posted()) {
				t.Fatalf("Apply(%s) made %d postings, Posted() = %v", describe(e), booked, o.Posted())
			}
			if (o.Status >= 400 || o.Replayed) && (booked != 0 || h.l.holds.rows.len() != holds) {
				t.Fatalf("Apply(%s) = %d replayed=%v, yet booked %d postings and %d holds", describe(e), o.Status, o.Replayed, booked, h.l.holds.rows.len()-holds)
			}
			if o.Posted() {
				key := idempotencyKey(e)
				if posted[key]++; posted[key] > 1 {
					t.Fatalf("Apply(%s) posted %q a second time", describe(e), key)
				}
				if p, ok := e.Payload.(*protocol.CreditAdjust); ok && p.Adjustment.Decimal().Sign() < 0 {
					debtors[e.To] = true
				}
			}
			for _, a := range propAgents {
				v, _ := h.l.Account(a)
				if (v.Balance.Decimal().Sign() < 0 || v.Available.Decimal().Sign() < 0) && !debtors[a] {
					t.Fatalf("after Apply(%s): %s is at %s (available %s) without an adjustment", describe(e), a, v.Balance, v.Available)
				}
			}
			if sum := balancesSum(t, h); !sum.IsZero() {
				t.Fatalf("after Apply(%s): the balances sum to %s", describe(e), sum)
			}
			if len(h.log)%50 == 0 {
				if err := h.l.Check(); err != nil {
					t.Fatalf("after Apply(%s): Check() = %v", describe(e), err)
				}
			}
		}
		if err := h.l.Check(); err != nil {
			t.Fatalf("Check() = %v", err)
		}

		checkReplay(t, h, outcomes)
	})
}

// checkReplay folds h's log again into a fresh ledger, warming each
// stretch before applying it as the runner does (Warm must change
// nothing), and checks every outcome and the final snapshot against the
// live ones.
func checkReplay(t *rapid.T, h *harness, outcomes []Outcome) {
	replay := New(node)
	for start := 0; start < len(h.log); {
		end := min(len(h.log), start+rapid.IntRange(1, 40).Draw(t, "stretch"))
		replay.Warm(h.log[start:end])
		for i := start; i < end; i++ {
			if o := replay.Apply(h.log[i]); !reflect.DeepEqual(o, outcomes[i]) {
				t.Fatalf("replayed Apply(%s) = %+v, want %+v", describe(h.log[i]), o, outcomes[i])
			}
		}
		start = end
	}
	got, err := replay.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sameSnapshot(t, "replay", got, h.snapshot())
}
