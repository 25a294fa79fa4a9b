package ledger

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/aglx/ledger/protocol"
	"pgregory.net/rapid"
)

// TestScriptedFlow walks the life of a small network through every message
// the ledger handles and checks the figures after each step: mint,
// transfers, request/approve/settle, expiry by event time, deny, rewards,
// an adjustment after a duplicate payment, debt, task holds, claims and the
// balance query. Figures are "balance/available".
func TestScriptedFlow(t *testing.T) {
	type step struct {
		name     string
		at       time.Duration // event time after t0
		ev       Event
		status   protocol.Status
		replayed bool
		reply    string            // "balance/available" of the reply, if checked
		figures  map[string]string // uri -> "balance/available" after the step
	}
	steps := []step{
		{name: "mint to alice", ev: mint(alice, "100", "m-1"), status: 200, reply: "-100/-100",
			figures: map[string]string{alice: "100/100", node: "-100/-100"}},
		{name: "alice pays bob", ev: transfer(alice, bob, "30", "t-1", AuthValid), status: 200, reply: "70/70",
			figures: map[string]string{alice: "70/70", bob: "30/30"}},
		{name: "resent transfer repeats the reply", at: time.Minute, ev: transfer(alice, bob, "30", "t-1", AuthValid), status: 200, replayed: true, reply: "70/70",
			figures: map[string]string{alice: "70/70", bob: "30/30"}},
		{name: "resent with 30.0 is the same transfer", at: time.Minute, ev: transfer(alice, bob, "30.0", "t-1", AuthValid), status: 200, replayed: true, reply: "70/70"},
		{name: "same id, other amount", ev: transfer(alice, bob, "31", "t-1", AuthValid), status: 409,
			figures: map[string]string{alice: "70/70", bob: "30/30"}},
		{name: "bob asks alice for 20", ev: Event{From: bob, To: alice, Auth: AuthUnsigned, Payload: &protocol.CreditRequest{RequestedAmount: amt("20"), TaskID: "task-7"}}, status: 200},
		{name: "alice approves 20 for an hour", ev: approve(alice, bob, "20", "a-1", t0.Add(time.Hour)), status: 200, reply: "70/50",
			figures: map[string]string{alice: "70/50"}},
		{name: "alice settles 15 of the approval", at: 10 * time.Minute, ev: transfer(alice, bob, "15", "a-1", AuthValid), status: 200, reply: "55/55",
			figures: map[string]string{alice: "55/55", bob: "45/45"}},
		{name: "alice approves 40 for carol", at: 20 * time.Minute, ev: approve(alice, carol, "40", "a-2", t0.Add(2*time.Hour)), status: 200, reply: "55/15"},
		{name: "the hold leaves 15 to spend", at: 30 * time.Minute, ev: transfer(alice, dave, "20", "t-2", AuthValid), status: 402,
			figures: map[string]string{alice: "55/15"}},
		{name: "the approval expires by event time", at: 3 * time.Hour, ev: Event{From: alice, To: node, Auth: AuthValid, Payload: &protocol.CreditBalance{}}, status: 200, reply: "55/55",
			figures: map[string]string{alice: "55/55"}},
		{name: "a transfer on the expired approval needs funds", at: 3 * time.Hour, ev: transfer(alice, carol, "10", "a-2", AuthValid), status: 200, reply: "45/45",
			figures: map[string]string{carol: "10/10"}},
		{name: "carol asks bob", at: 3 * time.Hour, ev: Event{From: carol, To: bob, Auth: AuthValid, Payload: &protocol.CreditRequest{RequestedAmount: amt("5")}}, status: 200},
		{name: "bob denies", at: 3 * time.Hour, ev: Event{From: bob, To: carol, Auth: AuthValid, Payload: &protocol.CreditDeny{RequestedAmount: amt("5"), Reason: "busy"}}, status: 200,
			figures: map[string]string{bob: "45/45", carol: "10/10"}},
		{name: "the node rewards bob", at: 3 * time.Hour, ev: reward(node, bob, "5", "task-7", AuthNode), status: 200, reply: "-105/-105",
			figures: map[string]string{bob: "50/50", node: "-105/-105"}},
		{name: "the reward is booked once", at: 4 * time.Hour, ev: reward(node, bob, "5", "task-7", AuthNode), status: 200, replayed: true, reply: "-105/-105",
			figures: map[string]string{bob: "50/50"}},
		{name: "mentor bob rewards carol from his balance", at: 4 * time.Hour, ev: reward(bob, carol, "2.5", "task-8", AuthValid), status: 200, reply: "47.5/47.5",
			figures: map[string]string{carol: "12.5/12.5"}},
		{name: "alice pays dave", at: 5 * time.Hour, ev: transfer(alice, dave, "10", "t-3", AuthValid), status: 200, reply: "35/35"},
		{name: "alice pays dave again by mistake", at: 5 * time.Hour, ev: transfer(alice, dave, "10", "t-4", AuthValid), status: 200, reply: "25/25",
			figures: map[string]string{dave: "20/20"}},
		{name: "dave spends some", at: 5 * time.Hour, ev: transfer(dave, carol, "15", "t-5", AuthValid), status: 200, reply: "5/5"},
		{name: "an agent cannot adjust", at: 6 * time.Hour, ev: Event{From: bob, To: dave, Auth: AuthValid, MessageID: "x", Payload: &protocol.CreditAdjust{TransactionID: "t-4", Adjustment: amt("-10"), Reason: "mine"}}, status: 403},
		{name: "the node takes the duplicate back from dave", at: 6 * time.Hour, ev: adjustEv(dave, "-10", "t-4", "adj-1"), status: 200, reply: "-95/-95",
			figures: map[string]string{dave: "-5/-5", node: "-95/-95"}},
		{name: "and refunds alice", at: 6 * time.Hour, ev: adjustEv(alice, "10", "t-4", "adj-2"), status: 200, reply: "-105/-105",
			figures: map[string]string{alice: "35/35", node: "-105/-105"}},
		{name: "a resent adjustment is booked once", at: 7 * time.Hour, ev: adjustEv(dave, "-10", "t-4", "adj-1"), status: 200, replayed: true, reply: "-95/-95",
			figures: map[string]string{dave: "-5/-5"}},
		{name: "an adjustment of nothing booked", at: 7 * time.Hour, ev: adjustEv(dave, "1", "t-404", "adj-3"), status: 404},
		{name: "dave in debt cannot spend", at: 7 * time.Hour, ev: transfer(dave, carol, "1", "t-6", AuthValid), status: 402},
		{name: "dave is paid", at: 7 * time.Hour, ev: transfer(carol, dave, "6", "t-7", AuthValid), status: 200,
			figures: map[string]string{dave: "1/1"}},
		{name: "and can spend again", at: 7 * time.Hour, ev: transfer(dave, carol, "1", "t-6", AuthValid), status: 200, reply: "0/0"},
		{name: "alice assigns a task with 10 credits", at: 8 * time.Hour, ev: assign(alice, bob, "10", "job-1"), status: 200, reply: "35/25",
			figures: map[string]string{alice: "35/25"}},
		{name: "a task without credits is not the ledger's", at: 8 * time.Hour, ev: assign(alice, bob, "", "job-2"), status: 0},
		{name: "the worker's result releases the hold", at: 9 * time.Hour, ev: Event{From: bob, To: alice, Auth: AuthValid, Payload: &protocol.TaskResult{TaskID: "job-1", Status: "SUCCESS"}}, status: 200,
			figures: map[string]string{alice: "35/35"}},
		{name: "payment stays a transfer", at: 9 * time.Hour, ev: transfer(alice, bob, "10", "pay-job-1", AuthValid), status: 200, reply: "25/25"},
		{name: "a task hold lapses after TaskHoldTTL", at: 10 * time.Hour, ev: assign(alice, carol, "5", ""), status: 200, reply: "25/20"},
		{name: "before the deadline it holds", at: 10*time.Hour + TaskHoldTTL - time.Second, ev: Event{From: alice, To: node, Auth: AuthValid, Payload: &protocol.CreditBalance{}}, status: 200, reply: "25/20"},
		{name: "at the deadline it is gone", at: 10*time.Hour + TaskHoldTTL, ev: Event{From: alice, To: node, Auth: AuthValid, Payload: &protocol.CreditBalance{}}, status: 200, reply: "25/25"},
		{name: "bob confirms what he got", at: 40 * time.Hour, ev: Event{From: bob, To: alice, Auth: AuthValid, Payload: &protocol.CreditReceived{TransactionID: "t-1", Amount: amt("30"), Balance: amt("30.00")}}, status: 200},
		{name: "bob claims a balance the ledger does not have", at: 40 * time.Hour, ev: Event{From: bob, To: bob, Auth: AuthValid, Payload: &protocol.CreditBalance{Balance: amt("99"), SpentTotal: amt("2.50"), EarnedTotal: amt("3")}}, status: 200},
	}
	h := newHarness(t)
	for _, s := range steps {
		s.ev.Time = t0.Add(s.at)
		o := h.apply(s.ev)
		if o.Status != s.status || o.Replayed != s.replayed {
			t.Fatalf("%s: Apply(%s) = %d %q (replayed %v), want %d (replayed %v)", s.name, describe(s.ev), o.Status, o.Reason, o.Replayed, s.status, s.replayed)
		}
		if s.reply != "" {
			if got := o.Balance.String() + "/" + o.Available.String(); got != s.reply {
				t.Errorf("%s: reply figures = %s, want %s", s.name, got, s.reply)
			}
		}
		for uri, want := range s.figures {
			if got := h.figures(uri); got != want {
				t.Errorf("%s: %s = %s, want %s", s.name, uri, got, want)
			}
		}
		if err := h.l.Check(); err != nil {
			t.Fatalf("%s: Check() = %v", s.name, err)
		}
	}

	// The approval was settled once, the expired one released.
	if got := len(h.l.Holds(alice)); got != 0 {
		t.Errorf("Holds(alice) has %d live holds, want 0", got)
	}
	// The credit.request of step 6 was approved, carol's denied.
	reqs := h.l.Requests(0, 10)
	if len(reqs) != 2 || reqs[0].State != requestApproved || reqs[0].TransactionID != "a-1" || reqs[1].State != requestDenied {
		t.Errorf("Requests(0, 10) = %+v, want bob's approved as a-1 and carol's denied", reqs)
	}
	// bob's credit.received agrees; his credit.balance claim does not.
	mm := h.l.Mismatches(0, 10)
	if len(mm) != 2 || mm[0].Field != "balance" || mm[0].Claimed != "99" || mm[1].Field != "earned_total" || mm[1].Ledger != "60" {
		t.Errorf("Mismatches(0, 10) = %+v, want balance and earned_total of bob (spent 2.50 is right)", mm)
	}
	// The history of dave shows the adjustment with its running balance.
	es := h.l.Entries(dave, 0, 100)
	if len(es) != 6 || es[3].Kind != "adjust" || es[3].FromBalance.String() != "-5" || es[3].TransactionID != "t-4" {
		t.Errorf("Entries(dave) = %+v, want 6 postings, the 4th the adjustment to -5", es)
	}
	if page := h.l.Entries(dave, es[1].Seq, 2); len(page) != 2 || page[0].Seq != es[2].Seq {
		t.Errorf("Entries(dave, %d, 2) = %+v, want entries 3 and 4", es[1].Seq, page)
	}
}

