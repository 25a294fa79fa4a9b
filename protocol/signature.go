package protocol

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	voied25519 "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"
)

// SigContext starts every signing input. It names the scheme and its
// version, so that bytes signed for AGLX can never be taken for a signature
// over anything else, and a later scheme can change the rules without a
// signature of one verifying under the other.
const SigContext = "AGLX-SIG-1\n"

// The signature algorithms, as written before the colon of a signature.
// rsa-sha256 and ed25519 sign with an agent's own key; hmac-sha256 proves
// knowledge of a zone's shared secret (zone.join) and nothing else.
const (
	AlgRSASHA256  = "rsa-sha256"  // RSASSA-PKCS1-v1_5 with SHA-256
	AlgEd25519    = "ed25519"     // Ed25519, RFC 8032, over the whole input
	AlgHMACSHA256 = "hmac-sha256" // HMAC with SHA-256, RFC 2104
)

// HMACSecretSizeMin is the shortest zone secret accepted. One signed
// zone.join is enough to guess a secret offline, so a short one protects
// nothing; 16 bytes (128 bits) puts guessing out of reach.
const HMACSecretSizeMin = 16 // bytes

// sigTextSizeMax bounds a signature's text before it is decoded: the longest
// algorithm name, the colon, and the hex of an RSA signature of the largest
// key accepted.
const sigTextSizeMax = len(AlgHMACSHA256) + 1 + 2*RSAKeyBitsMax/8 // bytes

// sigMemberName is the top-level member that carries a body's signature.
const sigMemberName = "signature"

// memberSpan locates one top-level member in the input: lead is where the
// white space before its key starts (just after '{' or ','), key and val
// are the offsets of the key's opening quote and of the value's first byte,
// keyEnd and valEnd the offsets just after them.
type memberSpan struct {
	lead, key, keyEnd, val, valEnd int
}

// signedBody is what one pass over a body learns besides its canonical form:
// where its signature member is, and enough of its layout for SetSignature
// to add one without disturbing the rest.
type signedBody struct {
	sigFound    bool
	sigIsString bool
	sigValue    string // decoded, when sigIsString
	sig         memberSpan
	last        memberSpan // the member written last in the input
	members     int        // top-level members, the signature included
	close       int        // offset of the top-level '}'
}

// SigningInput returns the bytes a signature covers: SigContext, then FROM,
// TO and TYPE each followed by a line feed, then, if the frame has a
// CREDITS header, "CREDITS: " and its value and a line feed, then
// Canonical(body). The headers are signed too so that a signed body cannot
// be replayed under another sender, addressee, message type or amount: a
// task.assign's CREDITS is the one header that carries money, and unsigned
// it let a worker resend the owner's signed offer of 2 credits as a hold of
// the owner's whole balance. TO is "" where the frame has none
// (agent.announce), credits "" where it has no CREDITS. FROM and TYPE must be present, and no header may
// hold a line break, since a line break would make two different header sets
// give the same input. Refusals are 400s.
func SigningInput(from, to, typ, credits string, body []byte) ([]byte, error) {
	head, headErr := signingHead(from, to, typ, credits, len(body))
	input, _, e := parseSigned(head, body)
	switch {
	case e != nil:
		return nil, e
	case headErr != nil:
		return nil, headErr
	}
	return input, nil
}

