package protocol

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

// The value decoders below read what agents send (a datagram, a signature,
// a public key, an amount). Each must refuse bad input with a protocol
// error, never panic, and what it accepts must round-trip.

// FuzzDecodeDatagram: a datagram decodes to one frame or to a refusal
// with a status, and an accepted frame, encoded again, decodes to the same
// headers and body.
func FuzzDecodeDatagram(f *testing.F) {
	f.Add([]byte("AGLX/1.0 UDP\nFROM: agent://a.local\nTO: broadcast://local\nTYPE: agent.announce\n\n{\"agent_name\": \"a\"}\n"))
	f.Add([]byte("AGLX/1.0 UDP\nFROM: agent://a.local\n\n{}\n\n{}"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := DecodeDatagram(b, DecoderOptions{})
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) || pe.Status == 0 {
				t.Fatalf("refusal without a status: %v", err)
			}
			return
		}
		again, err := DecodeDatagram(AppendFrame(nil, fr), DecoderOptions{})
		if err != nil {
			t.Fatalf("an accepted frame, encoded again, is refused: %v\n%q", err, AppendFrame(nil, fr))
		}
		// The encoder adds CONTENT-LENGTH where the frame had none.
		sent, read := withoutLength(fr.Headers), withoutLength(again.Headers)
		if !bytes.Equal(again.Body, fr.Body) || len(sent) != len(read) {
			t.Fatalf("round trip changed the frame:\n%q\n%q", AppendFrame(nil, fr), AppendFrame(nil, again))
		}
		for i := range sent {
			if sent[i] != read[i] {
				t.Fatalf("header %d: %+v became %+v", i, sent[i], read[i])
			}
		}
	})
}

func withoutLength(hs []Header) []Header {
	var out []Header
	for _, h := range hs {
		if !strings.EqualFold(h.Name, HeaderContentLength) {
			out = append(out, h)
		}
	}
	return out
}

// FuzzParseSignature: an accepted signature names a known algorithm and
// prints back to the text it came from.
func FuzzParseSignature(f *testing.F) {
	f.Add("ed25519:" + hex.EncodeToString(make([]byte, 64)))
	f.Add("rsa-sha256:0f3c9a...")
	f.Add("hmac-sha256:")
	f.Fuzz(func(t *testing.T, s string) {
		alg, sig, err := ParseSignature(s)
		if err != nil {
			if StatusOf(err) != StatusUnauthorized {
				t.Fatalf("refusal %v has status %d, want 401", err, StatusOf(err))
			}
			return
		}
		if alg+":"+hex.EncodeToString(sig) != s {
			t.Fatalf("%q parsed as %s and %x", s, alg, sig)
		}
	})
}

// FuzzParsePublicKey: an accepted key marshals back to a key that parses
// to the same key ID.
func FuzzParsePublicKey(f *testing.F) {
	for _, alg := range []string{KeyEd25519, KeyRSA} {
		k, err := GenerateKey(alg)
		if err != nil {
			f.Fatal(err)
		}
		s, _ := MarshalPublicKey(k.Public())
		f.Add(s)
	}
	f.Add("not base64")
	f.Fuzz(func(t *testing.T, s string) {
		pub, err := ParsePublicKey(s)
		if err != nil {
			return
		}
		m, err := MarshalPublicKey(pub)
		if err != nil {
			t.Fatalf("an accepted key does not marshal: %v", err)
		}
		again, err := ParsePublicKey(m)
		if err != nil || KeyID(again) != KeyID(pub) {
			t.Fatalf("round trip of %q: %v, key IDs %s and %s", s, err, KeyID(pub), KeyID(again))
		}
	})
}

// FuzzParsePrivateKey: the node's key file (--node-key) and aglx's --key
// are read with ParsePrivateKey; whatever the file holds, it returns an
// error or a key, and an accepted key signs a frame that verifies under
// its public key (helper-110: the decoder had table tests only).
func FuzzParsePrivateKey(f *testing.F) {
	for _, alg := range []string{KeyEd25519, KeyRSA} {
		k, err := GenerateKey(alg)
		if err != nil {
			f.Fatal(err)
		}
		b, err := MarshalPrivateKey(k)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"))
	f.Add([]byte("not PEM"))
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := ParsePrivateKey(b)
		if err != nil {
			if k != nil {
				t.Fatalf("a key and an error: %v", err)
			}
			return
		}
		fr := &Frame{Transport: TransportTCP, Body: []byte(`{"task":"analyze"}`), Headers: []Header{
			{Name: HeaderFrom, Value: "agent://a.local"}, {Name: HeaderTo, Value: "agent://b.local"}, {Name: HeaderType, Value: TypeTaskAssign}}}
		if err := SignFrame(k, fr); err != nil {
			t.Fatalf("an accepted key does not sign: %v", err)
		}
		if err := Verify(k.Public(), fr.From(), fr.To(), fr.Type(), "", fr.Body); err != nil {
			t.Fatalf("a frame signed with an accepted key does not verify: %v", err)
		}
	})
}

// FuzzParseAmount: an accepted amount prints as a string that parses to
// the same value, digit for digit.
func FuzzParseAmount(f *testing.F) {
	for _, s := range []string{"0.1", "3", "1e3", "-2.50", "NaN", "1234567890123456789012345678901234", "0.0000001"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAmount(s)
		if err != nil {
			return
		}
		b, err := ParseAmount(a.String())
		if err != nil {
			t.Fatalf("%q parsed, but its printed form %q does not: %v", s, a.String(), err)
		}
		if a.Decimal().Cmp(b.Decimal()) != 0 || a.String() != b.String() {
			t.Fatalf("%q -> %s -> %s", s, a.String(), b.String())
		}
	})
}
