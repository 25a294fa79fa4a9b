package projections

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/aglx/ledger/protocol"
)

// identitySigner "holds" the Ed25519 public key that is the curve's
// identity point, and signs anything with the one signature that
// crypto/ed25519 accepts for it over every message: R = the identity,
// S = 0. No private key exists; anyone can make these signatures.
type identitySigner struct{}

var identityKey = ed25519.PublicKey(append([]byte{1}, make([]byte, 31)...))

func (identitySigner) Public() crypto.PublicKey { return identityKey }
func (identitySigner) Sign(io.Reader, []byte, crypto.SignerOpts) ([]byte, error) {
	return append(append([]byte{1}, make([]byte, 31)...), make([]byte, 32)...), nil
}

// TestWeakEd25519KeyIsRefused binds the identity point as an agent's key
// with a "proof of possession" anyone can forge. crypto/ed25519's rule
// accepts the proof, so the key itself must be refused: otherwise anyone
// could sign value-moving messages as that agent.
func TestWeakEd25519KeyIsRefused(t *testing.T) {
	const carol = "agent://carol.local"
	sig, _ := identitySigner{}.Sign(nil, nil, nil)
	for _, msg := range []string{"", "credit.transfer of everything carol has"} {
		if !ed25519.Verify(identityKey, []byte(msg), sig) {
			t.Fatalf("the premise fails: crypto/ed25519 refuses the forged signature over %q", msg)
		}
	}
	der, err := x509.MarshalPKIXPublicKey(identityKey)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t)
	at := regT0.Add(time.Minute)
	h.register(carol, 3600, regT0)
	before := h.snapshot()
	body := fmt.Sprintf(`{"agent_id":"c","public_key":%q,"timestamp":%q}`, base64.StdEncoding.EncodeToString(der), ts(at))
	// protocol.Sign checks what it signs, and the node's rule refuses keys
	// of small order, so the forger sets the signature by hand.
	f := frame(carol, testNode, protocol.TypeAuthRequest, body)
	if f.Body, err = protocol.SetSignature(f.Body, protocol.AlgEd25519+":"+hex.EncodeToString(sig)); err != nil {
		t.Fatal(err)
	}
	rep := h.mustReply(f, at, protocol.TypeAuthResponse, protocol.StatusBadRequest)
	if !strings.Contains(string(rep.Body), "small order") {
		t.Errorf("the refusal says %s; want it to name the small order", rep.Body)
	}
	if after := h.snapshot(); !bytes.Equal(before, after) {
		t.Errorf("the refused auth.request changed the registry:\nbefore %s\nafter  %s", before, after)
	}
}
