package ledger

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

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

// TestExponentFormsAreOneAmount: an amount written with an exponent
// ("1E+3", "5e2", "1.5E+1") is the same amount as its plain spelling for
// every idempotency key and hold, prints in plain notation wherever the
// ledger writes it, and survives a saved state bit for bit (helper-134's
// audit; the property generators draw no positive exponent).
func TestExponentFormsAreOneAmount(t *testing.T) {
	h := newHarness(t)
	steps := []struct {
		name     string
		ev       Event
		status   protocol.Status
		replayed bool
		balance  string // the reply's balance, "" for none
	}{
		{"mint 1E+3", mint(alice, "1E+3", "m-1"), 200, false, "-1000"},
		{"mint again as 1000.0", mint(alice, "1000.0", "m-1"), 200, true, "-1000"},
		{"pay 5e2", transfer(alice, bob, "5e2", "t-1", AuthValid), 200, false, "500"},
		{"pay again as 500", transfer(alice, bob, "500", "t-1", AuthValid), 200, true, "500"},
		{"pay again as 5E+2 to another", transfer(alice, carol, "5E+2", "t-1", AuthValid), 409, false, ""},
		{"approve 1E+2", approve(alice, bob, "1E+2", "a-1", time.Time{}), 200, false, "500"},
		{"approve again as 100.00", approve(alice, bob, "100.00", "a-1", time.Time{}), 200, true, "500"},
		{"offer 1.5E+1", assign(alice, bob, "1.5E+1", "task-1"), 200, false, "500"},
		{"offer again as 15", assign(alice, bob, "15", "task-1"), 200, true, "500"},
		{"settle with less", transfer(alice, bob, "0.5", "a-1", AuthValid), 200, false, "499.5"},
		{"take back 1E+2", adjustEv(alice, "-1E+2", "t-1", "adj-1"), 200, false, "-900"},
		{"take back again as -100", adjustEv(alice, "-100", "t-1", "adj-1"), 200, true, "-900"},
	}
	for _, s := range steps {
		o := h.apply(s.ev)
		if o.Status != s.status || o.Replayed != s.replayed || s.balance != "" && o.Balance.String() != s.balance {
			t.Fatalf("%s: Apply = %d %q replayed=%v balance %s; want %d replayed=%v balance %s",
				s.name, o.Status, o.Reason, o.Replayed, o.Balance.String(), s.status, s.replayed, s.balance)
		}
	}
	if err := h.l.Check(); err != nil {
		t.Fatal(err)
	}
	snap := h.snapshot()
	if bytes.Contains(snap, []byte("E+")) || bytes.Contains(snap, []byte("e+")) {
		t.Fatalf("the snapshot writes an exponent: %s", snap)
	}
	for _, want := range []string{`"amount":"1000"`, `"amount":"500"`, `"amount":"100"`, `"amount":"15"`, `"balance":"399.5"`, `"pending":"15"`} {
		if !bytes.Contains(snap, []byte(want)) {
			t.Fatalf("the snapshot lacks %s: %s", want, snap)
		}
	}
	sameSnapshot(t, "restored", func() []byte { b, _ := roundTrip(t, h.l).Snapshot(); return b }(), snap)
}
