package protocol

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"math/big"
	"regexp"
	"strings"
	"testing"
)

func TestPublicKeyRoundTrip(t *testing.T) {
	_, otherEd, _ := ed25519.GenerateKey(rand.Reader)
	keys := map[string]crypto.PublicKey{
		"rsa":           testRSAKey().Public(),
		"ed25519":       testEd25519Key().Public(),
		"other ed25519": otherEd.Public(),
	}
	idFormat := regexp.MustCompile(`^sha256:[0-9a-f]{32}$`)
	ids := map[string]string{}
	for name, pub := range keys {
		t.Run(name, func(t *testing.T) {
			text, err := MarshalPublicKey(pub)
			if err != nil {
				t.Fatalf("MarshalPublicKey: %v", err)
			}
			got, err := ParsePublicKey(text)
			if err != nil {
				t.Fatalf("ParsePublicKey(%q): %v", text, err)
			}
			if !got.(interface{ Equal(crypto.PublicKey) bool }).Equal(pub) {
				t.Errorf("ParsePublicKey(MarshalPublicKey(k)) = %v, want %v", got, pub)
			}
			id := KeyID(pub)
			if !idFormat.MatchString(id) || KeyID(got) != id {
				t.Errorf("KeyID = %q and %q after a round trip, want one id matching %s", id, KeyID(got), idFormat)
			}
			if prev, dup := ids[id]; dup {
				t.Errorf("KeyID(%s) = KeyID(%s) = %q", name, prev, id)
			}
			ids[id] = name
		})
	}
	t.Run("rsa prefix as in the reference", func(t *testing.T) {
		text, _ := MarshalPublicKey(testRSAKey().Public())
		if !strings.HasPrefix(text, "MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8A") {
			t.Errorf("MarshalPublicKey(RSA-2048) = %q..., want the reference's prefix", text[:32])
		}
	})
}

// TestKeyIDStable pins the id of the fixed test key: a KeyID that changed
// between versions would orphan every key registered under the old one.
func TestKeyIDStable(t *testing.T) {
	const want = "sha256:" + testEd25519KeyIDHex
	if got := KeyID(testEd25519Key().Public()); got != want {
		t.Errorf("KeyID(test key) = %q, want %q", got, want)
	}
	if got := KeyID(nil); got != "" {
		t.Errorf("KeyID(nil) = %q, want \"\"", got)
	}
}

const testEd25519KeyIDHex = "6aabb29d2e5e1f1acb486e677e387bb6"

func TestParsePublicKeyRejects(t *testing.T) {
	marshal := func(pub any) string {
		der, err := x509.MarshalPKIXPublicKey(pub)
		if err != nil {
			t.Fatal(err)
		}
		return base64.StdEncoding.EncodeToString(der)
	}
	weak, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	huge := &rsa.PublicKey{N: new(big.Int).Add(new(big.Int).Lsh(big.NewInt(1), RSAKeyBitsMax), big.NewInt(1)), E: 65537}
	good := marshal(testEd25519Key().Public())
	der, _ := base64.StdEncoding.DecodeString(good)
	ed := func(hexKey string) string { return marshal(ed25519.PublicKey(mustHex(t, hexKey))) }
	tests := []struct{ name, in, reason string }{
		{"empty", "", "empty"},
		{"reference placeholder", "MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8A...", "not base64"},
		{"line break", good[:20] + "\n" + good[20:], "not base64"},
		{"space", good[:20] + " " + good[20:], "not base64"},
		{"URL alphabet", strings.NewReplacer("+", "-", "/", "_").Replace(marshal(testRSAKey().Public())), "not base64"},
		{"padding missing", strings.TrimRight(good, "="), "canonical base64"},
		{"non-zero trailing bits", good[:len(good)-2] + "B=", "canonical base64"},
		{"not DER", base64.StdEncoding.EncodeToString([]byte("not a key")), "SubjectPublicKeyInfo"},
		{"trailing data", base64.StdEncoding.EncodeToString(append(der, 0)), "SubjectPublicKeyInfo"},
		{"ecdsa", marshal(&ec.PublicKey), "ECDSA"},
		{"rsa 1024", marshal(&weak.PublicKey), "at least 2048"},
		{"rsa too large", marshal(huge), "at most 4096"},
		{"too long", strings.Repeat("A", 8192), "longer than"},
		// Ed25519 keys no key generator makes (ed25519PointProblem).
		{"ed25519 identity", ed(weakEd25519Keys["identity"]), "small order"},
		{"ed25519 order 8", ed(weakEd25519Keys["order 8"]), "small order"},
		{"ed25519 off the curve", ed(weakEd25519Keys["off the curve"]), "not a point"},
		{"ed25519 y = p + 3", ed(weakEd25519Keys["y = p + 3"]), "not canonically encoded"},
		{"ed25519 mixed order", ed(weakEd25519Keys["mixed order"]), "small-order component"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParsePublicKey(tt.in)
			pe := wantStatus(t, "ParsePublicKey("+shorten(tt.in)+")", err, StatusBadRequest)
			if got != nil || !strings.Contains(pe.Reason, tt.reason) {
				t.Errorf("ParsePublicKey(%q) = %v, reason %q; want nil and a reason mentioning %q", shorten(tt.in), got, pe.Reason, tt.reason)
			}
		})
	}
}

func TestMarshalPublicKeyRejects(t *testing.T) {
	weak, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]crypto.PublicKey{
		"nil":         nil,
		"rsa 1024":    &weak.PublicKey,
		"ecdsa":       &ec.PublicKey,
		"private key": testEd25519Key(),
		"short ed":    ed25519.PublicKey{1},
		"rsa no N":    &rsa.PublicKey{E: 65537},
		"rsa even E":  &rsa.PublicKey{N: testRSAKey().N, E: 65536},
		// Any odd exponent used to pass; 2^31-1 made a check cost the
		// fold milliseconds (helper-70).
		"rsa E 3":       &rsa.PublicKey{N: testRSAKey().N, E: 3},
		"rsa E 2^31-1":  &rsa.PublicKey{N: testRSAKey().N, E: 1<<31 - 1},
		"rsa 8192 bits": &rsa.PublicKey{N: new(big.Int).SetBit(new(big.Int).SetBit(big.NewInt(0), 8191, 1), 0, 1), E: 65537},
	}
	for name, k := range weakEd25519Keys {
		tests["ed25519 "+name] = ed25519.PublicKey(mustHex(t, k))
	}
	for name, pub := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := MarshalPublicKey(pub)
			wantStatus(t, "MarshalPublicKey("+name+") = "+got, err, StatusBadRequest)
		})
	}
}

// weakEd25519Keys are 32-byte Ed25519 public keys that no key generator
// makes, each refused for its own reason. The small-order and mixed-order
// points are those of the "Taming the many EdDSAs" cases
// (testdata/ed25519/speccheck_cases.json, cases 0 and 2).
var weakEd25519Keys = map[string]string{
	"identity":      "0100000000000000000000000000000000000000000000000000000000000000",
	"order 8":       "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa",
	"off the curve": "0200000000000000000000000000000000000000000000000000000000000000", // y = 2 has no x
	"y = p + 3":     "f0ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", // the point y = 3, written unreduced
	"mixed order":   "f7badec5b8abeaf699583992219b7b223f1df3fbbea919844e3f7c554a43dd43",
}
