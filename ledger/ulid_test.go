package ledger

import (
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// TestULID holds parseULID and formatULID to the ULID spec's example and
// to a one-to-one map between canonical text and value, and checks that
// no other spelling parses: an event id that is not canonical must go to
// the arena as it is.
func TestULID(t *testing.T) {
	hi, lo, ok := parseULID("01ARZ3NDEKTSV4RRFFQ69G5FAV")
	if !ok || hi != 0x01563e3ab5d3d676 || lo != 0x4c61efb99302bd5b {
		t.Fatalf("parseULID(spec example) = %x %x %v", hi, lo, ok)
	}
	rapid.Check(t, func(t *rapid.T) {
		hi, lo := rapid.Uint64().Draw(t, "hi"), rapid.Uint64().Draw(t, "lo")
		s := formatULID(hi, lo)
		if h, l, ok := parseULID(s); !ok || h != hi || l != lo {
			t.Fatalf("parseULID(formatULID(%x, %x) = %s) = %x %x %v", hi, lo, s, h, l, ok)
		}
		// Any one character changed to something that is not its
		// canonical self must not parse to a value.
		i := rapid.IntRange(0, ulidLen-1).Draw(t, "at")
		c := rapid.Byte().Draw(t, "char")
		if c == s[i] {
			return
		}
		bad := s[:i] + string([]byte{c}) + s[i+1:]
		if h, l, ok := parseULID(bad); ok && formatULID(h, l) != bad {
			t.Fatalf("parseULID(%q) = %x %x, which formats as %s", bad, h, l, formatULID(h, l))
		}
	})
	for _, s := range []string{"", "01ARZ3NDEKTSV4RRFFQ69G5FA", "01ARZ3NDEKTSV4RRFFQ69G5FAVX", "01arz3ndektsv4rrffq69g5fav",
		"81ARZ3NDEKTSV4RRFFQ69G5FAV", "01ARZ3NDEKTSV4RRFFQ69G5FAI", "01ARZ3NDEKTSV4RRFFQ69G5FAU", strings.Repeat("Z", ulidLen)} {
		if _, _, ok := parseULID(s); ok {
			t.Errorf("parseULID(%q) ok", s)
		}
	}
}

// TestEventRef checks that every event id reads back as it was stored:
// ULIDs as values, anything else, and the ULIDs that collide with the
// string marker, in the arena.
func TestEventRef(t *testing.T) {
	l := New(node)
	for _, s := range []string{"01ARZ3NDEKTSV4RRFFQ69G5FAV", "7ZZZZZZZZZZZZZZZZZZZZZZZZZ", "7ZZZZZZZZZZZZZZZZZZZ000001", "01EV00000001", "01arz3ndektsv4rrffq69g5fav", "x"} {
		r := l.putEvent(s)
		if got := l.eventID(r); got != s {
			t.Errorf("eventID(putEvent(%q)) = %q", s, got)
		}
		if _, _, ok := parseULID(s); ok != (r.hi != eventRefString) && !strings.HasPrefix(s, "7ZZZZZZZZZZZZZ") {
			t.Errorf("putEvent(%q) kept as a ULID: %v", s, r.hi != eventRefString)
		}
	}
}