// TestBalanceQuery checks that an empty credit.balance to the node is
// answered with the sender's figures, and one to anyone else is not.
func TestBalanceQuery(t *testing.T) {
	h := newHarness(t)
	h.apply(mint(alice, "12.50", "m-1"))
	h.apply(approve(alice, bob, "2.5", "a-1", t0.Add(time.Hour)))
	o := h.apply(Event{From: alice, To: node, Auth: AuthUnsigned, Payload: &protocol.CreditBalance{}})
	if o.Status != 200 || o.View == nil {
		t.Fatalf("Apply(balance query) = %+v, want 200 with a View", o)
	}
	v := o.View
	if v.Balance.String() != "12.50" || v.Available.String() != "10.00" || v.Pending.String() != "2.5" || v.EarnedTotal.String() != "12.50" || v.SpentTotal.String() != "0" {
		t.Errorf("View = %+v, want balance 12.50, available 10.00, pending 2.5", v)
	}
	if o := h.apply(Event{From: alice, To: alice, Auth: AuthUnsigned, Payload: &protocol.CreditBalance{}}); o.View != nil {
		t.Errorf("Apply(empty balance to itself).View = %+v, want nil", o.View)
	}
	// As of a later time the hold has lapsed, though no event says so yet.
	later, _ := h.l.AccountAt(alice, t0.Add(2*time.Hour))
	if later.Available.String() != "12.50" || later.Pending.String() != "0.0" || !later.Updated.Equal(t0.Add(time.Hour)) {
		t.Errorf("AccountAt(alice, +2h) = %+v, want all 12.50 available, updated at the expiry", later)
	}
	now, _ := h.l.Account(alice)
	if now.Available.String() != "10.00" {
		t.Errorf("Account(alice).Available = %s, want 10.00 until an event passes the expiry", now.Available)
	}
}

