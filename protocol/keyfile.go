package protocol

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
)

// Key algorithms an agent or node key may use.
const (
	KeyEd25519 = "ed25519"
	KeyRSA     = "rsa"
)

// GenerateKey makes a signing key: Ed25519 (the default: small, fast, and
// one verification costs about what an RSA one does) or RSA-2048.
func GenerateKey(alg string) (crypto.Signer, error) {
	switch alg {
	case "", KeyEd25519:
		_, k, err := ed25519.GenerateKey(rand.Reader)
		return k, err
	case KeyRSA:
		return rsa.GenerateKey(rand.Reader, RSAKeyBitsMin)
	}
	return nil, fmt.Errorf("unknown key algorithm %q; want %s or %s", alg, KeyEd25519, KeyRSA)
}

// MarshalPrivateKey writes a key as PKCS #8 PEM, the form openssl and most
// tools read.
func MarshalPrivateKey(k crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// ParsePrivateKey reads a PKCS #8 PEM key of a kind that can sign AGLX
// messages (Ed25519, or RSA of RSAKeyBitsMin bits or more).
func ParsePrivateKey(b []byte) (crypto.Signer, error) {
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, errors.New("no PEM block in the key file")
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("key file: %w", err)
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("key file: %T cannot sign", k)
	}
	if reason := publicKeyProblem(s.Public()); reason != "" {
		return nil, fmt.Errorf("key file: %s", reason)
	}
	return s, nil
}

// SignFrame signs f with key (AGLX-NOTES section 4): over FROM, TO, TYPE
// and CREDITS exactly as they are written in the frame's headers and over the body's
// canonical form, and sets the body's top-level "signature" member.
func SignFrame(key crypto.Signer, f *Frame) error {
	if f.Body == nil {
		f.Body = []byte("{}")
	}
	sig, err := Sign(key, f.From(), f.To(), f.Type(), f.Value(HeaderCredits), f.Body)
	if err != nil {
		return err
	}
	body, err := SetSignature(f.Body, sig)
	if err != nil {
		return err
	}
	f.Body = body
	return nil
}
