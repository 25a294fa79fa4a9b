package ledger

import (
	"strings"
	"testing"
	"time"

	"github.com/aglx/ledger/protocol"
	"github.com/cockroachdb/apd/v3"
)

// rawAmount builds an Amount that protocol.ParseAmount would refuse, the
// way a careless caller could: the ledger must refuse it too.
func rawAmount(s string) *protocol.Amount {
	a := new(protocol.Amount)
	if _, _, err := a.Decimal().SetString(s); err != nil {
		panic(err)
	}
	return a
}

func withAmount(e Event, a *protocol.Amount) Event {
	p := *e.Payload.(*protocol.CreditTransfer)
	p.Amount = a
	e.Payload = &p
	return e
}

// TestBadInputChangesNothing applies refused events to a ledger with some
// history and checks each gets its status and leaves the Snapshot byte for
// byte as it was.
func TestBadInputChangesNothing(t *testing.T) {
	ok := transfer(alice, bob, "5", "t-new", AuthValid)
	cases := []struct {
		name   string
		ev     Event
		status protocol.Status
		reason string // a part of the reason
	}{
		{"wrong signature", transfer(alice, bob, "5", "t-new", AuthInvalid), 401, "signature"},
		{"forged FROM of the node, unsigned", transfer(node, bob, "5", "t-new", AuthUnsigned), 401, "node's key"},
		{"node URI signed with an agent key", transfer(node, bob, "5", "t-new", AuthValid), 401, "node's key"},
		{"unknown Auth", transfer(alice, bob, "5", "t-new", Auth(9)), 401, "unknown"},
		{"replay with altered amount", transfer(alice, bob, "31", "t-1", AuthValid), 409, "same content"},
		{"replay to another payee", transfer(alice, carol, "30", "t-1", AuthValid), 409, "same content"},
		{"replay of a transfer as an approval", approve(alice, bob, "30", "t-1", time.Time{}), 409, "booked transaction"},
		{"approval id used by another payer", transfer(bob, alice, "1", "a-1", AuthValid), 409, "names an approval"},
		{"adjust from an agent", Event{From: alice, To: bob, Auth: AuthValid, Payload: &protocol.CreditAdjust{TransactionID: "t-1", Adjustment: amt("1"), Reason: "x"}}, 403, "only from the node"},
		{"adjust from the node URI without its key", Event{From: node, To: bob, Auth: AuthValid, Payload: &protocol.CreditAdjust{TransactionID: "t-1", Adjustment: amt("1"), Reason: "x"}}, 403, "node's key"},
		{"adjust of an unknown transaction", adjustEv(bob, "1", "nope", "adj-x"), 404, "no booked transaction"},
		{"adjust of an approval only", adjustEv(bob, "1", "a-1", "adj-y"), 404, "no booked transaction"},
		{"zero adjustment", adjustEv(bob, "0", "t-1", "adj-z"), 400, "must not be zero"},
		{"adjust of the issuance account", adjustEv(node, "1", "t-1", "adj-n"), 400, "same account"},
		{"unknown currency", Event{From: alice, To: bob, Auth: AuthValid, Payload: &protocol.CreditTransfer{Amount: amt("1"), Currency: "EUR", TransactionID: "t-new"}}, 400, "currency"},
		{"missing amount", withAmount(ok, nil), 400, "missing"},
		{"NaN", withAmount(ok, rawAmount("NaN")), 400, "finite"},
		{"Infinity", withAmount(ok, rawAmount("Infinity")), 400, "finite"},
		{"35 digits", withAmount(ok, rawAmount("12345678901234567890123456789012345")), 400, "35 significant digits"},
		{"exponent too large", withAmount(ok, rawAmount("1E+40")), 400, "out of range"},
		{"exponent too small", withAmount(ok, rawAmount("1E-40")), 400, "out of range"},
		{"zero amount", withAmount(ok, amt("0")), 400, "positive"},
		{"negative amount", withAmount(ok, amt("-1")), 400, "positive"},
		{"missing transaction_id", transfer(alice, bob, "5", "", AuthValid), 400, "transaction_id"},
		{"long transaction_id", transfer(alice, bob, "5", strings.Repeat("x", protocol.IDSizeMax+1), AuthValid), 400, "longer"},
		{"to itself", transfer(alice, alice, "5", "t-new", AuthValid), 400, "same account"},
		{"no TO", transfer(alice, "", "5", "t-new", AuthValid), 400, "no TO"},
		{"TO not canonical", transfer(alice, "agent://Eve.local", "5", "t-new", AuthValid), 400, "canonical"},
		{"TO not an address", transfer(alice, "mailto:eve", "5", "t-new", AuthValid), 400, "AGLX address"},
		{"insufficient funds", transfer(alice, bob, "70.01", "t-new", AuthValid), 402, "available"},
		{"payer without an account", transfer(dave, bob, "1", "t-new", AuthValid), 402, "available"},
		{"hold beyond available", approve(alice, carol, "60.01", "a-new", t0.Add(time.Hour)), 402, "available"},
		{"expiry in the past", approve(alice, carol, "1", "a-new", t0.Add(-time.Second)), 400, "expires"},
		{"expiry too far", approve(alice, carol, "1", "a-new", t0.Add(HoldTTLMax+time.Second)), 400, "expires"},
		{"task credits beyond available", assign(alice, carol, "60.01", "job"), 402, "available"},
		{"task credits, bad signature", Event{From: alice, To: carol, Auth: AuthInvalid, Credits: amt("1"), Payload: &protocol.TaskAssign{Task: "x"}}, 401, "signature"},
		{"reward beyond the mentor's funds", reward(bob, carol, "30.5", "job", AuthValid), 402, "available"},
		{"claim with a bad signature", Event{From: bob, To: bob, Auth: AuthInvalid, Payload: &protocol.CreditBalance{Balance: amt("1")}}, 401, "signature"},
	}
	h := newHarness(t)
	h.apply(mint(alice, "100", "m-1"))
	h.apply(transfer(alice, bob, "30", "t-1", AuthValid))
	h.apply(approve(alice, bob, "10", "a-1", t0.Add(2*time.Hour)))
	if got := h.figures(alice); got != "70/60" {
		t.Fatalf("setup: alice = %s, want 70/60", got)
	}
	before := h.snapshot()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := h.apply(c.ev)
			if o.Status != c.status || !strings.Contains(o.Reason, c.reason) {
				t.Errorf("Apply(%s) = %d %q, want %d with %q", describe(c.ev), o.Status, o.Reason, c.status, c.reason)
			}
			sameSnapshot(t, c.name, h.snapshot(), before)
		})
	}
	// A valid transfer after all that still works.
	if o := h.apply(ok); o.Status != 200 {
		t.Fatalf("Apply(valid transfer) = %d %q, want 200", o.Status, o.Reason)
	}
}

