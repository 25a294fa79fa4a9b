package protocol

import (
	"crypto/ed25519"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/oasisprotocol/curve25519-voi/curve"
	"github.com/oasisprotocol/curve25519-voi/curve/scalar"
	voied25519 "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"
)

// stdlibVerdict is the verdict Go's crypto/ed25519 gives. The node's rule
// must accept everything it accepts under a key the node would bind.
func stdlibVerdict(pub, msg, sig []byte) bool {
	if len(pub) != ed25519.PublicKeySize {
		return false
	}
	return ed25519.Verify(ed25519.PublicKey(pub), msg, sig)
}

// canonicalPoint decodes enc as a point and requires it to be the point's
// one canonical encoding.
func canonicalPoint(enc []byte) (*curve.EdwardsPoint, bool) {
	var c curve.CompressedEdwardsY
	if _, err := c.SetBytes(enc); err != nil {
		return nil, false
	}
	var p curve.EdwardsPoint
	if _, err := p.SetCompressedY(&c); err != nil {
		return nil, false
	}
	var again curve.CompressedEdwardsY
	if again.SetEdwardsPoint(&p); again.Equal(&c) != 1 {
		return nil, false
	}
	return &p, true
}

// ruleVerdict is the node's Ed25519 rule (docs/PROTOCOL.md, "Signatures")
// written out from its definition with plain curve arithmetic, none of the
// verification code the node runs: S below the group order, A and R
// canonical encodings of points, A not of small order, and
// [8](SB - R - kA) the identity, k = SHA-512(R || A || M) mod L.
func ruleVerdict(pub, msg, sig []byte) bool {
	if len(pub) != ed25519.PublicKeySize || len(sig) != ed25519.SignatureSize {
		return false
	}
	a, ok := canonicalPoint(pub)
	if !ok || a.IsSmallOrder() {
		return false
	}
	r, ok := canonicalPoint(sig[:32])
	if !ok {
		return false
	}
	var s, k scalar.Scalar
	if _, err := s.SetCanonicalBytes(sig[32:]); err != nil {
		return false
	}
	h := sha512.New()
	h.Write(sig[:32])
	h.Write(pub)
	h.Write(msg)
	if _, err := k.SetBytesModOrderWide(h.Sum(nil)); err != nil {
		return false
	}
	var sb, ka, d curve.EdwardsPoint
	sb.MulBasepoint(curve.ED25519_BASEPOINT_TABLE, &s)
	ka.Mul(a, &k)
	d.Sub(&sb, r)
	d.Sub(&d, &ka)
	d.MulByCofactor(&d)
	return d.IsIdentity()
}

// rTorsionFree reports whether the R of sig decodes to a point of prime
// order: the one case where the node's rule and crypto/ed25519's may
// differ is an R that does not.
func rTorsionFree(sig []byte) bool {
	if len(sig) != ed25519.SignatureSize {
		return true
	}
	r, ok := canonicalPoint(sig[:32])
	return !ok || r.IsTorsionFree()
}

// sigCase is one signature to judge.
type sigCase struct {
	name          string
	pub, msg, sig []byte
}

// checkRule holds the node's single check to the rule for c, and to
// crypto/ed25519 where the rule says they agree, and returns its verdict.
func checkRule(t *testing.T, c sigCase) bool {
	t.Helper()
	got := verifyWith(ed25519.PublicKey(c.pub), c.msg, c.sig)
	if want := ruleVerdict(c.pub, c.msg, c.sig); got != want {
		t.Errorf("%s: key %x msg %x sig %x: the node's check says %v, the rule written out says %v", c.name, c.pub, c.msg, c.sig, got, want)
	}
	std := stdlibVerdict(c.pub, c.msg, c.sig)
	fitKey := len(c.pub) == ed25519.PublicKeySize && ed25519PointProblem(ed25519.PublicKey(c.pub)) == ""
	if std && fitKey && !got {
		t.Errorf("%s: key %x msg %x sig %x: crypto/ed25519 accepts it under a key the node binds, the node refuses it", c.name, c.pub, c.msg, c.sig)
	}
	if got && !std && fitKey && rTorsionFree(c.sig) {
		t.Errorf("%s: key %x msg %x sig %x: the node accepts what crypto/ed25519 refuses, with an R of prime order", c.name, c.pub, c.msg, c.sig)
	}
	return got
}

// checkBatches checks the cases in batches of every size from 2 up, and
// each alone among honest signatures, and requires every batch verdict to
// be the single check's: how signatures are grouped must never change one.
func checkBatches(t *testing.T, cases []sigCase) {
	t.Helper()
	single := make([]bool, len(cases))
	for i, c := range cases {
		single[i] = verifyWith(ed25519.PublicKey(c.pub), c.msg, c.sig)
	}
	run := func(what string, group []sigCase, want []bool) {
		t.Helper()
		keys := make([]ed25519.PublicKey, len(group))
		msgs, sigs := make([][]byte, len(group)), make([][]byte, len(group))
		for j, c := range group {
			keys[j], msgs[j], sigs[j] = c.pub, c.msg, c.sig
		}
		ok := make([]bool, len(group))
		ed25519Keys.verifyBatch(keys, msgs, sigs, ok)
		for j := range group {
			if ok[j] != want[j] {
				t.Errorf("%s: %s: the batch says %v, the single check %v", what, group[j].name, ok[j], want[j])
			}
		}
	}
	for size := 2; size <= ed25519BatchMax; size *= 2 {
		for start := 0; start < len(cases); start += size {
			end := min(start+size, len(cases))
			run(fmt.Sprintf("batch of %d", end-start), cases[start:end], single[start:end])
		}
	}
	honest := honestCases(t, 7)
	for i, c := range cases {
		group := append([]sigCase{c}, honest...)
		want := make([]bool, len(group))
		want[0] = single[i]
		for j := 1; j < len(want); j++ {
			want[j] = true
		}
		run("among honest signatures", group, want)
	}
}

