package protocol

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// timestampSizeMax bounds the text read as one Timestamp. The longest RFC
// 3339 time ("2025-10-29T18:22:04.123456789+01:00") has 35 bytes.
const timestampSizeMax = 64 // bytes

// Timestamp is a point in time as an agent wrote it: an RFC 3339 string such
// as "2025-10-29T18:22:04Z".
//
// It keeps the original Text next to the parsed Time because the text is
// what was signed: writing the time back in another valid form ("+00:00" for
// "Z", trimmed fractions) would change the bytes of a message the node
// forwards or stores. The zero Timestamp stands for "absent".
type Timestamp struct {
	time.Time
	// Text is the string as received; MarshalJSON writes it back unchanged.
	// It is empty for a Timestamp built from a time.Time alone, which
	// MarshalJSON then writes in RFC 3339.
	Text string
}

// ParseTimestamp reads an RFC 3339 time. A refusal is a *Error with
// StatusBadRequest.
func ParseTimestamp(s string) (Timestamp, error) {
	t, why := parseTimestamp(s)
	if why != "" {
		return Timestamp{}, Errorf(StatusBadRequest, "timestamp %s", why)
	}
	return t, nil
}

// parseTimestamp returns the Timestamp s holds, or why it holds none,
// phrased to follow the name of what was read.
func parseTimestamp(s string) (Timestamp, string) {
	if len(s) > timestampSizeMax {
		return Timestamp{}, "is longer than " + strconv.Itoa(timestampSizeMax) + " bytes; expected an RFC 3339 time such as \"2025-10-29T18:22:04Z\""
	}
	// RFC 3339 (5.6, note) allows "t" and "z" in lower case; Go's parser
	// does not. The text stays as sent: a signature covers it.
	u := s
	if len(u) > 10 && (u[10] == 't' || u[len(u)-1] == 'z') {
		b := []byte(u)
		if b[10] == 't' {
			b[10] = 'T'
		}
		if b[len(b)-1] == 'z' {
			b[len(b)-1] = 'Z'
		}
		u = string(b)
	}
	t, err := time.Parse(time.RFC3339Nano, u)
	if err != nil || !strictRFC3339(u) {
		return Timestamp{}, "holds " + quoteValue(s) + ", which is not an RFC 3339 time such as \"2025-10-29T18:22:04Z\""
	}
	return Timestamp{Time: t, Text: s}, ""
}

// strictRFC3339 refuses what time.Parse takes but RFC 3339 does not, so that
// a reader in another language agrees with the node: a one-digit hour
// ("T8:22:04Z"), a comma before the fraction ("04,5Z") and offsets of 24
// hours or more ("+24:00"). It is called on text time.Parse has accepted,
// so the offset's digits are digits.
func strictRFC3339(s string) bool {
	if strings.IndexByte(s, ',') >= 0 || len(s) < len("2006-01-02T15:04:05Z") {
		return false
	}
	// Every field of the date and time has its two (or four) digits:
	// time.Parse takes a one-digit hour.
	for i := range len("2006-01-02T15:04:05") {
		switch i {
		case 4, 7:
			if s[i] != '-' {
				return false
			}
		case 10:
		case 13, 16:
			if s[i] != ':' {
				return false
			}
		default:
			if s[i] < '0' || s[i] > '9' {
				return false
			}
		}
	}
	if n := len(s); n >= 6 && (s[n-6] == '+' || s[n-6] == '-') {
		hours := int(s[n-5]-'0')*10 + int(s[n-4]-'0')
		minutes := int(s[n-2]-'0')*10 + int(s[n-1]-'0')
		return hours <= 23 && minutes <= 59
	}
	return true
}

// IsZero reports whether t is absent. It also lets encoding/json's omitzero
// option leave an absent Timestamp out.
func (t Timestamp) IsZero() bool { return t.Text == "" && t.Time.IsZero() }

// String returns the time as it was written, or in RFC 3339 if t was built
// from a time.Time alone.
func (t Timestamp) String() string {
	if t.Text != "" {
		return t.Text
	}
	return t.Time.Format(time.RFC3339Nano)
}

// MarshalJSON writes String() as a JSON string.
func (t Timestamp) MarshalJSON() ([]byte, error) {
	return json.Marshal(t.String())
}

// timestampNotString refuses a JSON value that is not a string.
const timestampNotString = "must be a string holding an RFC 3339 time such as \"2025-10-29T18:22:04Z\""

// UnmarshalJSON reads an RFC 3339 time from a JSON string. A JSON null leaves
// t unchanged, as encoding/json does for its own types.
func (t *Timestamp) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var s string
	if plain, ok := plainJSONString(b); ok {
		s = plain // the common case, without encoding/json's machinery
	} else if err := json.Unmarshal(b, &s); err != nil {
		return &valueError{timestampNotString}
	}
	parsed, why := parseTimestamp(s)
	if why != "" {
		return &valueError{why}
	}
	*t = parsed
	return nil
}

// plainJSONString returns the text of a JSON string that needs no decoding:
// quoted, and printable ASCII inside without a quote or a backslash. Such a
// string means exactly its bytes, which is what encoding/json would give;
// anything else is left to encoding/json. Every valid timestamp is one.
func plainJSONString(b []byte) (string, bool) {
	n := len(b)
	if n < 2 || b[0] != '"' || b[n-1] != '"' {
		return "", false
	}
	for _, c := range b[1 : n-1] {
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return "", false
		}
	}
	return string(b[1 : n-1]), true
}
