package protocol

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha512"
	"encoding/hex"
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

// TestEd25519EdgeGridMatchesStdlib checks the node's Ed25519 check against
// crypto/ed25519 over every combination of an edge key, an edge R and an
// edge S (and the honest ones), for three messages. Random bit flips
// (FuzzEd25519MatchesStdlib) almost never reach these.
func TestEd25519EdgeGridMatchesStdlib(t *testing.T) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	encs := edgeEncodings(t)
	keys := append(append([][]byte{}, encs...), pub)
	accepted, compared := 0, 0
	for _, msg := range [][]byte{nil, []byte("Zcash"), []byte("credit.transfer")} {
		honest := ed25519.Sign(priv, msg)
		rs := append(append([][]byte{}, encs...), honest[:32])
		for _, key := range keys {
			for _, r := range rs {
				for _, s := range edgeScalars(t, honest[32:]) {
					sig := append(append([]byte{}, r...), s...)
					want := stdlibVerdict(key, msg, sig)
					if got := verifyWith(ed25519.PublicKey(key), msg, sig); got != want {
						t.Errorf("key %x msg %q sig %x: the node's check says %v, crypto/ed25519 says %v", key, msg, sig, got, want)
					}
					compared++
					if want {
						accepted++
					}
				}
			}
		}
	}
	if accepted == 0 || accepted == compared {
		t.Fatalf("crypto/ed25519 accepted %d of %d; the grid no longer tells the rules apart", accepted, compared)
	}
}

// TestEd25519MixedOrderKeys signs properly under keys aB + T, for every
// small-order T: the rules differ on exactly such keys (cofactorless
// accepts only when k·T is the identity). The node's check must agree with
// crypto/ed25519 on each signature, and ParsePublicKey must refuse every
// such key but the ones with T the identity, which are honest keys.
func TestEd25519MixedOrderKeys(t *testing.T) {
	accepted, compared := 0, 0
	for ti, ts := range smallOrderPoints {
		var tEnc curve.CompressedEdwardsY
		if _, err := tEnc.SetBytes(mustHex(t, ts)); err != nil {
			t.Fatal(err)
		}
		var torsion curve.EdwardsPoint
		if _, err := torsion.SetCompressedY(&tEnc); err != nil {
			t.Fatal(err)
		}
		for n := range 16 {
			var a, r scalar.Scalar
			if _, err := a.SetRandom(rand.Reader); err != nil {
				t.Fatal(err)
			}
			if _, err := r.SetRandom(rand.Reader); err != nil {
				t.Fatal(err)
			}
			var bigA, bigR curve.EdwardsPoint
			bigA.MulBasepoint(curve.ED25519_BASEPOINT_TABLE, &a)
			bigA.Add(&bigA, &torsion)
			bigR.MulBasepoint(curve.ED25519_BASEPOINT_TABLE, &r)
			var aEnc, rEnc curve.CompressedEdwardsY
			aEnc.SetEdwardsPoint(&bigA)
			rEnc.SetEdwardsPoint(&bigR)
			msg := []byte{byte(ti), byte(n)}
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
			sig := make([]byte, 64)
			copy(sig, rEnc[:])
			if err := s.ToBytes(sig[32:]); err != nil {
				t.Fatal(err)
			}
			want := stdlibVerdict(aEnc[:], msg, sig)
			if got := verifyWith(ed25519.PublicKey(aEnc[:]), msg, sig); got != want {
				t.Errorf("key %x msg %x sig %x: the node's check says %v, crypto/ed25519 says %v", aEnc[:], msg, sig, got, want)
			}
			compared++
			if want {
				accepted++
			}
			if problem := ed25519PointProblem(ed25519.PublicKey(aEnc[:])); (ti == 0) != (problem == "") {
				t.Errorf("key aB + %s: ed25519PointProblem says %q", hex.EncodeToString(tEnc[:4]), problem)
			}
		}
	}
	if accepted == 0 || accepted == compared {
		t.Fatalf("crypto/ed25519 accepted %d of %d; the keys no longer tell the rules apart", accepted, compared)
	}
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
