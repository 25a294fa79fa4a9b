package ledger

import (
	"github.com/aglx/ledger/protocol"
	"math/bits"

	"github.com/cockroachdb/apd/v3"
)

// fixed is how the ledger stores a figure: an exact decimal, coefficient ×
// 10^exponent, packed in 16 bytes and free of pointers.
//
// Why not apd.Decimal, which every figure comes from and goes back to? An
// apd.Decimal takes 32 bytes with a pointer in it, and an exact addition in
// it costs some 150 ns; a transfer needs half a dozen. fixed takes half the
// memory, gives the garbage collector nothing to scan, and adds two
// figures in a few nanoseconds with 128-bit integer arithmetic. It computes
// exactly what apd computes in protocol.MoneyContext (same coefficient,
// same exponent, same refusals; TestFixedMatchesApd holds it to that), and
// wherever its fast path cannot decide, it asks apd.
//
// Layout: lo holds the low 64 bits of the coefficient's magnitude; hi holds
// the sign in bit 63, the exponent as a 7-bit two's complement number in
// bits 56 to 62, and the magnitude's bits 64 to 119 in bits 0 to 55. Every
// valid Amount fits: its coefficient is below 10^34 < 2^113 and its
// exponent in -12..21 (protocol.AmountScaleMax, AmountIntegerDigitsMax). Zero is always positive, and the zero value is 0
// with exponent 0, as apd's zero Decimal is.
type fixed struct{ lo, hi uint64 }

const (
	fixedExpMin = -64
	fixedExpMax = 63
	fixedHiMask = 1<<56 - 1 // magnitude bits held in hi
	fixedNeg    = 1 << 63
)

// u128 is an unsigned 128-bit integer: a magnitude.
type u128 struct{ hi, lo uint64 }

// pow10u128[n] is 10^n, for n up to 36 (the largest power below 2^120).
var pow10u128 = func() (p [37]u128) {
	p[0] = u128{lo: 1}
	for n := 1; n < len(p); n++ {
		p[n], _ = p[n-1].mul64(10)
	}
	return p
}()

func (m u128) isZero() bool { return m.hi == 0 && m.lo == 0 }

func (m u128) cmp(n u128) int {
	switch {
	case m.hi != n.hi:
		if m.hi < n.hi {
			return -1
		}
		return 1
	case m.lo != n.lo:
		if m.lo < n.lo {
			return -1
		}
		return 1
	}
	return 0
}

func (m u128) add(n u128) (u128, bool) {
	lo, c := bits.Add64(m.lo, n.lo, 0)
	hi, c := bits.Add64(m.hi, n.hi, c)
	return u128{hi, lo}, c == 0 && hi <= fixedHiMask
}

// sub returns m - n for m >= n.
func (m u128) sub(n u128) u128 {
	lo, b := bits.Sub64(m.lo, n.lo, 0)
	hi, _ := bits.Sub64(m.hi, n.hi, b)
	return u128{hi, lo}
}

// mul64 returns m × k, and whether it stays below 2^120.
func (m u128) mul64(k uint64) (u128, bool) {
	h1, l1 := bits.Mul64(m.lo, k)
	h2, l2 := bits.Mul64(m.hi, k)
	hi, c := bits.Add64(l2, h1, 0)
	return u128{hi, l1}, h2 == 0 && c == 0 && hi <= fixedHiMask
}

// scale returns m × 10^d, and whether it stays below 2^120.
func (m u128) scale(d int) (u128, bool) {
	if m.isZero() {
		return m, true
	}
	if d >= len(pow10u128) {
		return m, false
	}
	for d > 0 {
		k := min(d, 19) // 10^19 < 2^64
		var ok bool
		if m, ok = m.mul64(pow10u128[k].lo); !ok {
			return m, false
		}
		d -= k
	}
	return m, true
}

func packFixed(m u128, exp int, neg bool) fixed {
	hi := m.hi | uint64(exp)&0x7f<<56
	if neg && !m.isZero() {
		hi |= fixedNeg
	}
	return fixed{lo: m.lo, hi: hi}
}

func (f fixed) mag() u128 { return u128{hi: f.hi & fixedHiMask, lo: f.lo} }

// exp sign-extends the 7-bit exponent: the byte's top bit is the sign of
// the figure, so it is shifted out first.
func (f fixed) exp() int     { return int(int8(uint8(f.hi>>56)<<1) >> 1) }
func (f fixed) neg() bool    { return f.hi&fixedNeg != 0 }
func (f fixed) isZero() bool { return f.lo == 0 && f.hi&fixedHiMask == 0 }

func (f fixed) sign() int {
	switch {
	case f.isZero():
		return 0
	case f.neg():
		return -1
	}
	return 1
}

// fixedOf converts d, and reports false if it does not fit: not finite,
// an exponent outside -64..63, or a coefficient of 2^120 or more.
func fixedOf(d *apd.Decimal) (fixed, bool) {
	if d.Form != apd.Finite || d.Exponent < fixedExpMin || d.Exponent > fixedExpMax || d.Coeff.Sign() < 0 {
		return fixed{}, false
	}
	var m u128
	if d.Coeff.IsUint64() {
		m.lo = d.Coeff.Uint64()
	} else {
		var high, low apd.BigInt
		high.Rsh(&d.Coeff, 64)
		if !high.IsUint64() || high.Uint64() > fixedHiMask {
			return fixed{}, false
		}
		low.Lsh(&high, 64)
		low.Sub(&d.Coeff, &low)
		m = u128{hi: high.Uint64(), lo: low.Uint64()}
	}
	return packFixed(m, int(d.Exponent), d.Negative), true
}