// signingHead is the signing input up to the body, in a buffer with room
// for a body of bodyLen bytes, which parseSigned appends in canonical form
// (never longer than the body, less the signature it drops). A refused
// header set gives a fresh buffer with the error, so that the caller can
// still read the body and report its faults first.
func signingHead(from, to, typ, credits string, bodyLen int) ([]byte, *Error) {
	var bad *Error
	switch {
	case from == "":
		bad = Errorf(StatusBadRequest, "a signed message needs a FROM header")
	case typ == "":
		bad = Errorf(StatusBadRequest, "a signed message needs a TYPE header")
	case strings.ContainsAny(from, "\r\n") || strings.ContainsAny(to, "\r\n") || strings.ContainsAny(typ, "\r\n") || strings.ContainsAny(credits, "\r\n"):
		bad = Errorf(StatusBadRequest, "the FROM, TO, TYPE and CREDITS of a signed message may not hold a line break")
	}
	if bad != nil {
		return make([]byte, 0, bodyLen), bad
	}
	input := make([]byte, 0, len(SigContext)+len(from)+len(to)+len(typ)+3+len(sigCreditsPrefix)+len(credits)+1+bodyLen)
	input = append(input, SigContext...)
	input = append(input, from...)
	input = append(input, '\n')
	input = append(input, to...)
	input = append(input, '\n')
	input = append(input, typ...)
	input = append(input, '\n')
	if credits != "" {
		input = append(input, sigCreditsPrefix...)
		input = append(input, credits...)
		input = append(input, '\n')
	}
	return input, nil
}

// sigCreditsPrefix starts the signing input's CREDITS line. The canonical
// body that follows always starts with '{', so the line cannot be taken
// for part of a body, nor a body for it.
const sigCreditsPrefix = "CREDITS: "

// ParseSignature splits a signature "ALG:hex" into its algorithm and bytes.
// It is strict where the payload checks are loose: the algorithm must be
// known, the hex lowercase with an even number of digits, and the length
// right for the algorithm. The reference's shortened examples
// ("rsa-sha256:0f3c9a...") pass the payload checks but fail here, with a
// reason that says so. Refusals are 401s: a signature that cannot be read is
// a bad signature.
func ParseSignature(s string) (alg string, sig []byte, err error) {
	if len(s) > sigTextSizeMax {
		return "", nil, Errorf(StatusUnauthorized, "signature is longer than %d bytes", sigTextSizeMax)
	}
	alg, value, ok := strings.Cut(s, ":")
	if !ok {
		return "", nil, Errorf(StatusUnauthorized, "signature %s is not ALG:hex", sigQuote(s))
	}
	switch alg {
	case AlgRSASHA256, AlgEd25519, AlgHMACSHA256:
	default:
		return "", nil, Errorf(StatusUnauthorized, "signature algorithm %s is not supported; expected %s, %s or %s",
			sigQuote(alg), AlgRSASHA256, AlgEd25519, AlgHMACSHA256)
	}
	sig, ok = decodeLowerHex(value)
	if !ok {
		hint := ""
		if strings.HasSuffix(value, "...") {
			hint = "; it looks like a shortened placeholder, not a real signature"
		}
		return "", nil, Errorf(StatusUnauthorized, "signature %s is not ALG:hex: after %q must come an even number of lowercase hex digits%s",
			sigQuote(s), alg+":", hint)
	}
	if reason := sigLengthProblem(alg, len(sig)); reason != "" {
		return "", nil, Errorf(StatusUnauthorized, "signature %s %s", sigQuote(s), reason)
	}
	return alg, sig, nil
}

// decodeLowerHex decodes a non-empty, even number of lowercase hex digits
// in one pass, with one allocation: every signature check reads one.
func decodeLowerHex(s string) ([]byte, bool) {
	if s == "" || len(s)%2 != 0 {
		return nil, false
	}
	out := make([]byte, len(s)/2)
	for i := range out {
		hi, lo := lowerHexValue[s[2*i]], lowerHexValue[s[2*i+1]]
		if hi|lo > 0xF {
			return nil, false
		}
		out[i] = hi<<4 | lo
	}
	return out, true
}

// lowerHexValue maps each byte to its value as a lowercase hex digit, and
// every other byte to 0xFF.
var lowerHexValue = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xFF
	}
	for c := byte('0'); c <= '9'; c++ {
		t[c] = c - '0'
	}
	for c := byte('a'); c <= 'f'; c++ {
		t[c] = c - 'a' + 10
	}
	return t
}()

