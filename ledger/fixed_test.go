package ledger

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aglx/ledger/protocol"
	"github.com/cockroachdb/apd/v3"
	"pgregory.net/rapid"
)

// drawFigure draws a valid Amount of any sign: up to 34 digits, exponent
// -12..21, value below 10^22 (protocol.AmountScaleMax,
// AmountIntegerDigitsMax). Digits cluster at the edges, where the
// arithmetic is hardest.
func drawFigure(t *rapid.T, label string) apd.Decimal {
	for {
		n := rapid.IntRange(1, 34).Draw(t, label+" digits")
		digits := []byte(rapid.StringOfN(rapid.RuneFrom([]rune("0123456789")), n, n, -1).Draw(t, label+" coefficient"))
		if rapid.IntRange(0, 3).Draw(t, label+" nines") == 0 {
			digits = []byte(strings.Repeat("9", n))
		}
		exp := rapid.IntRange(-protocol.AmountScaleMax, protocol.AmountIntegerDigitsMax-1).Draw(t, label+" exponent")
		var d apd.Decimal
		if _, _, err := d.SetString(fmt.Sprintf("%se%d", digits, exp)); err != nil {
			t.Fatalf("SetString: %v", err)
		}
		d.Negative = d.Sign() != 0 && rapid.Bool().Draw(t, label+" negative")
		a := protocol.Amount(d)
		if checkAmount("x", &a, anySign) == "" {
			return d
		}
	}
}

// TestFixedMatchesApd holds fixed to apd: for any two valid figures, the
// sum, difference and comparison in fixed are those of apd in
// protocol.MoneyContext, down to the exponent and the refusals.
func TestFixedMatchesApd(t *testing.T) {
	ctx := protocol.MoneyContext()
	wide := wideContext()
	rapid.Check(t, func(t *rapid.T) {
		x, y := drawFigure(t, "x"), drawFigure(t, "y")
		fx, fy := mustFixed(&x), mustFixed(&y)
		var back apd.Decimal
		if fx.decimal(&back); back.Cmp(&x) != 0 || back.Exponent != x.Exponent || back.Negative != x.Negative {
			t.Fatalf("fixed round trip of %s = %s", x.Text('f'), back.Text('f'))
		}
		for _, sub := range []bool{false, true} {
			var want apd.Decimal
			var err error
			if sub {
				_, err = ctx.Sub(&want, &x, &y)
			} else {
				_, err = ctx.Add(&want, &x, &y)
			}
			got, ok := addMoney(ctx, fx, fy, sub)
			if ok != (err == nil) {
				t.Fatalf("addMoney(%s, %s, sub=%v) ok = %v, apd error = %v", x.Text('f'), y.Text('f'), sub, ok, err)
			}
			if ok {
				var g apd.Decimal
				got.decimal(&g)
				if g.Cmp(&want) != 0 || g.Exponent != want.Exponent || g.Text('f') != want.Text('f') {
					t.Fatalf("addMoney(%s, %s, sub=%v) = %s, apd says %s", x.Text('f'), y.Text('f'), sub, g.Text('f'), want.Text('f'))
				}
			}
		}
		if got, want := cmpFixed(fx, fy), x.Cmp(&y); got != want {
			t.Fatalf("cmpFixed(%s, %s) = %d, apd says %d", x.Text('f'), y.Text('f'), got, want)
		}
		var diff, want apd.Decimal
		diffDecimal(wide, &diff, fx, fy)
		if _, err := wide.Sub(&want, &x, &y); err != nil || diff.Text('f') != want.Text('f') {
			t.Fatalf("diffDecimal(%s, %s) = %s, apd says %s (%v)", x.Text('f'), y.Text('f'), diff.Text('f'), want.Text('f'), err)
		}
	})
}

// TestFixedZero checks that the zero value is apd's zero.
func TestFixedZero(t *testing.T) {
	var z fixed
	if z.text() != "0" || z.exp() != 0 || z.sign() != 0 {
		t.Errorf("fixed{} = %s (exp %d, sign %d), want 0", z.text(), z.exp(), z.sign())
	}
	for _, s := range []string{"-1e-34", "1e33", "0.00", "-9999999999999999999999999999999999e-34"} {
		var d apd.Decimal
		d.SetString(s)
		f := mustFixed(&d)
		if f.text() != d.Text('f') {
			t.Errorf("fixed(%s).text() = %s, want %s", s, f.text(), d.Text('f'))
		}
	}
}
