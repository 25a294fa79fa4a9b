package protocol

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha512"
	"fmt"
	"testing"

	"github.com/oasisprotocol/curve25519-voi/curve"
	"github.com/oasisprotocol/curve25519-voi/curve/scalar"
)

// smallOrderPoints are the encodings of the curve's eight points of small
// order (orders 1, 2, 4 and 8), as listed with the ZIP-215 vectors.
var smallOrderPoints = []string{
	"0100000000000000000000000000000000000000000000000000000000000000", // the identity
	"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
	"0000000000000000000000000000000000000000000000000000000000000000",
	"0000000000000000000000000000000000000000000000000000000000000080",
	"26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
	"26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85",
	"c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
	"c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa",
}

// edgeEncodings are 32-byte strings where Ed25519 implementations part
// ways: the small-order points, the identity and -1 with the sign bit set,
// every y in [p, 2^255) with either sign, and a y that is on no point.
func edgeEncodings(t *testing.T) [][]byte {
	var out [][]byte
	for _, s := range smallOrderPoints {
		out = append(out, mustHex(t, s))
	}
	out = append(out,
		mustHex(t, "0100000000000000000000000000000000000000000000000000000000000080"),
		mustHex(t, "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"),
		mustHex(t, "0200000000000000000000000000000000000000000000000000000000000000"))
	for b0 := 0xed; b0 <= 0xff; b0++ {
		for _, top := range []byte{0x7f, 0xff} {
			e := make([]byte, 32)
			for i := range e {
				e[i] = 0xff
			}
			e[0], e[31] = byte(b0), top
			out = append(out, e)
		}
	}
	return out
}

// edgeScalars are values of S around the group order L, and an honest S
// with L added (the same S, non-canonically written).
func edgeScalars(t *testing.T, honest []byte) [][]byte {
	l := mustHex(t, "edd3f55c1a631258d69cf7a2def9de1400000000000000000000000000000010")
	lMinus1, lPlus1 := append([]byte(nil), l...), append([]byte(nil), l...)
	lMinus1[0]--
	lPlus1[0]++
	zero, one, high, ones := make([]byte, 32), make([]byte, 32), make([]byte, 32), make([]byte, 32)
	one[0], high[31] = 1, 0x20
	for i := range ones {
		ones[i] = 0xff
	}
	plusL := make([]byte, 32)
	var carry uint16
	for i := range plusL {
		carry += uint16(honest[i]) + uint16(l[i])
		plusL[i], carry = byte(carry), carry>>8
	}
	return [][]byte{zero, one, lMinus1, l, lPlus1, high, ones, honest, plusL}
}

// TestEd25519EdgeGrid checks the node's Ed25519 check against the rule
// written out, and crypto/ed25519 where the two agree, over every
// combination of an edge key, an edge R and an edge S (and the honest
// ones), for three messages, singly and in batches. Random bit flips
// (FuzzEd25519Rule) almost never reach these.
func TestEd25519EdgeGrid(t *testing.T) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	encs := edgeEncodings(t)
	keys := append(append([][]byte{}, encs...), pub)
	var cases []sigCase
	for _, msg := range [][]byte{nil, []byte("Zcash"), []byte("credit.transfer")} {
		honest := ed25519.Sign(priv, msg)
		rs := append(append([][]byte{}, encs...), honest[:32])
		for _, key := range keys {
			for _, r := range rs {
				for _, s := range edgeScalars(t, honest[32:]) {
					cases = append(cases, sigCase{"grid", key, msg, append(append([]byte{}, r...), s...)})
				}
			}
		}
	}
	checkRuleSet(t, "grid cases", cases)
}

// torsionPoint decodes one of smallOrderPoints.
func torsionPoint(t *testing.T, enc string) *curve.EdwardsPoint {
	t.Helper()
	var c curve.CompressedEdwardsY
	if _, err := c.SetBytes(mustHex(t, enc)); err != nil {
		t.Fatal(err)
	}
	var p curve.EdwardsPoint
	if _, err := p.SetCompressedY(&c); err != nil {
		t.Fatal(err)
	}
	return &p
}