// sigLengthProblem says what is wrong with a signature of n bytes for alg,
// or "" if nothing is.
func sigLengthProblem(alg string, n int) string {
	switch alg {
	case AlgEd25519:
		if n != ed25519.SignatureSize {
			return fmt.Sprintf("has %d bytes; an ed25519 signature has %d", n, ed25519.SignatureSize)
		}
	case AlgHMACSHA256:
		if n != sha256.Size {
			return fmt.Sprintf("has %d bytes; an hmac-sha256 signature has %d", n, sha256.Size)
		}
	case AlgRSASHA256:
		if n < RSAKeyBitsMin/8 || n > RSAKeyBitsMax/8 {
			return fmt.Sprintf("has %d bytes; an rsa-sha256 signature has %d to %d (keys of %d to %d bits)",
				n, RSAKeyBitsMin/8, RSAKeyBitsMax/8, RSAKeyBitsMin, RSAKeyBitsMax)
		}
	}
	return ""
}

// SignatureOf returns the top-level "signature" member of body, and whether
// there is one. The whole body is checked on the way, as Canonical checks it
// (400), so that the signature read is the one a verifier would use; a
// signature member that is not a string is refused with 400.
func SignatureOf(body []byte) (string, bool, error) {
	_, info, e := parseSigned(nil, body)
	switch {
	case e != nil:
		return "", false, e
	case !info.sigFound:
		return "", false, nil
	case !info.sigIsString:
		return "", false, Errorf(StatusBadRequest, "member %q must be a string", sigMemberName)
	}
	return info.sigValue, true, nil
}

// readSignature parses body once for Verify and VerifyHMAC: its canonical
// form, appended to dst, and its signature, parsed. A body that is not
// valid JSON is a 400; a missing or unreadable signature is a 401.
func readSignature(dst, body []byte) (canon []byte, alg string, sig []byte, err error) {
	canon, info, e := parseSigned(dst, body)
	switch {
	case e != nil:
		return nil, "", nil, e
	case !info.sigFound:
		return nil, "", nil, Errorf(StatusUnauthorized, "the message carries no signature; a top-level member %q is required", sigMemberName)
	case !info.sigIsString:
		return nil, "", nil, Errorf(StatusUnauthorized, "member %q must be a string ALG:hex", sigMemberName)
	}
	alg, sig, err = ParseSignature(info.sigValue)
	return canon, alg, sig, err
}

// Verify checks the signature that body carries against key, the public key
// registered for the sender (an *rsa.PublicKey or an ed25519.PublicKey).
// The signature's algorithm must be the one for the key's type, so that a
// signature can never be checked under a scheme the key's owner did not
// choose. Any failure is a 401 whose reason says what failed; a body that is
// not valid JSON is a 400. SigBatcher.VerifyBatch gives the same results for many
// signatures at once, faster.
func Verify(key crypto.PublicKey, from, to, typ, credits string, body []byte) error {
	c, err := prepareCheck(key, from, to, typ, credits, body)
	if err != nil {
		return err
	}
	if !verifyWith(key, c.input, c.sig) {
		return c.mismatch(key, from)
	}
	return nil
}

// preparedCheck is a signature read and its signing input built: all of
// Verify but the arithmetic.
type preparedCheck struct {
	alg        string
	input, sig []byte
}

// prepareCheck does Verify's work up to the arithmetic, and fails as
// Verify fails.
func prepareCheck(key crypto.PublicKey, from, to, typ, credits string, body []byte) (preparedCheck, error) {
	if key == nil {
		return preparedCheck{}, Errorf(StatusUnauthorized, "no public key is known for %s", sigQuote(from))
	}
	head, headErr := signingHead(from, to, typ, credits, len(body))
	input, alg, sig, err := readSignature(head, body)
	if err != nil {
		return preparedCheck{}, err
	}
	want, reason := keyAlg(key)
	if reason != "" {
		return preparedCheck{}, Errorf(StatusUnauthorized, "the key of %s cannot verify signatures: %s", sigQuote(from), reason)
	}
	if alg != want {
		return preparedCheck{}, Errorf(StatusUnauthorized, "the signature uses %s, but the key of %s is for %s", alg, sigQuote(from), want)
	}
	if headErr != nil {
		return preparedCheck{}, headErr
	}
	return preparedCheck{alg: alg, input: input, sig: sig}, nil
}

