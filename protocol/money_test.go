package protocol

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/cockroachdb/apd/v3"
)

func mustAmount(t *testing.T, s string) *Amount {
	t.Helper()
	a, err := ParseAmount(s)
	if err != nil {
		t.Fatalf("ParseAmount(%q) = %v", s, err)
	}
	return a
}

func TestParseAmount(t *testing.T) {
	tests := []struct {
		in, want string // want is String(): plain notation, scale kept
	}{
		{"0", "0"},
		{"3", "3"},
		{"97.5", "97.5"},
		{"-1.0", "-1.0"},
		{"1.50", "1.50"},
		{"0.1", "0.1"},
		{"1e3", "1000"},
		{"1E+3", "1000"},
		{"25E-1", "2.5"},
		{"1.5e-3", "0.0015"},
		{"-0", "0"},       // a negative zero is zero
		{"-0.00", "0.00"}, // with its scale
		{"0e1", "0"},      // apd alone writes "00", which reads back as nothing
		{"0E+3", "0"},
		{"0.000000000001", "0.000000000001"}, // 10^-12, the smallest unit
		{strings.Repeat("9", 22), strings.Repeat("9", 22)},                             // below 10^22
		{"1234567890123456789012.345678901234", "1234567890123456789012.345678901234"}, // 34 digits
		{"0.0000000000000001e4", "0.000000000001"},                                     // scale 12 after the exponent
		{"1.000000000000", "1.000000000000"},                                           // trailing zeros within the scale
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			a, err := ParseAmount(tt.in)
			if err != nil || a.String() != tt.want {
				t.Fatalf("ParseAmount(%q) = %v, %v, want %s", tt.in, a, err, tt.want)
			}
		})
	}
}

func TestParseAmountRejects(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"", "is empty"},
		{"+1", "a leading '+' is not allowed"},
		{"NaN", "is not a finite number"},
		{"nan", "is not a finite number"},
		{"-NaN", "is not a finite number"},
		{"sNaN", "is not a finite number"},
		{"Infinity", "is not a finite number"},
		{"-Infinity", "is not a finite number"},
		{"inf", "is not a finite number"},
		{"0x10", "hexadecimal is not allowed"},
		{"0X1F", "hexadecimal is not allowed"},
		{"1e999999", "is out of range"},
		{"1e99999999999", "is out of range"},
		{"1e-999999", "is out of range"},
		{"1e22", "is out of range"},
		{"1e-13", "is out of range"},
		{"0e-13", "is out of range"},
		{"1e-34", "at most 22 digits before and 12 after the decimal point"},
		{"1.0000000000000", "trailing zeros included"}, // 13 decimals, though it is 1
		{strings.Repeat("9", 23), "is out of range"},
		{strings.Repeat("1", 35), "has 35 significant digits; at most 34 are allowed"},
		{"1." + strings.Repeat("0", 34), "has 35 significant digits"},
		{strings.Repeat("0", 101), "longer than 100 bytes"},
		{"1.", "a digit must follow the '.'"},
		{".5", "is not a decimal number"},
		{"01", "is not a decimal number"},
		{"-", "is not a decimal number"},
		{"1e", "the exponent has no digits"},
		{"1e+", "the exponent has no digits"},
		{" 1", "is not a decimal number"},
		{"1 ", "is not a decimal number"},
		{"1,5", "is not a decimal number"},
		{"1_000", "is not a decimal number"},
		{"٣", "is not a decimal number"}, // an Arabic-Indic digit
		{"--1", "is not a decimal number"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			a, err := ParseAmount(tt.in)
			var e *Error
			if !errors.As(err, &e) || e.Status != StatusBadRequest || !strings.Contains(e.Reason, tt.want) {
				t.Fatalf("ParseAmount(%q) = %v, %v, want a 400 containing %q", tt.in, a, err, tt.want)
			}
		})
	}
}

func TestAmountJSON(t *testing.T) {
	tests := []struct {
		in   string // a JSON value
		want string // the JSON MarshalJSON writes back
	}{
		{`3`, `"3"`},
		{`97.5`, `"97.5"`},
		{`"97.5"`, `"97.5"`},
		{`-1.0`, `"-1.0"`},
		{`"-1.0"`, `"-1.0"`},
		{`1e2`, `"100"`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var a Amount
			if err := json.Unmarshal([]byte(tt.in), &a); err != nil {
				t.Fatalf("json.Unmarshal(%s) = %v", tt.in, err)
			}
			out, err := json.Marshal(a)
			if err != nil || string(out) != tt.want {
				t.Errorf("json.Marshal(Unmarshal(%s)) = %s, %v, want %s", tt.in, out, err, tt.want)
			}
		})
	}
}