// TestEntriesPaging pages through a history long enough to span several
// blocks of the entry list and its tail.
func TestEntriesPaging(t *testing.T) {
	h := newHarness(t)
	const n = 3*entryBlockSize + 4
	var seqs []uint64
	for i := range n {
		h.apply(mint(alice, "1", fmt.Sprintf("m-%d", i)))
		h.apply(mint(bob, "1", fmt.Sprintf("b-%d", i))) // interleaved, so alice's seqs have gaps
		seqs = append(seqs, h.seq-1)
	}
	var got []uint64
	for after := uint64(0); ; {
		page := h.l.Entries(alice, after, 4)
		if len(page) == 0 {
			break
		}
		if len(page) > 4 {
			t.Fatalf("Entries(alice, %d, 4) returned %d entries", after, len(page))
		}
		for _, e := range page {
			got = append(got, e.Seq)
		}
		after = page[len(page)-1].Seq
	}
	if !slices.Equal(got, seqs) {
		t.Errorf("paged Entries(alice) seqs = %v, want %v", got, seqs)
	}
	if es := h.l.Entries(alice, seqs[n-2], 100); len(es) != 1 || es[0].Seq != seqs[n-1] || es[0].ToBalance.String() != fmt.Sprint(n) {
		t.Errorf("Entries(alice, second to last) = %+v, want the last entry with balance %d", es, n)
	}
	if es := h.l.Entries(carol, 0, 10); es != nil {
		t.Errorf("Entries(carol) = %+v, want nil for an account-less URI", es)
	}
}

