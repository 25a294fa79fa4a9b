package protocol

import (
	"crypto"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"fmt"
)

// Bounds on the RSA keys accepted. Below 2048 bits RSA is within reach of a
// determined attacker; above 4096 bits a key only costs the node CPU time
// on every verification without adding safety anyone needs. The public
// exponent must be 65537, what every generator uses: an auth.request
// carries its own key, checked on the fold's one goroutine before anything
// is bound, and with 8192 bits and an exponent of 2^31-1 (any odd number
// was taken, and the modulus need not even be a real one) one frame held
// the fold 3.3 ms, so about 300 a second from one host stopped the node
// (helper-70). At 4096 bits and 65537 a check costs about 0.3 ms.
const (
	RSAKeyBitsMin  = 2048  // bits
	RSAKeyBitsMax  = 4096  // bits
	RSAKeyExponent = 65537 // the only public exponent accepted
)

// publicKeyTextSizeMax bounds the base64 text of a public key before it is
// decoded: an RSA key of RSAKeyBitsMax bits takes about 1,400 bytes.
const publicKeyTextSizeMax = 4096 // bytes

// keyIDHexDigits is how much of the SHA-256 a KeyID shows: 32 hex digits,
// 128 bits, so that no one can make a second key with the same id.
const keyIDHexDigits = 32

// ParsePublicKey reads a public key as the reference writes it
// (auth.request, key.rotate): the standard base64 of a DER
// SubjectPublicKeyInfo. It accepts RSA keys of RSAKeyBitsMin to
// RSAKeyBitsMax bits and Ed25519 keys that are canonically encoded points
// of prime order (ed25519PointProblem), the two kinds a signature can be
// verified with; anything else is refused with 400 and a reason. The text
// must be exactly canonical base64, without white space or line breaks, so
// that one key has one text.
func ParsePublicKey(b64 string) (crypto.PublicKey, error) {
	switch {
	case b64 == "":
		return nil, Errorf(StatusBadRequest, "the public key is empty")
	case len(b64) > publicKeyTextSizeMax:
		return nil, Errorf(StatusBadRequest, "the public key is longer than %d bytes", publicKeyTextSizeMax)
	}
	for i := 0; i < len(b64); i++ {
		if !isBase64Byte(b64[i]) {
			return nil, Errorf(StatusBadRequest, "the public key %s is not base64: byte %d is %q", sigQuote(b64), i, b64[i])
		}
	}
	der, err := base64.StdEncoding.Strict().DecodeString(b64)
	if err != nil {
		return nil, Errorf(StatusBadRequest, "the public key %s is not canonical base64 (length or padding)", sigQuote(b64))
	}
	pub, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, Errorf(StatusBadRequest, "the public key is not a DER SubjectPublicKeyInfo: %v", err)
	}
	if reason := keyProblem(pub); reason != "" {
		return nil, Errorf(StatusBadRequest, "the public key is refused: %s", reason)
	}
	return pub, nil
}

func isBase64Byte(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '/' || c == '='
}

// MarshalPublicKey writes a public key the way ParsePublicKey reads it. It
// refuses (400) the keys ParsePublicKey would refuse, so that the node never
// hands out a key it would not accept back.
func MarshalPublicKey(pub crypto.PublicKey) (string, error) {
	if reason := keyProblem(pub); reason != "" {
		return "", Errorf(StatusBadRequest, "the public key is refused: %s", reason)
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", Errorf(StatusBadRequest, "the public key cannot be written: %v", err)
	}
	return base64.StdEncoding.EncodeToString(der), nil
}

// KeyID returns a short, stable name for a public key: "sha256:" followed by
// the first 32 hex digits (128 bits) of the SHA-256 of its DER
// SubjectPublicKeyInfo, e.g. "sha256:3b7f0c...". It is computed from the key
// alone, so every node gives one key the same id, and it is long enough that
// no one can make a second key with the same id. It names keys in logs and
// refusals; it is not a secret and proves nothing by itself. For a key that
// cannot be written as DER it returns "".
func KeyID(pub crypto.PublicKey) string {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(der)
	return "sha256:" + hex.EncodeToString(sum[:])[:keyIDHexDigits]
}

// publicKeyProblem says why pub cannot be used to verify signatures, or ""
// if it can.
func publicKeyProblem(pub crypto.PublicKey) string {
	switch k := pub.(type) {
	case *rsa.PublicKey:
		return rsaKeyProblem(k)
	case ed25519.PublicKey:
		if len(k) != ed25519.PublicKeySize {
			return fmt.Sprintf("the Ed25519 key has %d bytes, not %d", len(k), ed25519.PublicKeySize)
		}
		return ""
	case *ecdsa.PublicKey, *ecdh.PublicKey:
		return "ECDSA and ECDH keys are not supported; use RSA (2048 bits or more) or Ed25519"
	case nil:
		return "there is no key"
	}
	return fmt.Sprintf("keys of type %T are not supported; use RSA (2048 bits or more) or Ed25519", pub)
}

// rsaKeyProblem says why an RSA public key is unusable, or "" if it is not.
func rsaKeyProblem(k *rsa.PublicKey) string {
	if k == nil || k.N == nil || k.N.Sign() <= 0 {
		return "the RSA key has no modulus"
	}
	switch bits := k.N.BitLen(); {
	case bits < RSAKeyBitsMin:
		return fmt.Sprintf("the RSA key has %d bits; at least %d are required", bits, RSAKeyBitsMin)
	case bits > RSAKeyBitsMax:
		return fmt.Sprintf("the RSA key has %d bits; at most %d are accepted", bits, RSAKeyBitsMax)
	}
	if k.E != RSAKeyExponent {
		return fmt.Sprintf("the RSA key's public exponent is %d; only %d is accepted", k.E, RSAKeyExponent)
	}
	return ""
}