func TestAmountJSONRejects(t *testing.T) {
	for _, in := range []string{`true`, `{}`, `[1]`, `"NaN"`, `"Infinity"`, `"abc"`, `""`, `"+1"`, `1e999999`} {
		t.Run(in, func(t *testing.T) {
			var a Amount
			err := json.Unmarshal([]byte(in), &a)
			if StatusOf(err) != StatusBadRequest {
				t.Errorf("json.Unmarshal(%s) = %v, want a 400", in, err)
			}
		})
	}
	// null leaves the value alone, as encoding/json does for its own types.
	a := *mustAmount(t, "5")
	if err := json.Unmarshal([]byte(`null`), &a); err != nil || a.String() != "5" {
		t.Errorf("json.Unmarshal(null) = %v, left %s, want 5 untouched", err, a.String())
	}
}

// TestAmountMarshalsAsString covers both ways an Amount sits in a struct.
func TestAmountMarshalsAsString(t *testing.T) {
	v := struct {
		P *Amount `json:"p"`
		V Amount  `json:"v"`
	}{P: mustAmount(t, "97.5"), V: *mustAmount(t, "0.10")}
	out, err := json.Marshal(v)
	if want := `{"p":"97.5","v":"0.10"}`; err != nil || string(out) != want {
		t.Errorf("json.Marshal = %s, %v, want %s", out, err, want)
	}
}

// TestAmountThirtyDigitsRoundTrip reads a 30-significant-digit amount, far
// beyond float64's 15 to 17, and writes every digit back.
func TestAmountThirtyDigitsRoundTrip(t *testing.T) {
	const digits = "123456789012345678.901234567891" // 30 significant digits
	for _, in := range []string{digits, `"` + digits + `"`, "-" + digits} {
		t.Run(in, func(t *testing.T) {
			var a Amount
			if err := json.Unmarshal([]byte(in), &a); err != nil {
				t.Fatalf("json.Unmarshal(%s) = %v", in, err)
			}
			if n := a.Decimal().NumDigits(); n != 30 {
				t.Fatalf("json.Unmarshal(%s) has %d digits, want 30", in, n)
			}
			out, err := json.Marshal(a)
			if want := `"` + strings.Trim(in, `"`) + `"`; err != nil || string(out) != want {
				t.Errorf("json.Marshal(Unmarshal(%s)) = %s, %v, want %s", in, out, err, want)
			}
		})
	}
}

func TestMoneyContextIsExact(t *testing.T) {
	ctx := MoneyContext()
	var sum apd.Decimal
	if _, err := ctx.Add(&sum, mustAmount(t, "0.1").Decimal(), mustAmount(t, "0.2").Decimal()); err != nil {
		t.Fatalf("0.1 + 0.2: %v", err)
	}
	if sum.Cmp(mustAmount(t, "0.3").Decimal()) != 0 || sum.Text('f') != "0.3" {
		t.Errorf("0.1 + 0.2 = %s, want exactly 0.3", sum.Text('f'))
	}
	// A sum of two Amounts that succeeds is an Amount.
	if _, err := NewAmount(&sum); err != nil {
		t.Errorf("NewAmount(%s) = %v", sum.Text('f'), err)
	}
}

func TestMoneyContextTraps(t *testing.T) {
	max := strings.Repeat("9", 22) + "." + strings.Repeat("9", 12) // the largest Amount
	tests := []struct {
		name string
		op   func(ctx *apd.Context, d *apd.Decimal) (apd.Condition, error)
	}{
		{"the smallest unit more than the largest Amount", func(ctx *apd.Context, d *apd.Decimal) (apd.Condition, error) {
			return ctx.Add(d, mustAmount(t, max).Decimal(), mustAmount(t, "0.000000000001").Decimal())
		}},
		{"the result is 10^22 or more", func(ctx *apd.Context, d *apd.Decimal) (apd.Condition, error) {
			return ctx.Add(d, mustAmount(t, "9e21").Decimal(), mustAmount(t, "9e21").Decimal())
		}},
		{"one third", func(ctx *apd.Context, d *apd.Decimal) (apd.Condition, error) {
			return ctx.Quo(d, apd.New(1, 0), apd.New(3, 0))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d apd.Decimal
			if cond, err := tt.op(MoneyContext(), &d); err == nil {
				t.Errorf("got %s (%v), want an error", d.Text('f'), cond)
			}
		})
	}
}

func TestNewAmount(t *testing.T) {
	ok := []*apd.Decimal{apd.New(975, -1), apd.New(0, 0), apd.New(-1, 22-1), apd.New(1, -12)}
	for _, d := range ok {
		if a, err := NewAmount(d); err != nil || a.Decimal().Cmp(d) != 0 {
			t.Errorf("NewAmount(%s) = %v, %v", d, a, err)
		}
	}
	bad := []*apd.Decimal{apd.New(1, 22), apd.New(1, -13), apd.New(1, -34), {Form: apd.NaN}, {Form: apd.Infinite}}
	for _, d := range bad {
		if a, err := NewAmount(d); StatusOf(err) != StatusBadRequest {
			t.Errorf("NewAmount(%s) = %v, %v, want a 400", d, a, err)
		}
	}
	// NewAmount copies: changing the source does not change the Amount.
	src := apd.New(5, 0)
	a, _ := NewAmount(src)
	src.SetInt64(7)
	if a.String() != "5" {
		t.Errorf("NewAmount shares storage with its argument: %s", a)
	}
}
