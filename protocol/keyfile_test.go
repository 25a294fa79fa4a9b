package protocol

import (
	"bytes"
	"testing"
)

func TestKeyFileAndSignFrame(t *testing.T) {
	for _, alg := range []string{KeyEd25519, KeyRSA} {
		t.Run(alg, func(t *testing.T) {
			k, err := GenerateKey(alg)
			if err != nil {
				t.Fatal(err)
			}
			pemBytes, err := MarshalPrivateKey(k)
			if err != nil {
				t.Fatal(err)
			}
			back, err := ParsePrivateKey(pemBytes)
			if err != nil {
				t.Fatal(err)
			}
			f, err := NewDecoder(bytes.NewReader(referenceFrames(t)["15-credit.transfer.aglx"]), DecoderOptions{}).Decode()
			if err != nil {
				t.Fatal(err)
			}
			if err := SignFrame(back, f); err != nil {
				t.Fatalf("SignFrame: %v", err)
			}
			if err := Verify(k.Public(), f.From(), f.To(), f.Type(), f.Value(HeaderCredits), f.Body); err != nil {
				t.Fatalf("Verify(SignFrame(frame)) = %v", err)
			}
			if _, err := Parse(f); err != nil {
				t.Fatalf("a signed frame no longer parses: %v", err)
			}
			f.Set(HeaderTo, "agent://someone-else.local")
			if err := Verify(k.Public(), f.From(), f.To(), f.Type(), f.Value(HeaderCredits), f.Body); StatusOf(err) != StatusUnauthorized {
				t.Fatalf("Verify after changing TO = %v, want 401", err)
			}
		})
	}
}
