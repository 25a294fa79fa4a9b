package protocol

import (
	"crypto"
	"crypto/ed25519"

	"github.com/oasisprotocol/curve25519-voi/curve"
)

// ed25519PointProblem says why an Ed25519 public key of the right length is
// still unfit to be bound to an agent, or "" if it is fit. An honest key
// generator only ever makes a canonically encoded point of prime order; the
// refused keys are the ones a careless or hostile agent could register:
//
//   - bytes that are not a point on the curve: no signature would ever
//     verify under them;
//   - a non-canonical encoding (y not reduced mod p): a second text for
//     one point, so one key would have two KeyIDs;
//   - a point of small order (the identity is the plainest: 01 00 … 00):
//     under crypto/ed25519's rule anyone can make a signature that
//     verifies under it without any private key, at once for the identity
//     and in about eight tries for the others;
//   - a point with a small-order component: libraries disagree on its
//     signatures (cofactored or not), so a verdict could depend on which
//     one checks.
//
// The check costs a scalar multiplication, so it runs where a key enters
// (ParsePublicKey, MarshalPublicKey), not at every signature check.
func ed25519PointProblem(k ed25519.PublicKey) string {
	var enc curve.CompressedEdwardsY
	if _, err := enc.SetBytes(k); err != nil {
		return "the Ed25519 key is not 32 bytes"
	}
	var p curve.EdwardsPoint
	if _, err := p.SetCompressedY(&enc); err != nil {
		return "the Ed25519 key is not a point on the curve"
	}
	var again curve.CompressedEdwardsY
	if again.SetEdwardsPoint(&p); again.Equal(&enc) != 1 {
		return "the Ed25519 key is not canonically encoded"
	}
	if p.IsSmallOrder() {
		return "the Ed25519 key is a point of small order, under which anyone could forge signatures"
	}
	if !p.IsTorsionFree() {
		return "the Ed25519 key has a small-order component; a key made by an Ed25519 key generator never has one"
	}
	return ""
}

// keyProblem is publicKeyProblem plus the checks too costly for every
// signature check: what a key must pass to be bound to an agent.
func keyProblem(pub crypto.PublicKey) string {
	if reason := publicKeyProblem(pub); reason != "" {
		return reason
	}
	if k, ok := pub.(ed25519.PublicKey); ok {
		return ed25519PointProblem(k)
	}
	return ""
}