// mismatch is the refusal of a signature that was read but does not verify.
func (c preparedCheck) mismatch(key crypto.PublicKey, from string) error {
	return Errorf(StatusUnauthorized, "the %s signature does not match FROM, TO, TYPE and body under the key %s of %s",
		c.alg, KeyID(key), sigQuote(from))
}

// keyAlg returns the one algorithm a public key verifies, or why it
// verifies none.
func keyAlg(key crypto.PublicKey) (alg, reason string) {
	if reason := publicKeyProblem(key); reason != "" {
		return "", reason
	}
	if _, ok := key.(*rsa.PublicKey); ok {
		return AlgRSASHA256, ""
	}
	return AlgEd25519, ""
}

// ed25519Rules is the node's Ed25519 acceptance rule (docs/PROTOCOL.md,
// "Signatures"): S below the group order; A and R canonically encoded
// points; A not of small order; and the cofactored equation
// [8](SB - R - kA) = 0. It is crypto/ed25519's rule with two differences,
// both reachable only by a key's owner: crypto/ed25519 uses the
// cofactorless equation, so it refuses a signature whose R its owner built
// with a small-order component, and it takes small-order and
// non-canonical keys, which the node refuses where they enter
// (ed25519PointProblem) and here again. Every signature crypto/ed25519
// accepts under a key the node would bind, the node accepts.
//
// The cofactored equation is what makes batch verification sound
// (SigBatcher): a batch's verdict on each signature is then the same as
// the signature's own, so a replay reaches the live node's verdicts
// however its checks were grouped. Under the cofactorless equation, two
// signatures crafted with the same point of order 2 in R fail alone but
// pass together whenever the batch's random weights sum to an even
// number. The flags are written out here, not taken from voi's exported
// (and writable) preset; TestEd25519RulesAreVoisDefault checks they are
// the same.
var ed25519Rules = &voied25519.Options{Verify: &voied25519.VerifyOptions{
	AllowSmallOrderR: true,
}}

// verifyWith verifies sig over input; key must have passed keyAlg.
func verifyWith(key crypto.PublicKey, input, sig []byte) bool {
	switch k := key.(type) {
	case *rsa.PublicKey:
		digest := sha256.Sum256(input)
		return rsa.VerifyPKCS1v15(k, crypto.SHA256, digest[:], sig) == nil
	case ed25519.PublicKey:
		return ed25519Keys.verify(k, input, sig)
	}
	return false
}

// VerifyHMAC checks the hmac-sha256 signature that body carries against a
// zone's secret (zone.join). The comparison takes the same time wherever
// the first differing byte is, so that timing reveals nothing of the
// expected value. Failures are 401s, an invalid body a 400.
func VerifyHMAC(secret []byte, from, to, typ, credits string, body []byte) error {
	if len(secret) < HMACSecretSizeMin {
		return Errorf(StatusUnauthorized, "the zone's secret is unusable: shorter than %d bytes", HMACSecretSizeMin)
	}
	head, headErr := signingHead(from, to, typ, credits, len(body))
	input, alg, sig, err := readSignature(head, body)
	if err != nil {
		return err
	}
	if alg != AlgHMACSHA256 {
		return Errorf(StatusUnauthorized, "the signature uses %s, but a zone secret verifies only %s", alg, AlgHMACSHA256)
	}
	if headErr != nil {
		return headErr
	}
	if !hmac.Equal(hmacSum(secret, input), sig) {
		return Errorf(StatusUnauthorized, "the %s signature does not match FROM, TO, TYPE and body under the zone's secret", alg)
	}
	return nil
}

func hmacSum(secret, input []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write(input)
	return m.Sum(nil)
}