// mustFixed converts a figure the ledger has already checked to be a valid
// Amount; failure is a programmer error.
func mustFixed(d *apd.Decimal) fixed {
	f, ok := fixedOf(d)
	if !ok {
		panic("ledger: figure " + d.Text('f') + " does not fit a fixed")
	}
	return f
}

// decimal sets d to f exactly.
func (f fixed) decimal(d *apd.Decimal) *apd.Decimal {
	m := f.mag()
	d.Form, d.Negative, d.Exponent = apd.Finite, f.neg(), int32(f.exp())
	if m.hi == 0 {
		d.Coeff.SetUint64(m.lo)
		return d
	}
	var low apd.BigInt
	low.SetUint64(m.lo)
	d.Coeff.SetUint64(m.hi)
	d.Coeff.Lsh(&d.Coeff, 64)
	d.Coeff.Add(&d.Coeff, &low)
	return d
}

// text is f in plain notation, as protocol.Amount writes it: "1.50",
// "-3", "0.00", and "0" for a zero of a positive exponent (which apd alone
// writes "0000": 1e3 spent from 1e3).
func (f fixed) text() string {
	var d apd.Decimal
	f.decimal(&d)
	return protocol.Amount(d).String()
}

// align returns the magnitudes of x and y at the smaller of their
// exponents, and that exponent; ok is false if one does not fit 2^120.
func align(x, y fixed) (mx, my u128, exp int, ok bool) {
	mx, my = x.mag(), y.mag()
	ex, ey := x.exp(), y.exp()
	switch {
	case ex > ey:
		mx, ok = mx.scale(ex - ey)
		return mx, my, ey, ok
	case ey > ex:
		my, ok = my.scale(ey - ex)
		return mx, my, ex, ok
	}
	return mx, my, ex, true
}

// sumMag adds x and -y (sub) or x and y, exactly: the magnitude, exponent
// and sign of the result, and false if the operands do not align in 2^120
// or the result does not fit.
func sumMag(x, y fixed, sub bool) (u128, int, bool, bool) {
	mx, my, exp, ok := align(x, y)
	if !ok {
		return u128{}, 0, false, false
	}
	nx, ny := x.neg(), y.neg() != sub
	if nx == ny {
		m, ok := mx.add(my)
		return m, exp, nx, ok
	}
	if mx.cmp(my) >= 0 {
		return mx.sub(my), exp, nx, true
	}
	return my.sub(mx), exp, ny, true
}

// moneyLimit reports whether magnitude m at exponent exp is a valid stored
// figure: below 10^AmountIntegerDigitsMax, at most AmountDigitsMax
// significant digits and no digit below 10^-AmountScaleMax, which is what
// protocol.MoneyContext accepts without Rounded, Inexact or Overflow. (The
// exponent of an exact sum is the smaller operand's, never below
// -AmountScaleMax, so within the magnitude bound the digits always fit.)
func moneyLimit(m u128, exp int) bool {
	if exp < -protocol.AmountScaleMax {
		return false
	}
	digits := min(protocol.AmountIntegerDigitsMax-exp, protocol.AmountDigitsMax) // the coefficient may have
	return digits > 0 && m.cmp(pow10u128[digits]) < 0
}

// addMoney returns x + y (or x - y if sub) exactly, and false where
// protocol.MoneyContext would refuse: when the result is
// 10^AmountIntegerDigitsMax or more. Operands that do not align in 128
// bits go to apd, which decides.
func addMoney(ctx *apd.Context, x, y fixed, sub bool) (fixed, bool) {
	m, exp, neg, ok := sumMag(x, y, sub)
	if ok {
		if !moneyLimit(m, exp) {
			return fixed{}, false
		}
		return packFixed(m, exp, neg), true
	}
	var dx, dy, r apd.Decimal
	x.decimal(&dx)
	y.decimal(&dy)
	var err error
	if sub {
		_, err = ctx.Sub(&r, &dx, &dy)
	} else {
		_, err = ctx.Add(&r, &dx, &dy)
	}
	if err != nil {
		return fixed{}, false
	}
	return fixedOf(&r)
}

// cmpFixed compares x and y by value.
func cmpFixed(x, y fixed) int {
	sx, sy := x.sign(), y.sign()
	if sx != sy {
		if sx < sy {
			return -1
		}
		return 1
	}
	mx, my, _, ok := align(x, y)
	if !ok {
		var dx, dy apd.Decimal
		return x.decimal(&dx).Cmp(y.decimal(&dy))
	}
	c := mx.cmp(my)
	if sx < 0 {
		return -c
	}
	return c
}

// diffDecimal sets d to x - y exactly, with no limit on digits: the
// arithmetic of derived figures such as available. It stays in 128 bits
// when it can and uses apd's wide context otherwise.
func diffDecimal(wide *apd.Context, d *apd.Decimal, x, y fixed) *apd.Decimal {
	if m, exp, neg, ok := sumMag(x, y, true); ok {
		return packFixed(m, exp, neg).decimal(d)
	}
	var dx, dy apd.Decimal
	if _, err := wide.Sub(d, x.decimal(&dx), y.decimal(&dy)); err != nil {
		panic("ledger: a difference of two figures is not exact: " + err.Error())
	}
	return d
}