// TestApprovalResentAfterExpiry checks that a resent approval gets its
// first reply even once its expiry has passed, and cannot be placed anew.
func TestApprovalResentAfterExpiry(t *testing.T) {
	h := newHarness(t)
	h.apply(mint(alice, "10", "m-1"))
	first := h.apply(approve(alice, bob, "4", "a-1", t0.Add(time.Hour)))
	h.now = t0.Add(2 * time.Hour)
	again := h.apply(approve(alice, bob, "4", "a-1", t0.Add(time.Hour)))
	if !again.Replayed || again.Balance.String() != first.Balance.String() || again.Available.String() != "6" {
		t.Errorf("Apply(resent approval) = %+v, want the first reply (available 6) replayed", again)
	}
	if got := h.figures(alice); got != "10/10" {
		t.Errorf("alice after the expiry and the resend = %s, want 10/10", got)
	}
}

// TestRequestsBounded checks the bound on open requests between a pair.
func TestRequestsBounded(t *testing.T) {
	h := newHarness(t)
	req := Event{From: bob, To: alice, Auth: AuthValid, Payload: &protocol.CreditRequest{RequestedAmount: amt("1")}}
	for range requestsOpenMax {
		if o := h.apply(req); o.Status != 200 {
			t.Fatalf("Apply(request) = %d %q", o.Status, o.Reason)
		}
	}
	if o := h.apply(req); o.Status != protocol.StatusTooManyRequests {
		t.Errorf("Apply(request %d) = %d, want 429", requestsOpenMax+1, o.Status)
	}
	h.apply(Event{From: alice, To: bob, Auth: AuthValid, Payload: &protocol.CreditDeny{RequestedAmount: amt("1"), Reason: "no"}})
	if o := h.apply(req); o.Status != 200 {
		t.Errorf("Apply(request after a denial) = %d, want 200", o.Status)
	}
}