// Sign signs a message with an agent's private key (RSA of RSAKeyBitsMin
// bits or more, or Ed25519) and returns the signature text "ALG:hex" to put
// in the body's "signature" member (see SetSignature). Any signature already
// in body is ignored, as verification ignores it. The new signature is
// verified before it is returned, so that a faulty signer (a hardware
// module, a remote KMS) can never make the node send a signature that fails.
func Sign(key crypto.Signer, from, to, typ, credits string, body []byte) (string, error) {
	if key == nil {
		return "", errors.New("protocol: Sign needs a key")
	}
	pub := key.Public()
	alg, reason := keyAlg(pub)
	if reason != "" {
		return "", Errorf(StatusBadRequest, "cannot sign: %s", reason)
	}
	input, err := SigningInput(from, to, typ, credits, body)
	if err != nil {
		return "", err
	}
	var sig []byte
	if alg == AlgRSASHA256 {
		digest := sha256.Sum256(input)
		sig, err = key.Sign(rand.Reader, digest[:], crypto.SHA256)
	} else {
		sig, err = key.Sign(rand.Reader, input, crypto.Hash(0))
	}
	if err != nil {
		return "", fmt.Errorf("protocol: signing with %s: %w", alg, err)
	}
	if !verifyWith(pub, input, sig) {
		return "", fmt.Errorf("protocol: the %s signer produced a signature that does not verify", alg)
	}
	return alg + ":" + hex.EncodeToString(sig), nil
}

// SignHMAC signs a message with a zone's secret and returns the signature
// text "hmac-sha256:hex" (zone.join).
func SignHMAC(secret []byte, from, to, typ, credits string, body []byte) (string, error) {
	if len(secret) < HMACSecretSizeMin {
		return "", Errorf(StatusBadRequest, "cannot sign: a zone secret needs at least %d bytes", HMACSecretSizeMin)
	}
	input, err := SigningInput(from, to, typ, credits, body)
	if err != nil {
		return "", err
	}
	return AlgHMACSHA256 + ":" + hex.EncodeToString(hmacSum(secret, input)), nil
}

// SetSignature returns a copy of body with its top-level "signature" member
// set to sig: the value of an existing member is replaced, or a member is
// added after the last one, laid out like it. Every other byte stays as it
// was, so the message a person wrote is the message sent, number texts
// included. sig must pass ParseSignature, so that what is written can be
// read back; body must pass Canonical.
func SetSignature(body []byte, sig string) ([]byte, error) {
	if _, _, err := ParseSignature(sig); err != nil {
		return nil, err
	}
	canon, info, e := parseSigned(nil, body)
	if e != nil {
		return nil, e
	}
	value := strconv.Quote(sig) // plain ASCII: quoting matches JSON here
	var out []byte
	switch {
	case info.sigFound:
		out = joinBytes(body[:info.sig.val], value, body[info.sig.valEnd:])
	case info.members == 0:
		member := strconv.Quote(sigMemberName) + ":" + value
		out = joinBytes(body[:info.close], member, body[info.close:])
	default:
		last := info.last
		member := "," + string(body[last.lead:last.key]) + strconv.Quote(sigMemberName) +
			string(body[last.keyEnd:last.val]) + value
		out = joinBytes(body[:last.valEnd], member, body[last.valEnd:])
	}
	// The result must sign as body does and carry sig; anything else is a
	// bug here, caught before a broken body leaves the node.
	if canonOut, infoOut, e := parseSigned(nil, out); e != nil || !bytes.Equal(canonOut, canon) || infoOut.sigValue != sig {
		return nil, errors.New("protocol: SetSignature changed the meaning of the body")
	}
	return out, nil
}

func joinBytes(head []byte, mid string, tail []byte) []byte {
	out := make([]byte, 0, len(head)+len(mid)+len(tail))
	out = append(out, head...)
	out = append(out, mid...)
	return append(out, tail...)
}

// sigQuoteSizeMax bounds how much of a value a refusal echoes.
const sigQuoteSizeMax = 48 // bytes

// sigQuote quotes s for a refusal's reason, cut at a rune boundary so that a
// reply never echoes much of what the peer sent.
func sigQuote(s string) string {
	if len(s) <= sigQuoteSizeMax {
		return strconv.Quote(s)
	}
	cut := sigQuoteSizeMax
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + " (cut)"
}
