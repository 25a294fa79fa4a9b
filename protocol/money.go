package protocol

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/cockroachdb/apd/v3"
)

// Bounds on an Amount. Together they make every Amount fit the 34-digit
// arithmetic of MoneyContext and keep its plain decimal text (at most 70
// bytes) small, however the sender wrote it: "1e999999" is refused instead of
// becoming a million zeros.
const (
	// AmountDigitsMax bounds the significant digits of an Amount: the digits
	// of its coefficient, trailing zeros included ("1.50" has three). It is
	// the precision of IEEE 754 decimal128 and of MoneyContext, so an Amount
	// always enters the ledger's arithmetic without rounding.
	AmountDigitsMax = 34 // digits
	// AmountScaleMax bounds the digits after the decimal point, trailing
	// zeros included: no Amount has a digit below 10^-12 (its apd exponent
	// is at least -12). It is the credit's smallest unit. Together with
	// AmountIntegerDigitsMax it makes every figure the ledger books fit in
	// AmountDigitsMax whatever scales meet in a sum, so a sum is refused only
	// when it passes 10^22. With scales up to 34, as until 2026-11-30, a sum
	// keeps its finer operand's scale, and anyone could send an account
	// 10^-34: its totals kept 34 decimals for ever, and the account could
	// never again be paid a whole credit.
	AmountScaleMax = 12 // digits
	// AmountIntegerDigitsMax bounds the digits before the decimal point: an
	// Amount is below 10^22 in magnitude (exponent + digits <= 22).
	AmountIntegerDigitsMax = AmountDigitsMax - AmountScaleMax // digits
	// amountTextSizeMax bounds the text read as one Amount before it is
	// parsed, so that a megabyte of zeros costs nothing. Any Amount within
	// the bounds above can be written in far fewer bytes.
	amountTextSizeMax = 100 // bytes
)

// Amount is an exact decimal quantity of credits: a money value of the
// protocol (amount, balance, adjustment, requested_amount, ...).
//
// It is read from the JSON number's own text, or from a JSON string holding
// such a number, never through float64, because 0.1 credits must stay 0.1
// (AGLX-NOTES.md section 1). Strings are accepted because the node writes
// money as strings and agents may echo them back. Either way the text must
// follow the JSON number grammar: no leading '+', no leading zeros, no hex,
// no NaN or Infinity, and it must lie within AmountDigitsMax,
// AmountScaleMax and AmountIntegerDigitsMax.
//
// Amount is defined on apd.Decimal rather than embedding it, so that none of
// apd's setters or its scientific-notation String leak into the protocol
// type; Decimal gives the ledger the underlying value. Whether an amount must
// be positive is a rule of the payload that holds it, not of Amount.
type Amount apd.Decimal

// ParseAmount reads an Amount from text such as a CREDITS header. It applies
// the same rules as UnmarshalJSON; a refusal is a *Error with
// StatusBadRequest.
func ParseAmount(s string) (*Amount, error) {
	a, why := parseAmount(s)
	if why != "" {
		return nil, Errorf(StatusBadRequest, "amount %s", why)
	}
	return a, nil
}

// NewAmount checks that d is within the bounds of an Amount and returns a
// copy of it as one. The ledger uses it to put a computed value (a balance)
// into a payload it sends.
func NewAmount(d *apd.Decimal) (*Amount, error) {
	a := new(Amount)
	a.Decimal().Set(d)
	if why := a.checkBounds(); why != "" {
		return nil, Errorf(StatusBadRequest, "amount %s %s", quoteValue(d.String()), why)
	}
	return a, nil
}

// MoneyContext returns the arithmetic context for Amounts: 34 digits, with
// Inexact and Rounded trapped, so that any operation that would lose a digit
// fails instead of quietly rounding credits away. Its exponent limits match
// the bounds of Amount: a sum or difference of two Amounts that succeeds is
// itself a valid Amount. Each call returns a new Context, so no caller can
// change another's.
func MoneyContext() *apd.Context {
	return &apd.Context{
		Precision:   AmountDigitsMax,
		MaxExponent: AmountIntegerDigitsMax - 1, // adjusted exponent: below 10^34
		MinExponent: -AmountScaleMax,
		Traps:       apd.DefaultTraps | apd.Inexact | apd.Rounded,
		Rounding:    apd.RoundHalfEven,
	}
}

// Decimal returns a as an *apd.Decimal sharing its storage, for arithmetic
// with MoneyContext.
func (a *Amount) Decimal() *apd.Decimal { return (*apd.Decimal)(a) }

