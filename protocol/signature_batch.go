package protocol

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"sync"
	"sync/atomic"

	voied25519 "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"
)

// ed25519BatchMax bounds the Ed25519 signatures checked in one batch. A
// batch's cost per signature falls quickly up to a few dozen and slowly
// after (docs/SIGNATURES.md: 17 µs at 8, 14.6 at 32 and
// 12.9 at 128, against 28 alone), while every signature in it waits for
// the whole batch, about 1.7 ms at 128; in the node 128 cost 5-12% less
// CPU a signed transfer than 32, and 256 no less than 128.
const ed25519BatchMax = 128 // signatures

// ed25519BatchMin is the fewest Ed25519 signatures checked as a batch.
// A batch of two costs what two lone checks cost, and a batch with a bad
// signature in it costs the batch and then every check alone: at two,
// twice the lone checks; at four 1.7 times, at 32 1.4 (docs/DESIGN.md).
const ed25519BatchMin = 4 // signatures

// ed25519BatchPause is how many signatures a SigBatcher checks one by one
// after a batch of its failed. A bad signature makes its batch cost the
// batch and then every check alone, 1.4 to 1.7 times the lone checks; a
// sender who slipped one into every batch would make the node pay that
// for all its traffic. After a failure the batcher checks one batch's
// worth alone: with a bad signature in every batch, that brings the cost
// to 1.25 to 1.3 times the lone checks, and a rare bad signature costs the
// honest traffic only one batch's gain (docs/DESIGN.md).
const ed25519BatchPause = ed25519BatchMax // signatures

// SigCheck is one signature for VerifyBatch to check: the sender's public
// key and the frame's FROM, TO, TYPE and body, as Verify takes them.
type SigCheck struct {
	Key            crypto.PublicKey
	From, To, Type string
	Credits        string // the CREDITS header, "" where the frame has none
	Body           []byte
}

// SigBatcher checks signatures in batches (VerifyBatch). It remembers
// only when a batch last failed, to check alone for a while after
// (ed25519BatchPause); each path that checks keeps its own (aglxd: its
// validation workers one, its replay one), so that a failure on one does
// not change how another checks. Its zero
// value is ready to use; it is safe for concurrent use and must not be
// copied.
type SigBatcher struct {
	pause atomic.Int64 // signatures still to check alone
}

// VerifyBatch checks the signature of every check and sets errs[i] to what
// Verify would return for checks[i]; errs must be as long as checks.
// Ed25519 signatures are checked in batches of up to ed25519BatchMax:
// one multi-scalar multiplication under random weights for the whole
// batch, about half the cost of checking them one by one. A batch that
// fails is checked one by one. Under the node's cofactored rule
// (ed25519Rules) a batch's verdict on every signature is that signature's
// own verdict, except with probability 2^-128 per batch, so how
// signatures were grouped never changes an outcome.
func (b *SigBatcher) VerifyBatch(checks []SigCheck, errs []error) {
	if len(errs) != len(checks) {
		panic("protocol: VerifyBatch needs one error slot per check")
	}
	var (
		idx        [ed25519BatchMax]int // into checks
		prep       [ed25519BatchMax]preparedCheck
		keys       [ed25519BatchMax]ed25519.PublicKey
		msgs, sigs [ed25519BatchMax][]byte
		ok         [ed25519BatchMax]bool
		n          int
	)
	flush := func() {
		b.verifyEd25519(ed25519Keys, keys[:n], msgs[:n], sigs[:n], ok[:n])
		for j := range n {
			if !ok[j] {
				c := checks[idx[j]]
				errs[idx[j]] = prep[j].mismatch(c.Key, c.From)
			}
		}
		n = 0
	}
	for i, c := range checks {
		p, err := prepareCheck(c.Key, c.From, c.To, c.Type, c.Credits, c.Body)
		errs[i] = err
		if err != nil {
			continue
		}
		if k, isEd := c.Key.(ed25519.PublicKey); isEd {
			idx[n], prep[n], keys[n], msgs[n], sigs[n] = i, p, k, p.input, p.sig
			if n++; n == ed25519BatchMax {
				flush()
			}
			continue
		}
		if !verifyWith(c.Key, p.input, p.sig) {
			errs[i] = p.mismatch(c.Key, c.From)
		}
	}
	flush()
}

