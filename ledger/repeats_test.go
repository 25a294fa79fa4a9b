package ledger

import (
	"testing"
	"time"

	"github.com/aglx/ledger/protocol"
)

// TestRepeatsNamesOnlyWhatWasTaken: Repeats is true exactly where Apply
// would answer a message as one already taken, changing nothing: a
// booked transfer's id, an approval's id, a reward's key, a signed
// request's, denial's or offer's name. It is false for a message Apply
// would book or hold: a new id, a refused one, and a transfer whose id
// names an approval only (it settles it). Checked against Apply itself:
// where Repeats says true, Apply makes no posting and no hold.
func TestRepeatsNamesOnlyWhatWasTaken(t *testing.T) {
	signed := func(e Event, name string) Event { e.SignedName = name; return e }
	request := func(name string) Event {
		return signed(Event{From: alice, To: bob, Auth: AuthValid, Payload: &protocol.CreditRequest{RequestedAmount: amt("5")}}, name)
	}
	deny := func(name string) Event {
		return signed(Event{From: bob, To: alice, Auth: AuthValid, Payload: &protocol.CreditDeny{RequestedAmount: amt("5")}}, name)
	}
	for _, tc := range []struct {
		name   string
		before []Event // applied first
		e      Event
		want   bool
	}{
		{"a booked transfer", []Event{transfer(alice, bob, "10", "tx-1", AuthValid)}, transfer(alice, bob, "10", "tx-1", AuthValid), true},
		{"a booked transfer's id, other content", []Event{transfer(alice, bob, "10", "tx-1", AuthValid)}, transfer(alice, bob, "11", "tx-1", AuthValid), true},
		{"a new transfer", []Event{transfer(alice, bob, "10", "tx-1", AuthValid)}, transfer(alice, bob, "10", "tx-2", AuthValid), false},
		{"a refused transfer", []Event{transfer(alice, bob, "1000", "tx-1", AuthValid)}, transfer(alice, bob, "1000", "tx-1", AuthValid), false},
		{"a transfer settling an approval", []Event{approve(alice, bob, "10", "ap-1", t0.Add(time.Hour))}, transfer(alice, bob, "10", "ap-1", AuthValid), false},
		{"an approval", []Event{approve(alice, bob, "10", "ap-1", t0.Add(time.Hour))}, approve(alice, bob, "10", "ap-1", t0.Add(time.Hour)), true},
		{"a new approval", nil, approve(alice, bob, "10", "ap-1", t0.Add(time.Hour)), false},
		{"a reward for a task", []Event{reward(alice, bob, "5", "t-1", AuthValid)}, reward(alice, bob, "5", "t-1", AuthValid), true},
		{"a signed reward", []Event{signed(reward(alice, bob, "5", "", AuthValid), "r1")}, signed(reward(alice, bob, "5", "", AuthValid), "r1"), true},
		{"another signed reward", []Event{signed(reward(alice, bob, "5", "", AuthValid), "r1")}, signed(reward(alice, bob, "5", "", AuthValid), "r2"), false},
		{"an adjustment", []Event{adjustEv(bob, "1", "m-1", "a-1")}, adjustEv(bob, "1", "m-1", "a-1"), true},
		{"a signed request", []Event{request("q1")}, request("q1"), true},
		{"a new signed request", []Event{request("q1")}, request("q2"), false},
		{"a signed denial", []Event{request("q1"), deny("d1")}, deny("d1"), true},
		{"an offer", []Event{assign(alice, bob, "5", "t-9")}, assign(alice, bob, "5", "t-9"), true},
		{"a signed offer without task_id", []Event{signed(assign(alice, bob, "5", ""), "o1")}, signed(assign(alice, bob, "5", ""), "o1"), true},
		{"a new offer", []Event{assign(alice, bob, "5", "t-9")}, assign(alice, bob, "5", "t-10"), false},
		{"a task without credits", nil, assign(alice, bob, "", "t-9"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.apply(mint(alice, "100", "m-1"))
			for _, e := range tc.before {
				h.apply(e)
			}
			if got := h.l.Repeats(tc.e); got != tc.want {
				t.Fatalf("Repeats(%s) = %v, want %v", describe(tc.e), got, tc.want)
			}
			postings, holds := h.l.postings.len(), h.l.holds.rows.len()
			o := h.apply(tc.e)
			if tc.want && (h.l.postings.len() != postings || h.l.holds.rows.len() != holds) {
				t.Fatalf("Repeats said taken, yet Apply made %d postings and %d holds (%d %s)", h.l.postings.len()-postings, h.l.holds.rows.len()-holds, o.Status, o.Reason)
			}
		})
	}
}
