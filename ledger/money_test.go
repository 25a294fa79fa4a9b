package ledger

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aglx/ledger/protocol"
)

// TestPointOnePlusPointTwo checks that 0.1 + 0.2 credits is exactly 0.3,
// as it would not be in binary floating point.
func TestPointOnePlusPointTwo(t *testing.T) {
	h := newHarness(t)
	h.apply(mint(alice, "0.1", "m-1"))
	h.apply(mint(alice, "0.2", "m-2"))
	if got := h.figures(alice); got != "0.3/0.3" {
		t.Fatalf("alice after minting 0.1 and 0.2 = %s, want 0.3/0.3", got)
	}
	// Spending exactly 0.3 leaves exactly nothing, and 0.3 more is refused.
	if o := h.apply(transfer(alice, bob, "0.3", "t-1", AuthValid)); o.Status != 200 || o.Balance.String() != "0.0" {
		t.Fatalf("Apply(alice pays 0.3) = %d %q balance %s, want 200 balance 0.0", o.Status, o.Reason, o.Balance)
	}
	if o := h.apply(transfer(alice, bob, "0.0000000001", "t-2", AuthValid)); o.Status != 402 {
		t.Fatalf("Apply(alice pays 1e-10 from 0) = %d, want 402", o.Status)
	}
}

// TestThirtyDigits checks that an amount with 30 significant digits
// survives posting, queries, history, JSON and a snapshot to the last digit.
func TestThirtyDigits(t *testing.T) {
	const big = "12345678901234567890.1234567891" // 30 significant digits
	h := newHarness(t)
	h.apply(mint(alice, big, "m-1"))
	o := h.apply(transfer(alice, bob, big, "t-1", AuthValid))
	if o.Status != 200 {
		t.Fatalf("Apply(transfer %s) = %d %q, want 200", big, o.Status, o.Reason)
	}
	v, _ := h.l.Account(bob)
	if v.Balance.String() != big || v.EarnedTotal.String() != big {
		t.Errorf("Account(bob) balance %s earned %s, want %s", v.Balance, v.EarnedTotal, big)
	}
	es := h.l.Entries(bob, 0, 10)
	if len(es) != 1 || es[0].Amount.String() != big || es[0].ToBalance.String() != big {
		t.Errorf("Entries(bob) = %+v, want one entry of %s", es, big)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Balance protocol.Amount `json:"balance"`
	}
	if err := json.Unmarshal(b, &back); err != nil || back.Balance.String() != big {
		t.Errorf("JSON round trip of %s = %s (%v), want %s", b, back.Balance.String(), err, big)
	}
	if !strings.Contains(string(b), `"balance":"`+big+`"`) {
		t.Errorf("json.Marshal(view) = %s, want the balance as a JSON string", b)
	}
	if snap := h.snapshot(); strings.Count(string(snap), `"`+big+`"`) < 3 {
		t.Errorf("Snapshot() holds %q fewer than 3 times: %s", big, snap)
	}
}

// TestMaxDigits checks the edge of a figure: the largest amount (22 digits
// before the point, 12 after: 34 in all) is booked, and a mint that would
// take a balance to 10^22 is refused with nothing changed rather than
// rounded. An amount with a digit below 10^-12 is refused as it comes in.
func TestMaxDigits(t *testing.T) {
	h := newHarness(t)
	const largest = "9999999999999999999999.999999999999" // 34 digits
	if o := h.apply(mint(alice, largest, "m-1")); o.Status != 200 {
		t.Fatalf("Apply(mint %s) = %d %q, want 200", largest, o.Status, o.Reason)
	}
	before := h.snapshot()
	o := h.apply(mint(alice, "0.000000000001", "m-2"))
	if o.Status != 400 || !strings.Contains(o.Reason, "would reach 10^22") {
		t.Fatalf("Apply(mint the smallest unit more) = %d %q, want 400 about 10^22", o.Status, o.Reason)
	}
	sameSnapshot(t, "after the refused mint", h.snapshot(), before)

	h2 := newHarness(t)
	h2.apply(mint(alice, "100000000000000000000", "m-1")) // 10^20
	before = h2.snapshot()
	// 10^-13 is below the smallest unit: refused before any arithmetic.
	if o := h2.apply(withAmount(mint(alice, "1", "m-2"), rawAmount("0.0000000000001"))); o.Status != 400 || !strings.Contains(o.Reason, "12 after the decimal point") {
		t.Fatalf("Apply(10^20 + 10^-13) = %d %q, want 400 about the scale", o.Status, o.Reason)
	}
	sameSnapshot(t, "after the refused mint", h2.snapshot(), before)
	if o := h2.apply(mint(alice, "0.000000000001", "m-3")); o.Status != 200 { // 10^20 + 10^-12: 33 digits
		t.Fatalf("Apply(10^20 + 10^-12) = %d %q, want 200", o.Status, o.Reason)
	}
}

// TestDustCannotPoisonAnAccount: a sum keeps the scale of its finer
// operand, so while amounts could have 34 decimals, anyone could send an
// account 10^-34; its totals then kept 34 decimals for ever, and no payment
// of a whole credit could ever be booked to it again, not even after the
// dust was sent back. With at most 12 decimals every figure below 10^22
// fits, whatever scales meet.
func TestDustCannotPoisonAnAccount(t *testing.T) {
	h := newHarness(t)
	h.apply(mint(alice, "100", "m-1"))
	h.apply(mint(carol, "0.5", "m-2"))
	if o := h.apply(transfer(carol, bob, "0.000000000001", "dust", AuthValid)); o.Status != 200 {
		t.Fatalf("dust: %d %s", o.Status, o.Reason)
	}
	for i, amount := range []string{"1", "99", "1e21"} {
		if i == 2 {
			h.apply(mint(alice, "1e21", "m-3"))
		}
		if o := h.apply(transfer(alice, bob, amount, "pay-"+amount, AuthValid)); o.Status != 200 {
			v, _ := h.l.Account(bob)
			t.Fatalf("bob (balance %s, earned %s) cannot be paid %s: %d %s", v.Balance.String(), v.EarnedTotal.String(), amount, o.Status, o.Reason)
		}
	}
}

// TestZeroPrintsAsZero: spending 1e3 credits from a balance of 1e3 leaves
// a zero whose exponent is 3, which apd alone writes "0000". Every figure
// the ledger shows must read back as a number: "0".
func TestZeroPrintsAsZero(t *testing.T) {
	h := newHarness(t)
	h.apply(mint(alice, "1e3", "m-1"))
	o := h.apply(transfer(alice, bob, "1e3", "t-1", AuthValid))
	if o.Status != 200 || o.Balance.String() != "0" {
		t.Fatalf("Apply(alice pays 1e3 of 1e3) = %d %q balance %s, want 200 balance 0", o.Status, o.Reason, o.Balance)
	}
	v, _ := h.l.Account(alice)
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"balance":"0"`) {
		t.Fatalf("json.Marshal(alice) = %s, want a balance of \"0\"", b)
	}
	if o := h.apply(transfer(alice, bob, "1", "t-2", AuthValid)); o.Status != 402 || !strings.Contains(o.Reason, "has 0 credits") {
		t.Fatalf("Apply(alice pays 1 from 0) = %d %q, want 402 naming 0 credits", o.Status, o.Reason)
	}
}
