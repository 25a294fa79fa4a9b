package protocol

import (
	"crypto/ed25519"
	"crypto/rand"
	"strings"
	"testing"
)

// TestHeaderValuesAreTrimmed pins what docs/PROTOCOL.md says of header
// values: Unicode white space around a value is dropped (the separator
// line knows only space, tab and U+00A0), the trimmed value is what the
// node reads and what the signing input holds, and a character that is
// not white space (U+200B, U+FEFF) stays, and makes an address invalid.
func TestHeaderValuesAreTrimmed(t *testing.T) {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, pad string
		trimmed   bool
	}{
		{"space and tab", " \t", true},
		{"no-break space", "\u00a0", true},
		{"next line", "\u0085", true},
		{"em space", "\u2003", true},
		{"ideographic space", "\u3000", true},
		{"zero-width space", "\u200b", false},
		{"byte order mark", "\ufeff", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := "AGLX/1.0 TCP\nFROM: " + tt.pad + "agent://a.local" + tt.pad + "\nTO: agent://b.local\nTYPE: task.cancel\n\n{\"task_id\":\"t\",\"reason\":\"r\"}\n"
			f, err := NewDecoder(strings.NewReader(raw), DecoderOptions{}).Decode()
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if got := f.From() == "agent://a.local"; got != tt.trimmed {
				t.Fatalf("FROM read as %q; trimmed %v, want %v", f.From(), got, tt.trimmed)
			}
			if _, err := Parse(f); (err == nil) != tt.trimmed {
				t.Fatalf("Parse: %v; want an error only where the address keeps the character", err)
			}
			if !tt.trimmed {
				return
			}
			// Signed over the value without the padding, the padded frame
			// verifies as received.
			clean, err := NewDecoder(strings.NewReader(strings.ReplaceAll(raw, tt.pad, "")), DecoderOptions{}).Decode()
			if err != nil {
				t.Fatal(err)
			}
			if err := SignFrame(key, clean); err != nil {
				t.Fatal(err)
			}
			if err := Verify(key.Public(), f.From(), f.To(), f.Type(), f.Value(HeaderCredits), clean.Body); err != nil {
				t.Fatalf("the padded frame with the clean frame's signature: %v", err)
			}
		})
	}
}
