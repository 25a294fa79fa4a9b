package protocol

import (
	"slices"
	"testing"
	"unicode"
	"unicode/utf16"

	"pgregory.net/rapid"
)

// TestCompareUTF16 checks the shortcut that orders keys by their UTF-8
// bytes against JCS's rule, UTF-16 code units, over strings drawn from
// the ranges where the two orders part: ASCII, the BMP below and above
// U+E000, and the supplementary planes.
func TestCompareUTF16(t *testing.T) {
	runes := rapid.OneOf(
		rapid.Rune(), // any rune rapid likes
		rapid.RuneFrom(nil, unicode.Co, unicode.Han, unicode.Latin), // private use (U+E000 on) and wide planes
		rapid.RuneFrom([]rune{'a', 'b', 0x7f, 0x80, 0xd7ff, 0xe000, 0xfb33, 0xffff, 0x10000, 0x1f600, 0x10ffff}),
	)
	str := rapid.Custom(func(t *rapid.T) string {
		return string(rapid.SliceOfN(runes, 0, 6).Draw(t, "runes"))
	})
	rapid.Check(t, func(t *rapid.T) {
		a, b := str.Draw(t, "a"), str.Draw(t, "b")
		want := slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
		if got := compareUTF16([]byte(a), []byte(b)); got != want {
			t.Fatalf("compareUTF16(%q, %q) = %d; by UTF-16 code units %d", a, b, got, want)
		}
	})
}