// craftSignature signs msg the way a key's owner can and an honest signer
// never does: A = aB + tA and R = rB + tR, with tA and tR points of small
// order, S = r + k·a. It returns the key and the signature.
func craftSignature(t *testing.T, tA, tR *curve.EdwardsPoint, msg []byte) (pub, sig []byte) {
	t.Helper()
	var a, r scalar.Scalar
	if _, err := a.SetRandom(rand.Reader); err != nil {
		t.Fatal(err)
	}
	if _, err := r.SetRandom(rand.Reader); err != nil {
		t.Fatal(err)
	}
	var bigA, bigR curve.EdwardsPoint
	bigA.MulBasepoint(curve.ED25519_BASEPOINT_TABLE, &a)
	bigA.Add(&bigA, tA)
	bigR.MulBasepoint(curve.ED25519_BASEPOINT_TABLE, &r)
	bigR.Add(&bigR, tR)
	var aEnc, rEnc curve.CompressedEdwardsY
	aEnc.SetEdwardsPoint(&bigA)
	rEnc.SetEdwardsPoint(&bigR)
	h := sha512.New()
	h.Write(rEnc[:])
	h.Write(aEnc[:])
	h.Write(msg)
	var k, s scalar.Scalar
	if _, err := k.SetBytesModOrderWide(h.Sum(nil)); err != nil {
		t.Fatal(err)
	}
	s.Mul(&k, &a)
	s.Add(&s, &r)
	sig = make([]byte, 64)
	copy(sig, rEnc[:])
	if err := s.ToBytes(sig[32:]); err != nil {
		t.Fatal(err)
	}
	return aEnc[:], sig
}

// TestEd25519MixedOrderKeys signs properly under keys aB + T, for every
// small-order T: the rules of Ed25519 libraries differ on exactly such
// keys. The node's check must follow its rule on each signature, and
// ParsePublicKey must refuse every such key but the ones with T the
// identity, which are honest keys.
func TestEd25519MixedOrderKeys(t *testing.T) {
	identity := torsionPoint(t, smallOrderPoints[0])
	var cases []sigCase
	for ti, ts := range smallOrderPoints {
		for n := range 16 {
			msg := []byte{byte(ti), byte(n)}
			pub, sig := craftSignature(t, torsionPoint(t, ts), identity, msg)
			cases = append(cases, sigCase{fmt.Sprintf("key aB + T%d", ti), pub, msg, sig})
			checkRule(t, cases[len(cases)-1])
			if problem := ed25519PointProblem(ed25519.PublicKey(pub)); (ti == 0) != (problem == "") {
				t.Errorf("key aB + %s: ed25519PointProblem says %q", ts[:8], problem)
			}
		}
	}
	checkBatches(t, cases)
}

// TestEd25519TorsionInR signs with R = rB + T, for every small-order T,
// the one kind of signature on which the node's rule and crypto/ed25519
// differ under a key the node binds: only the key's owner can make one.
// The node accepts each (the cofactored equation holds), crypto/ed25519
// only those with T the identity; spoiling S makes each fail. Two
// signatures with the same point of order 2 in R, the pair that would fool
// a cofactorless batch half the time, must be judged in a batch as alone.
func TestEd25519TorsionInR(t *testing.T) {
	identity := torsionPoint(t, smallOrderPoints[0])
	var cases []sigCase
	for ti, ts := range smallOrderPoints {
		for n := range 4 {
			msg := []byte{'R', byte(ti), byte(n)}
			pub, sig := craftSignature(t, identity, torsionPoint(t, ts), msg)
			c := sigCase{fmt.Sprintf("R = rB + T%d", ti), pub, msg, sig}
			if !checkRule(t, c) {
				t.Errorf("%s: refused; the cofactored equation holds", c.name)
			}
			if std := stdlibVerdict(pub, msg, sig); std != (ti == 0) {
				t.Errorf("%s: crypto/ed25519 says %v; the test's premise is wrong", c.name, std)
			}
			bad := append([]byte(nil), sig...)
			bad[32] ^= 1
			spoilt := sigCase{c.name + ", S spoilt", pub, msg, bad}
			if checkRule(t, spoilt) {
				t.Errorf("%s: accepted", spoilt.name)
			}
			cases = append(cases, c, spoilt)
		}
	}
	checkBatches(t, cases)
}

// TestHonestEd25519KeysAreAccepted: whatever an Ed25519 key generator
// makes, ParsePublicKey and MarshalPublicKey take.
func TestHonestEd25519KeysAreAccepted(t *testing.T) {
	for range 500 {
		pub, _, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		text, err := MarshalPublicKey(pub)
		if err != nil {
			t.Fatalf("MarshalPublicKey refused the generated key %x: %v", []byte(pub), err)
		}
		if _, err := ParsePublicKey(text); err != nil {
			t.Fatalf("ParsePublicKey refused the generated key %x: %v", []byte(pub), err)
		}
	}
}