// batchVerifiers keeps voi's batch verifiers, whose entry slices are
// worth reusing.
var batchVerifiers = sync.Pool{New: func() any { return voied25519.NewBatchVerifierWithCapacity(ed25519BatchMax) }}

// verifyEd25519 sets ok[j] to whether sigs[j] verifies over msgs[j] under
// keys[j] by ed25519Rules, through the cache c: as a batch, unless a batch
// of b's failed within the last ed25519BatchPause signatures. At most
// ed25519BatchMax signatures.
func (b *SigBatcher) verifyEd25519(c *ed25519KeyCache, keys []ed25519.PublicKey, msgs, sigs [][]byte, ok []bool) {
	if b.pause.Load() > 0 {
		b.pause.Add(-int64(len(keys)))
		c.verifyEach(keys, msgs, sigs, ok)
		return
	}
	if c.verifyBatch(keys, msgs, sigs, ok) {
		b.pause.Store(ed25519BatchPause)
	}
}

// verifyEach checks the signatures one by one.
func (c *ed25519KeyCache) verifyEach(keys []ed25519.PublicKey, msgs, sigs [][]byte, ok []bool) {
	for j, k := range keys {
		ok[j] = c.verify(k, msgs[j], sigs[j])
	}
}

// verifyBatch sets ok[j] to whether sigs[j] verifies over msgs[j] under
// keys[j] by ed25519Rules: the same verdicts as verifyWith gives one by
// one, reached together, through the cache c. Cached keys are used
// expanded, a key not cached is expanded once per batch however often it
// occurs, and kept once a signature has verified under it, as in the
// single check. Fewer than ed25519BatchMin are checked one by one. It
// reports whether a batch was checked and failed. At most
// ed25519BatchMax signatures.
func (c *ed25519KeyCache) verifyBatch(keys []ed25519.PublicKey, msgs, sigs [][]byte, ok []bool) (failed bool) {
	if len(keys) < ed25519BatchMin {
		c.verifyEach(keys, msgs, sigs, ok)
		return false
	}
	bv := batchVerifiers.Get().(*voied25519.BatchVerifier)
	defer func() { batchVerifiers.Put(bv.Reset()) }()
	var fresh [ed25519BatchMax]*voied25519.ExpandedPublicKey // keys expanded here, to cache if they verify
	for j, k := range keys {
		// A key of the wrong length would be cut to size by the cache's
		// lookup and could match another key; voi refuses it on its own.
		if len(k) != ed25519.PublicKeySize {
			bv.AddWithOptions(voied25519.PublicKey(k), msgs[j], sigs[j], ed25519Rules)
			continue
		}
		e := c.get(k)
		for i := 0; e == nil && i < j; i++ { // expanded earlier in this batch?
			if fresh[i] != nil && bytes.Equal(keys[i], k) {
				e, fresh[j] = fresh[i], fresh[i]
			}
		}
		if e == nil {
			var err error
			if e, err = voied25519.NewExpandedPublicKey(voied25519.PublicKey(k)); err != nil {
				// Not a point: voi refuses the entry on its own.
				bv.AddWithOptions(voied25519.PublicKey(k), msgs[j], sigs[j], ed25519Rules)
				continue
			}
			fresh[j] = e
		}
		bv.AddExpandedWithOptions(e, msgs[j], sigs[j], ed25519Rules)
	}
	allValid, valid := bv.Verify(nil) // crypto/rand draws the weights
	c.batches.Add(1)
	c.batched.Add(uint64(len(keys)))
	if !allValid {
		c.failed.Add(1)
	}
	for j, k := range keys {
		ok[j] = valid[j] && len(k) == ed25519.PublicKeySize
		if ok[j] && fresh[j] != nil { // as in the single check: cached once a signature verified
			c.putExpanded(k, fresh[j])
		}
	}
	return !allValid
}