// TestNeutralEvents checks that messages the ledger does not handle give
// the zero Outcome and change nothing.
func TestNeutralEvents(t *testing.T) {
	h := newHarness(t)
	h.apply(mint(alice, "10", "m-1"))
	before := h.snapshot()
	for _, e := range []Event{
		{From: alice, To: bob, Auth: AuthValid, Payload: &protocol.Ack{}},
		{From: alice, To: bob, Auth: AuthValid, Payload: &protocol.TaskRetry{OriginalTaskID: "x"}},
		{From: bob, To: alice, Auth: AuthValid, Payload: &protocol.TaskResult{TaskID: "unknown", Status: "SUCCESS"}},
		{From: alice, To: bob, Auth: AuthValid, Payload: nil},
	} {
		if o := h.apply(e); o.Status != 0 {
			t.Errorf("Apply(%s) = %d %q, want the zero Outcome", describe(e), o.Status, o.Reason)
		}
	}
	sameSnapshot(t, "after neutral events", h.snapshot(), before)
}

// TestAmountHelpers pins what checkAmount accepts at the edges.
func TestAmountHelpers(t *testing.T) {
	for _, c := range []struct {
		in   string
		want sign
		ok   bool
	}{
		{"1E+21", positive, true},
		{"1E+22", positive, false},
		{"1E-12", positive, true},
		{"-1E-12", nonZero, true},
		{"1E-13", positive, false},
		{"1E-34", positive, false},
		{"0", anySign, true},
		{"-0", positive, false},
	} {
		var a protocol.Amount
		if _, _, err := a.Decimal().SetString(c.in); err != nil {
			t.Fatal(err)
		}
		if why := checkAmount("amount", &a, c.want); (why == "") != c.ok {
			t.Errorf("checkAmount(%s) = %q, want ok=%v", c.in, why, c.ok)
		}
	}
	var nan protocol.Amount
	nan.Decimal().Form = apd.NaNSignaling
	if why := checkAmount("amount", &nan, anySign); why == "" {
		t.Errorf("checkAmount(sNaN) = ok, want a refusal")
	}
}
