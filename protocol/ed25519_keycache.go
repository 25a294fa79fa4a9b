package protocol

import (
	"crypto/ed25519"
	"sync"
	"sync/atomic"

	voied25519 "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"
)

// ed25519KeyCacheMax bounds the Ed25519 public keys kept in their expanded
// form: about 1.5 KiB each, so some 6 MiB in all.
const ed25519KeyCacheMax = 4096 // keys

// ed25519KeyCache keeps public keys decompressed, with the table voi
// builds from them, so that an agent's next signature skips that work
// (about 3 µs of a 30 µs check). The expansion is a pure function of the
// key's 32 bytes, so a cached entry can never make a verdict differ. A key
// enters only after a signature has verified under it the plain way: an
// auth.request carries its own key, and a flood of them with fresh keys
// and bad signatures would otherwise churn out the keys in use and cost an
// allocation each. When the cache is full an arbitrary entry makes room. A
// node with more busy keys than the bound gains little from it.
type ed25519KeyCache struct {
	mu   sync.RWMutex
	keys map[[ed25519.PublicKeySize]byte]*voied25519.ExpandedPublicKey
	// The counters of Ed25519Counters.
	lone, batches, batched, failed atomic.Uint64
}

// Ed25519Stats counts the node's Ed25519 checks since it started, for
// operators: how much of the work batching takes, and how often a batch
// failed. A batch fails when at least one signature in it does not verify
// under the key it was checked with: a forged or broken signature, or one
// checked ahead of the fold with a key its sender has since rotated (the
// fold then checks it again with the right key).
type Ed25519Stats struct {
	Lone          uint64 // signatures the node chose to check one by one
	Batches       uint64 // batches handed to the batch verifier
	Batched       uint64 // signatures in those batches
	FailedBatches uint64 // batches with a signature that failed; each of theirs was then checked alone
}

// Ed25519Counters returns the counts of the node's Ed25519 checks.
func Ed25519Counters() Ed25519Stats {
	c := ed25519Keys
	return Ed25519Stats{Lone: c.lone.Load(), Batches: c.batches.Load(), Batched: c.batched.Load(), FailedBatches: c.failed.Load()}
}

var ed25519Keys = &ed25519KeyCache{keys: make(map[[ed25519.PublicKeySize]byte]*voied25519.ExpandedPublicKey)}

// get returns k expanded, or nil if it is not cached. k must be
// ed25519.PublicKeySize bytes.
func (c *ed25519KeyCache) get(k ed25519.PublicKey) *voied25519.ExpandedPublicKey {
	var id [ed25519.PublicKeySize]byte
	copy(id[:], k)
	c.mu.RLock()
	e := c.keys[id]
	c.mu.RUnlock()
	return e
}

// put expands k and keeps it, if it decodes as a point. k must be
// ed25519.PublicKeySize bytes.
func (c *ed25519KeyCache) put(k ed25519.PublicKey) {
	e, err := voied25519.NewExpandedPublicKey(voied25519.PublicKey(k))
	if err != nil {
		return
	}
	c.putExpanded(k, e)
}

// putExpanded keeps e, the expansion of k.
func (c *ed25519KeyCache) putExpanded(k ed25519.PublicKey, e *voied25519.ExpandedPublicKey) {
	var id [ed25519.PublicKeySize]byte
	copy(id[:], k)
	c.mu.Lock()
	if _, ok := c.keys[id]; !ok && len(c.keys) >= ed25519KeyCacheMax {
		for old := range c.keys {
			delete(c.keys, old)
			break
		}
	}
	c.keys[id] = e
	c.mu.Unlock()
}

// verify checks sig over msg under k with ed25519Rules, through the cache:
// a cached key is used expanded; otherwise the check runs the plain way,
// and the key is cached once a signature has verified under it. A key of
// the wrong length fails: voi, like the standard library, panics on it,
// and the cache's lookup would cut it to size.
func (c *ed25519KeyCache) verify(k ed25519.PublicKey, msg, sig []byte) bool {
	c.lone.Add(1)
	if len(k) != ed25519.PublicKeySize {
		return false
	}
	if e := c.get(k); e != nil {
		return voied25519.VerifyExpandedWithOptions(e, msg, sig, ed25519Rules)
	}
	if !voied25519.VerifyWithOptions(voied25519.PublicKey(k), msg, sig, ed25519Rules) {
		return false
	}
	c.put(k)
	return true
}
