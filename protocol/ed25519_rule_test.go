package protocol

import (
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	voied25519 "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"
)

// stdlibVerdict is the verdict Go's crypto/ed25519 gives, the rule the
// node's check must keep: a log signed before the node moved to
// curve25519-voi must replay to the same verdicts.
func stdlibVerdict(pub, msg, sig []byte) bool {
	if len(pub) != ed25519.PublicKeySize {
		return false
	}
	return ed25519.Verify(ed25519.PublicKey(pub), msg, sig)
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

// TestEd25519RuleMatchesStdlib runs the published edge cases, where
// Ed25519 implementations are known to disagree, through the node's check
// and through crypto/ed25519, and requires the same verdict on each.
func TestEd25519RuleMatchesStdlib(t *testing.T) {
	type vector struct {
		name          string
		pub, sig, msg []byte
	}
	var vectors []vector

	var spec []struct {
		Message   string `json:"message"`
		PublicKey string `json:"pub_key"`
		Signature string `json:"signature"`
	}
	readJSON(t, "../testdata/ed25519/speccheck_cases.json", &spec)
	for i, v := range spec {
		vectors = append(vectors, vector{fmt.Sprintf("speccheck case %d", i),
			mustHex(t, v.PublicKey), mustHex(t, v.Signature), mustHex(t, v.Message)})
	}
	var zip215 [][2]string
	readJSON(t, "../testdata/ed25519/zip215.json", &zip215)
	for _, v := range zip215 {
		vectors = append(vectors, vector{"zip215 A " + v[0][:8] + " sig " + v[1][:8], mustHex(t, v[0]), mustHex(t, v[1]), []byte("Zcash")})
	}
	if len(vectors) != 12+196 {
		t.Fatalf("read %d vectors, want 208", len(vectors))
	}
	accepted := 0
	for _, v := range vectors {
		want := stdlibVerdict(v.pub, v.msg, v.sig)
		if got := verifyWith(ed25519.PublicKey(v.pub), v.msg, v.sig); got != want {
			t.Errorf("%s: the node's check says %v, crypto/ed25519 says %v", v.name, got, want)
		}
		if want {
			accepted++
		}
	}
	// The vectors are only a test of the rule if both verdicts occur.
	if accepted == 0 || accepted == len(vectors) {
		t.Fatalf("crypto/ed25519 accepted %d of %d vectors; the set no longer tells the rules apart", accepted, len(vectors))
	}
}

// TestEd25519RulesAreTheStdlibPreset: the flags the node writes out are
// voi's own preset for crypto/ed25519's rule.
func TestEd25519RulesAreTheStdlibPreset(t *testing.T) {
	if got, want := *ed25519Rules.Verify, *voied25519.VerifyOptionsStdLib; got != want {
		t.Fatalf("the node's Ed25519 rule is %+v; voi's crypto/ed25519 preset is %+v", got, want)
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// FuzzEd25519MatchesStdlib signs a message with a key from the fuzzer's
// seed, lets the fuzzer flip bits of the signature, the key and the
// message, and requires the node's check and crypto/ed25519 to agree on
// every result, including panics: neither may panic.
func FuzzEd25519MatchesStdlib(f *testing.F) {
	f.Add([]byte("seed"), []byte("msg"), []byte{}, []byte{}, []byte{})
	f.Add([]byte{1}, []byte(""), []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10}, []byte{}, []byte{})
	f.Add([]byte{2}, []byte("x"), []byte{1}, []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80}, []byte{1})
	// A 33-byte key: crypto/ed25519 and voi both panic on it; the node's
	// check must say no instead.
	f.Add([]byte{3}, []byte("y"), []byte{}, make([]byte, 33), []byte{})
	f.Fuzz(func(t *testing.T, seed, msg, sigMask, pubMask, msgMask []byte) {
		var s [ed25519.SeedSize]byte
		copy(s[:], seed)
		priv := ed25519.NewKeyFromSeed(s[:])
		sig := ed25519.Sign(priv, msg)
		pub := []byte(priv.Public().(ed25519.PublicKey))
		xor := func(b, mask []byte) []byte {
			out := append([]byte(nil), b...)
			for i, m := range mask {
				if i < len(out) {
					out[i] ^= m
				} else {
					out = append(out, m) // a longer mask makes a longer value
				}
			}
			return out
		}
		sig, pub, msg = xor(sig, sigMask), xor(pub, pubMask), xor(msg, msgMask)
		want := stdlibVerdict(pub, msg, sig)
		if got := verifyWith(ed25519.PublicKey(pub), msg, sig); got != want {
			t.Fatalf("pub %x msg %x sig %x: the node's check says %v, crypto/ed25519 says %v", pub, msg, sig, got, want)
		}
	})
}