// String returns the exact decimal text of a in plain notation, keeping its
// scale: "97", "1.50", "-1.0". It uses apd's Text('f') rather than
// apd.Decimal.String, which would write 1000 read from "1e3" as "1E+3".
// It has a value receiver, as MarshalJSON has, so that an Amount prints the
// same whether or not it is addressable.
func (a Amount) String() string {
	d := apd.Decimal(a)
	if d.IsZero() {
		// apd writes a zero with a positive exponent as "00" or "0000"
		// (0e1, or 1e3 minus 1e3), which no parser of decimals, ours
		// included, reads back; and a negative zero is zero.
		d.Negative = false
		d.Exponent = min(d.Exponent, 0)
	}
	return d.Text('f')
}

// MarshalJSON writes a as a JSON string holding String(), so that no client
// reads a money value through a binary float.
func (a Amount) MarshalJSON() ([]byte, error) {
	return strconv.AppendQuote(nil, a.String()), nil
}

// UnmarshalJSON reads a JSON number or a JSON string holding one. A JSON null
// leaves a unchanged, as encoding/json does for its own types.
func (a *Amount) UnmarshalJSON(b []byte) error {
	var text string
	switch {
	case len(b) == 0:
		return &valueError{amountNotNumber}
	case string(b) == "null":
		return nil
	case b[0] == '"':
		if err := json.Unmarshal(b, &text); err != nil {
			return &valueError{"must be a number or a string holding one"}
		}
	case b[0] == '-' || b[0] >= '0' && b[0] <= '9':
		text = string(b)
	default:
		return &valueError{amountNotNumber}
	}
	parsed, why := parseAmount(text)
	if why != "" {
		return &valueError{why}
	}
	*a = *parsed
	return nil
}

// amountNotNumber refuses a JSON value that is neither a number nor a string.
const amountNotNumber = "must be a number"

// parseAmount returns the Amount s holds, or why it holds none, phrased to
// follow the name of what was read ("field \"amount\" holds ...").
func parseAmount(s string) (*Amount, string) {
	if s == "" {
		return nil, `is empty; expected a decimal number such as "1.5"`
	}
	if len(s) > amountTextSizeMax {
		return nil, "is longer than " + strconv.Itoa(amountTextSizeMax) + " bytes; no amount needs that many"
	}
	if why := checkNumberSyntax(s); why != "" {
		return nil, amountHeld(s, why)
	}
	a := new(Amount)
	if _, _, err := a.Decimal().SetString(s); err != nil {
		return nil, amountHeld(s, amountRange)
	}
	if why := a.checkBounds(); why != "" {
		return nil, amountHeld(s, why)
	}
	return a, ""
}

// amountHeld phrases why s holds no Amount. It is built only for a refusal,
// since quoting s costs more than parsing it.
func amountHeld(s, why string) string { return "holds " + quoteValue(s) + ", which " + why }

var amountRange = "is out of range (an amount has at most " + strconv.Itoa(AmountIntegerDigitsMax) + " digits before and " +
	strconv.Itoa(AmountScaleMax) + " after the decimal point, trailing zeros included)"

// AmountRange says what range an Amount must lie in, for refusals.
func AmountRange() string { return amountRange }

// checkBounds says why a is not a valid Amount, or returns "".
func (a *Amount) checkBounds() string {
	d := a.Decimal()
	if d.Form != apd.Finite {
		return "is not a finite number"
	}
	if n := d.NumDigits(); n > AmountDigitsMax {
		return "has " + strconv.FormatInt(n, 10) + " significant digits; at most " + strconv.Itoa(AmountDigitsMax) + " are allowed"
	}
	if int64(d.Exponent) < -AmountScaleMax || int64(d.Exponent)+d.NumDigits() > AmountIntegerDigitsMax {
		return amountRange
	}
	return ""
}

// checkNumberSyntax checks s against the grammar of a JSON number and says
// what is wrong, or returns "". apd alone would also take "+1", "NaN",
// "Infinity" and "1." as numbers; a JSON number never looks like that, and a
// string holding money should read the same way a number does.
func checkNumberSyntax(s string) string {
	lower := strings.ToLower(strings.TrimPrefix(s, "-"))
	switch {
	case strings.HasPrefix(s, "+"):
		return "is not a decimal number (a leading '+' is not allowed)"
	case strings.HasPrefix(lower, "nan") || strings.HasPrefix(lower, "snan") || strings.HasPrefix(lower, "inf"):
		return "is not a finite number"
	case strings.HasPrefix(lower, "0x"):
		return "is not a decimal number (hexadecimal is not allowed)"
	}
	i := 0
	if s[i] == '-' {
		i++
	}
	digits := func() int {
		start := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i - start
	}
	if i < len(s) && s[i] == '0' {
		i++ // a leading zero stands alone: "007" is not a JSON number
	} else if digits() == 0 {
		return "is not a decimal number"
	}
	if i < len(s) && s[i] == '.' {
		i++
		if digits() == 0 {
			return "is not a decimal number (a digit must follow the '.')"
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			return "is not a decimal number (the exponent has no digits)"
		}
	}
	if i != len(s) {
		return "is not a decimal number"
	}
	return ""
}