// fuzzHonest are the honest signatures FuzzEd25519Rule batches with its
// input.
var fuzzHonest []sigCase

// honestCases returns n signatures made by an Ed25519 signer.
func honestCases(t *testing.T, n int) []sigCase {
	out := make([]sigCase, n)
	for i := range out {
		var seed [ed25519.SeedSize]byte
		seed[0] = byte(i)
		priv := ed25519.NewKeyFromSeed(seed[:])
		msg := []byte(fmt.Sprintf("honest %d", i))
		out[i] = sigCase{fmt.Sprintf("honest %d", i), priv.Public().(ed25519.PublicKey), msg, ed25519.Sign(priv, msg)}
	}
	return out
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

// TestEd25519RuleOnPublishedVectors runs the published edge cases, where
// Ed25519 implementations are known to disagree, through the node's check,
// singly and in batches.
func TestEd25519RuleOnPublishedVectors(t *testing.T) {
	var cases []sigCase
	var spec []struct {
		Message   string `json:"message"`
		PublicKey string `json:"pub_key"`
		Signature string `json:"signature"`
	}
	readJSON(t, "../testdata/ed25519/speccheck_cases.json", &spec)
	for i, v := range spec {
		cases = append(cases, sigCase{fmt.Sprintf("speccheck case %d", i),
			mustHex(t, v.PublicKey), mustHex(t, v.Message), mustHex(t, v.Signature)})
	}
	var zip215 [][2]string
	readJSON(t, "../testdata/ed25519/zip215.json", &zip215)
	for _, v := range zip215 {
		cases = append(cases, sigCase{"zip215 A " + v[0][:8] + " sig " + v[1][:8], mustHex(t, v[0]), []byte("Zcash"), mustHex(t, v[1])})
	}
	if len(cases) != 12+196 {
		t.Fatalf("read %d vectors, want 208", len(cases))
	}
	checkRuleSet(t, "vectors", cases)
}

// checkRuleSet holds every case to the rule alone (checkRule) and in
// batches (checkBatches). A set is only a test of the rule if the node
// accepts some of it and refuses some.
func checkRuleSet(t *testing.T, what string, cases []sigCase) {
	t.Helper()
	accepted := 0
	for _, c := range cases {
		if checkRule(t, c) {
			accepted++
		}
	}
	if accepted == 0 || accepted == len(cases) {
		t.Fatalf("the node accepted %d of %d %s; the set no longer tells the rules apart", accepted, len(cases), what)
	}
	checkBatches(t, cases)
}

// TestEd25519RulesAreVoisDefault: the flags the node writes out are voi's
// default preset, the cofactored rule its batch verification is made for.
func TestEd25519RulesAreVoisDefault(t *testing.T) {
	if got, want := *ed25519Rules.Verify, *voied25519.VerifyOptionsDefault; got != want {
		t.Fatalf("the node's Ed25519 rule is %+v; voi's default preset is %+v", got, want)
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

// FuzzEd25519Rule signs a message with a key from the fuzzer's seed, lets
// the fuzzer flip bits of the signature, the key and the message, and
// holds the result to the rule written out, to crypto/ed25519 where the
// two agree, and to the single verdict when checked in a batch. Nothing
// may panic.
func FuzzEd25519Rule(f *testing.F) {
	fuzzHonest = honestCases(nil, ed25519BatchMin-1)
	f.Add([]byte("seed"), []byte("msg"), []byte{}, []byte{}, []byte{})
	f.Add([]byte{1}, []byte(""), []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10}, []byte{}, []byte{})
	f.Add([]byte{2}, []byte("x"), []byte{1}, []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80}, []byte{1})
	// A 33-byte key and a 65-byte signature: crypto/ed25519 and voi both
	// panic on the key; the node's check must say no instead.
	f.Add([]byte{3}, []byte("y"), []byte{}, make([]byte, 33), []byte{})
	f.Add([]byte{4}, []byte("z"), make([]byte, 65), []byte{}, []byte{})
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
		c := sigCase{"fuzzed", xor(pub, pubMask), xor(msg, msgMask), xor(sig, sigMask)}
		got := checkRule(t, c)
		// In a batch of ed25519BatchMin with honest signatures.
		keys := []ed25519.PublicKey{c.pub}
		msgs, sigs := [][]byte{c.msg}, [][]byte{c.sig}
		for _, h := range fuzzHonest {
			keys, msgs, sigs = append(keys, h.pub), append(msgs, h.msg), append(sigs, h.sig)
		}
		ok := make([]bool, len(keys))
		ed25519Keys.verifyBatch(keys, msgs, sigs, ok)
		if ok[0] != got || slices.Contains(ok[1:], false) {
			t.Fatalf("key %x msg %x sig %x: in a batch %v (and the honest ones %v), alone %v", c.pub, c.msg, c.sig, ok[0], ok[1:], got)
		}
	})
}