// TestMismatchPagesKeepAClaimWhole: one claim can disagree with the ledger
// on four figures, all under its seq, and the next page starts after the
// last seq shown. A page that ended inside a claim's rows lost the rest of
// them for anyone paging; paging in any page size must show every row.
func TestMismatchPagesKeepAClaimWhole(t *testing.T) {
	h := newHarness(t)
	h.apply(mint(alice, "100", "m-1"))
	for range 3 {
		h.apply(Event{From: alice, To: alice, Auth: AuthValid, Payload: &protocol.CreditBalance{
			Balance: amt("1"), EarnedTotal: amt("2"), SpentTotal: amt("3"), Pending: amt("4"),
		}})
	}
	all := h.l.Mismatches(0, EntriesLimitMax)
	if len(all) != 12 {
		t.Fatalf("want 12 mismatches, got %d", len(all))
	}
	for _, limit := range []int{1, 2, 3, 5, 7} {
		var got []Mismatch
		for after := uint64(0); ; {
			p := h.l.Mismatches(after, limit)
			if len(p) == 0 {
				break
			}
			got = append(got, p...)
			after = p[len(p)-1].Seq
		}
		if len(got) != len(all) {
			t.Errorf("paging by %d showed %d of %d mismatches", limit, len(got), len(all))
		}
	}
}

// TestResentApprovalWithAFarExpiry: a resend's expiry is compared as an
// instant. Compared as Unix nanoseconds, which wrap after the year 2262,
// an expiry 2^64 ns after the first one's read as the same, and the
// changed message got the first reply instead of 409 (helper-80).
func TestResentApprovalWithAFarExpiry(t *testing.T) {
	h := newHarness(t)
	h.apply(mint(alice, "10", "m-1"))
	expires := h.now.Add(time.Hour)
	if o := h.apply(approve(alice, bob, "1", "a-1", expires)); o.Status != protocol.StatusOK {
		t.Fatalf("the approval: %d %s", o.Status, o.Reason)
	}
	wrapped := expires.Add(1 << 62).Add(1 << 62).Add(1 << 62).Add(1 << 62) // 2^64 ns on
	if o := h.apply(approve(alice, bob, "1", "a-1", wrapped)); o.Status != protocol.StatusConflict {
		t.Fatalf("a resend with the expiry moved 2^64 ns: %d %q (replayed %v), want 409", o.Status, o.Reason, o.Replayed)
	}
	if o := h.apply(approve(alice, bob, "1", "a-1", expires)); !o.Replayed {
		t.Fatalf("the same approval again: %d %q, want its first reply", o.Status, o.Reason)
	}
}

// TestEntriesPageDeepInALongHistory: a page of a history long enough to
// have skips (entrySkipEvery blocks apart) starts from the nearest one
// before its place, and holds exactly the postings after it, whatever the
// place and the page size; a ledger restored from its saved state has the
// same skips and pages. A page used to walk the history from its first
// block (helper-135).
func TestEntriesPageDeepInALongHistory(t *testing.T) {
	h := newHarness(t)
	const n = 3*entrySkipEvery*entryBlockSize + 5
	var seqs []uint64
	for i := range n {
		h.apply(mint(alice, "1", fmt.Sprintf("m-%d", i)))
		seqs = append(seqs, h.seq)
		if i%3 == 0 {
			h.apply(mint(bob, "1", fmt.Sprintf("b-%d", i))) // gaps in alice's seqs
		}
	}
	id, _ := h.l.lookup(alice)
	list := &h.l.accounts.get(id).entries
	if got, want := len(h.l.entrySkips[list.first]), (n/entryBlockSize-1)/entrySkipEvery; got != want || want < 2 {
		t.Fatalf("alice's history of %d postings has %d skips; want %d (at least 2)", n, got, want)
	}
	restored := roundTrip(t, h.l)
	if !reflect.DeepEqual(restored.entrySkips, h.l.entrySkips) {
		t.Fatalf("the restored ledger's skips differ from the live one's:\n%v\n%v", restored.entrySkips, h.l.entrySkips)
	}
	rapid.Check(t, func(rt *rapid.T) {
		after := rapid.Uint64Range(0, seqs[n-1]+1).Draw(rt, "after")
		limit := rapid.IntRange(1, EntriesLimitMax).Draw(rt, "limit")
		var want []uint64
		for _, s := range seqs {
			if s > after && len(want) < limit {
				want = append(want, s)
			}
		}
		for name, l := range map[string]*Ledger{"live": h.l, "restored": restored} {
			var got []uint64
			for _, e := range l.Entries(alice, after, limit) {
				got = append(got, e.Seq)
			}
			if !slices.Equal(got, want) {
				rt.Fatalf("%s: Entries(alice, %d, %d) = %v, want %v", name, after, limit, got, want)
			}
		}
	})
}
