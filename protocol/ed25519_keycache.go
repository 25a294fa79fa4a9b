package protocol

import (
	"crypto/ed25519"
	"sync"

	voied25519 "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"
)

// ed25519KeyCacheMax bounds the Ed25519 public keys kept in their expanded
// form: about 1.5 KiB each, so some 6 MiB in all.
const ed25519KeyCacheMax = 4096 // keys

// ed25519KeyCache keeps public keys decompressed, with the table voi
// builds from them, so that an agent's next signature skips that work
// (about 3 µs of a 30 µs check). The expansion is a pure function of the
// key's 32 bytes, so a cached entry can never make a verdict differ; when
// the cache is full an arbitrary entry makes room. A node with more busy
// keys than the bound expands on most checks, which costs about as much
// as it saves elsewhere.
type ed25519KeyCache struct {
	mu   sync.RWMutex
	keys map[[ed25519.PublicKeySize]byte]*voied25519.ExpandedPublicKey
}

var ed25519Keys = &ed25519KeyCache{keys: make(map[[ed25519.PublicKeySize]byte]*voied25519.ExpandedPublicKey)}

// get returns k expanded, or nil if k does not decode as a point (the
// check then fails the slow way, with the same verdict). k must be
// ed25519.PublicKeySize bytes.
func (c *ed25519KeyCache) get(k ed25519.PublicKey) *voied25519.ExpandedPublicKey {
	var id [ed25519.PublicKeySize]byte
	copy(id[:], k)
	c.mu.RLock()
	e := c.keys[id]
	c.mu.RUnlock()
	if e != nil {
		return e
	}
	e, err := voied25519.NewExpandedPublicKey(voied25519.PublicKey(k))
	if err != nil {
		return nil
	}
	c.mu.Lock()
	if len(c.keys) >= ed25519KeyCacheMax {
		for old := range c.keys {
			delete(c.keys, old)
			break
		}
	}
	c.keys[id] = e
	c.mu.Unlock()
	return e
}
