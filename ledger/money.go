package ledger

import (
	"strconv"

	"github.com/aglx/ledger/protocol"
	"github.com/cockroachdb/apd/v3"
)

// sign is what an amount field requires of its value's sign.
type sign uint8

const (
	anySign  sign = iota // balance claims
	positive             // amount, approved_amount, CREDITS
	nonZero              // adjustment
)

// checkAmount says why a cannot be booked as the field name, or returns "".
//
// The protocol checks the same bounds when it parses a frame; the ledger
// checks again because an Event may be built by any caller, and a figure
// outside the bounds would break the 34-digit arithmetic (TigerStyle: check
// data where it is used, not only where it came in).
func checkAmount(name string, a *protocol.Amount, want sign) string {
	if a == nil {
		return "field " + strconv.Quote(name) + " is missing"
	}
	d := a.Decimal()
	if d.Form != apd.Finite {
		return "field " + strconv.Quote(name) + " is not a finite number"
	}
	n := d.NumDigits()
	if n > protocol.AmountDigitsMax {
		return "field " + strconv.Quote(name) + " has " + strconv.FormatInt(n, 10) +
			" significant digits; at most " + strconv.Itoa(protocol.AmountDigitsMax) + " are allowed"
	}
	if int64(d.Exponent) < -protocol.AmountScaleMax || int64(d.Exponent)+n > protocol.AmountIntegerDigitsMax {
		return "field " + strconv.Quote(name) + " " + protocol.AmountRange()
	}
	switch s := d.Sign(); {
	case want == positive && s <= 0:
		return "field " + strconv.Quote(name) + " must be positive, got " + a.String()
	case want == nonZero && s == 0:
		return "field " + strconv.Quote(name) + " must not be zero"
	}
	return ""
}

// wideContext is the arithmetic of derived figures (available, the sums of
// Check): exact like protocol.MoneyContext, with Inexact and Rounded
// trapped, but with room for any sum or difference of stored figures, so
// that computing one never fails. A stored figure (a balance, a total, a
// pending sum) is always computed in MoneyContext instead, so that it stays
// a valid protocol.Amount.
func wideContext() *apd.Context {
	return &apd.Context{
		Precision:   100, // digits: 1M sums of 34-digit figures need 74
		MaxExponent: 100,
		MinExponent: -100,
		Traps:       apd.DefaultTraps | apd.Inexact | apd.Rounded,
		Rounding:    apd.RoundHalfEven,
	}
}

// tooManyDigits is the reason for refusing a booking whose result is not
// representable: the amount itself is valid, but a figure it would produce
// (a balance, a total) would reach 10^22. Since no figure has a digit
// below 10^-12, every figure under 10^22 fits the 34 digits of
// protocol.MoneyContext, so a booking is never refused for its scale.
var tooManyDigits = "the amount cannot be booked exactly: a resulting figure (a balance or a total) would reach 10^" +
	strconv.Itoa(protocol.AmountIntegerDigitsMax) + ", beyond the " + strconv.Itoa(protocol.AmountDigitsMax) + " significant digits a figure may hold"

// amountOf copies d into an Amount for a view or a reply. It uses Set rather
// than a struct copy so that the two never share a coefficient.
func amountOf(d *apd.Decimal) protocol.Amount {
	var a protocol.Amount
	a.Decimal().Set(d)
	return a
}

// amountOfFixed converts a stored figure for a view or a reply.
func amountOfFixed(f fixed) protocol.Amount {
	var a protocol.Amount
	f.decimal(a.Decimal())
	return a
}

// sameValue reports whether x and y are the same number, whatever their
// scale: 3 and 3.0 are the same amount of credits.
func sameValue(x, y *apd.Decimal) bool { return x.Cmp(y) == 0 }

// available returns the account's balance minus its pending holds: what it
// can spend. It is a derived figure, exact but not bound to 34 digits.
func (l *Ledger) available(a *account) protocol.Amount {
	return l.availableOf(a.balance, a.pending)
}

// availableOf is balance minus pending, as available.
func (l *Ledger) availableOf(balance, pending fixed) protocol.Amount {
	var v protocol.Amount
	diffDecimal(l.wide, v.Decimal(), balance, pending)
	return v
}

// covers reports whether the account's available balance, plus extra (the
// hold a payment settles, or zero), is at least amount. It stays in 128-bit
// arithmetic when it can.
func (l *Ledger) covers(a *account, extra, amount fixed) bool {
	if m, exp, neg, ok := sumMag(a.balance, a.pending, true); ok {
		avail := packFixed(m, exp, neg)
		if m, exp, neg, ok = sumMag(avail, extra, false); ok {
			return cmpFixed(packFixed(m, exp, neg), amount) >= 0
		}
	}
	var avail, d apd.Decimal
	diffDecimal(l.wide, &avail, a.balance, a.pending)
	if _, err := l.wide.Add(&avail, &avail, extra.decimal(&d)); err != nil {
		panic("ledger: available figure plus a hold is not exact: " + err.Error())
	}
	return avail.Cmp(amount.decimal(&d)) >= 0
}
