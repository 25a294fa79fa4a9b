package ledger

// A posting keeps its event id for ever, and the node names every event
// with a ULID: 26 characters of text, 16 bytes of value. Kept as its value
// in the posting row, a ULID costs 8 bytes more there and 26 fewer in the
// arena (fresh memory costs some 3 ns a byte on this VM). An event id that
// is not a ULID in its canonical spelling (any string is allowed) goes to
// the arena as before. Formatting gives back the canonical text, which is
// the id itself, so nothing anyone reads changes.

// ulidAlphabet is Crockford's base 32, as ULIDs are written.
const ulidAlphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// ulidLen is the length of a ULID's text.
const ulidLen = 26 // characters

// ulidDigit maps a character of ulidAlphabet to its value and any other
// byte to 0xff.
var ulidDigit = func() (t [256]uint8) {
	for i := range t {
		t[i] = 0xff
	}
	for i := range len(ulidAlphabet) {
		t[ulidAlphabet[i]] = uint8(i)
	}
	return t
}()

// eventRef is a posting's event id: the 128 bits of a canonical ULID, or,
// when hi is eventRefString, a strRef in lo. A ULID whose top 64 bits are
// all ones (its time is the year 10889) is stored as a string too.
type eventRef struct{ hi, lo uint64 }

const eventRefString = 1<<64 - 1

// parseULID returns the value of s if s is a ULID in its canonical
// spelling: 26 characters of ulidAlphabet (upper case), the first at most
// '7' so that the value fits 128 bits. Text and value then map one to one.
func parseULID(s string) (hi, lo uint64, ok bool) {
	if len(s) != ulidLen || s[0] > '7' {
		return 0, 0, false
	}
	// Two independent halves: characters 0 to 12 (63 bits) and 13 to 25
	// (65 bits), joined at the end.
	var a, b uint64
	var bad uint8
	for i := range 13 {
		da, db := ulidDigit[s[i]], ulidDigit[s[13+i]]
		bad |= da | db
		a = a<<5 | uint64(da&31)
		b = b<<5 | uint64(db&31)
	}
	if bad&0xe0 != 0 {
		return 0, 0, false
	}
	// b holds 65 bits but kept only its low 64: its top bit is the top
	// bit of character 13.
	top := uint64(ulidDigit[s[13]] >> 4)
	return a<<1 | top, b, true
}

// formatULID returns the canonical text of the ULID with value hi, lo.
func formatULID(hi, lo uint64) string {
	var t [ulidLen]byte
	for i := ulidLen - 1; i >= 0; i-- {
		t[i] = ulidAlphabet[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(t[:])
}

// putEvent stores the event id s for a posting.
func (l *Ledger) putEvent(s string) eventRef {
	if hi, lo, ok := parseULID(s); ok && hi != eventRefString {
		return eventRef{hi, lo}
	}
	return eventRef{eventRefString, uint64(l.strs.put(s))}
}

// eventID returns the event id r names.
func (l *Ledger) eventID(r eventRef) string {
	if r.hi == eventRefString {
		return l.strs.get(strRef(r.lo))
	}
	return formatULID(r.hi, r.lo)
}
