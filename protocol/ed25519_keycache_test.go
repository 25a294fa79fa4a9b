package protocol

import (
	"crypto/ed25519"
	"encoding/binary"
	"sync"
	"testing"

	voied25519 "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"
)

// TestEd25519KeyCacheIsBounded: however many keys pass through, the cache
// holds at most ed25519KeyCacheMax of them, each the expansion of its own
// key, and gives keys that are not points back as nil.
func TestEd25519KeyCacheIsBounded(t *testing.T) {
	c := &ed25519KeyCache{keys: make(map[[ed25519.PublicKeySize]byte]*voied25519.ExpandedPublicKey)}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range ed25519KeyCacheMax/2 + 100 {
				var seed [ed25519.SeedSize]byte
				binary.LittleEndian.PutUint64(seed[:], uint64(w*1_000_000+i))
				pub := ed25519.NewKeyFromSeed(seed[:]).Public().(ed25519.PublicKey)
				e := c.get(pub)
				if e == nil {
					t.Errorf("the cache gave nothing for key %x", []byte(pub))
					return
				}
				if y := e.CompressedY(); string(y[:]) != string(pub) {
					t.Errorf("the cache gave %v for key %x", e, []byte(pub))
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := len(c.keys); n > ed25519KeyCacheMax {
		t.Fatalf("the cache holds %d keys; the bound is %d", n, ed25519KeyCacheMax)
	}
	offCurve := mustHex(t, weakEd25519Keys["off the curve"])
	if e := c.get(ed25519.PublicKey(offCurve)); e != nil {
		t.Fatalf("the cache expanded a key that is no point: %x", offCurve)
	}
}
