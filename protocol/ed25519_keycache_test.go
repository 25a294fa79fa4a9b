package protocol

import (
	"crypto/ed25519"
	"encoding/binary"
	"slices"
	"sync"
	"testing"

	voied25519 "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"
)

func newKeyCache() *ed25519KeyCache {
	return &ed25519KeyCache{keys: make(map[[ed25519.PublicKeySize]byte]*voied25519.ExpandedPublicKey)}
}

// TestEd25519KeyCacheIsBounded: however many keys pass through, from
// several goroutines at once, the cache holds at most ed25519KeyCacheMax,
// each the expansion of its own key, and keeps no key that is no point.
func TestEd25519KeyCacheIsBounded(t *testing.T) {
	c := newKeyCache()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range ed25519KeyCacheMax/2 + 100 {
				var seed [ed25519.SeedSize]byte
				binary.LittleEndian.PutUint64(seed[:], uint64(w*1_000_000+i))
				pub := ed25519.NewKeyFromSeed(seed[:]).Public().(ed25519.PublicKey)
				c.put(pub)
				if e := c.get(pub); e != nil {
					if y := e.CompressedY(); string(y[:]) != string(pub) {
						t.Errorf("the cache holds %x under the key %x", y[:], []byte(pub))
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	if n := len(c.keys); n > ed25519KeyCacheMax || n < ed25519KeyCacheMax/2 {
		t.Fatalf("the cache holds %d keys; want up to its bound, %d", n, ed25519KeyCacheMax)
	}
	offCurve := ed25519.PublicKey(mustHex(t, weakEd25519Keys["off the curve"]))
	c.put(offCurve)
	if c.get(offCurve) != nil {
		t.Fatalf("the cache kept a key that is no point: %x", []byte(offCurve))
	}
}

// TestEd25519KeyCacheTakesOnlyKeysThatSigned: a key enters the cache only
// once a signature has verified under it, so keys sent along with bad
// signatures (an auth.request carries its own) cannot push out the keys
// in use; and a cached key gives the same verdicts.
func TestEd25519KeyCacheTakesOnlyKeysThatSigned(t *testing.T) {
	c := newKeyCache()
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	msg := []byte("AGLX-SIG-1\nagent://a.local\nregistry://localhost\nauth.request\n{}")
	sig := ed25519.Sign(priv, msg)
	bad := append([]byte(nil), sig...)
	bad[0] ^= 1
	if c.verify(pub, msg, bad) {
		t.Fatal("a bad signature verified")
	}
	if c.get(pub) != nil {
		t.Fatal("a key entered the cache with a signature that failed")
	}
	if !c.verify(pub, msg, sig) {
		t.Fatal("a good signature failed")
	}
	if c.get(pub) == nil {
		t.Fatal("a key whose signature verified was not cached")
	}
	if !c.verify(pub, msg, sig) || c.verify(pub, msg, bad) {
		t.Fatal("the cached key gives other verdicts")
	}
}

// TestEd25519KeyCacheBatchTakesOnlyKeysThatSigned: the batch check keeps
// the cache's rule. In a batch where one key signs badly, another well,
// and a third signs twice (once badly), only the keys with a signature
// that verified are cached, and the verdicts are the single check's.
func TestEd25519KeyCacheBatchTakesOnlyKeysThatSigned(t *testing.T) {
	c := newKeyCache()
	msg := []byte("AGLX-SIG-1\nagent://a.local\nregistry://localhost\ncredit.transfer\n{}")
	var pubs []ed25519.PublicKey
	var good, bad [][]byte
	for range 3 {
		pub, priv, err := ed25519.GenerateKey(nil)
		if err != nil {
			t.Fatal(err)
		}
		sig := ed25519.Sign(priv, msg)
		spoilt := append([]byte(nil), sig...)
		spoilt[40] ^= 1
		pubs, good, bad = append(pubs, pub), append(good, sig), append(bad, spoilt)
	}
	keys := []ed25519.PublicKey{pubs[0], pubs[1], pubs[2], pubs[2]}
	sigs := [][]byte{bad[0], good[1], bad[2], good[2]}
	msgs := [][]byte{msg, msg, msg, msg}
	ok := make([]bool, len(keys))
	c.verifyBatch(keys, msgs, sigs, ok)
	if want := []bool{false, true, false, true}; !slices.Equal(ok, want) {
		t.Fatalf("verdicts %v, want %v", ok, want)
	}
	if c.get(pubs[0]) != nil {
		t.Error("a key entered the cache with a signature that failed")
	}
	if c.get(pubs[1]) == nil || c.get(pubs[2]) == nil {
		t.Error("a key whose signature verified in a batch was not cached")
	}
	// Through the cache now: the same verdicts.
	c.verifyBatch(keys, msgs, sigs, ok)
	if want := []bool{false, true, false, true}; !slices.Equal(ok, want) {
		t.Fatalf("with the keys cached, verdicts %v, want %v", ok, want)
	}
}

// TestEd25519BatchPausesAfterAFailure: after a batch of a SigBatcher's
// fails, its next ed25519BatchPause signatures are checked one by one, to
// the same verdicts, and batches resume after them; another batcher is
// not affected. The cache's counters count what was done.
func TestEd25519BatchPausesAfterAFailure(t *testing.T) {
	c := newKeyCache()
	var b, other SigBatcher
	good := honestCases(t, 8)
	batch := func(b *SigBatcher, cases []sigCase) []bool {
		var keys []ed25519.PublicKey
		var msgs, sigs [][]byte
		for _, h := range cases {
			keys, msgs, sigs = append(keys, h.pub), append(msgs, h.msg), append(sigs, h.sig)
		}
		ok := make([]bool, len(keys))
		b.verifyEd25519(c, keys, msgs, sigs, ok)
		return ok
	}
	if ok := batch(&b, good); slices.Contains(ok, false) || b.pause.Load() != 0 {
		t.Fatalf("honest batch: verdicts %v, pause %d", ok, b.pause.Load())
	}
	spoilt := slices.Clone(good)
	spoilt[3].sig = slices.Clone(spoilt[3].sig)
	spoilt[3].sig[40] ^= 1
	if ok := batch(&b, spoilt); ok[3] || slices.Contains(append(ok[:3:3], ok[4:]...), false) {
		t.Fatalf("batch with one bad signature: verdicts %v", ok)
	}
	if got := b.pause.Load(); got != ed25519BatchPause {
		t.Fatalf("after a failed batch the pause is %d, want %d", got, ed25519BatchPause)
	}
	if n, sigs, f, lone := c.batches.Load(), c.batched.Load(), c.failed.Load(), c.lone.Load(); n != 2 || sigs != 16 || f != 1 || lone != 0 {
		t.Fatalf("counted %d batches of %d signatures, %d failed, %d lone checks; want 2, 16, 1, 0", n, sigs, f, lone)
	}
	if ok := batch(&other, good); slices.Contains(ok, false) || c.batches.Load() != 3 || other.pause.Load() != 0 {
		t.Fatalf("another batcher: verdicts %v, %d batches counted, pause %d; want a batch of its own", ok, c.batches.Load(), other.pause.Load())
	}
	for left := int64(ed25519BatchPause); left > 0; left -= int64(len(good)) {
		if ok := batch(&b, good); slices.Contains(ok, false) {
			t.Fatalf("during the pause: verdicts %v", ok)
		}
		if got := b.pause.Load(); got != left-int64(len(good)) {
			t.Fatalf("the pause is %d after a batch of %d, want %d", got, len(good), left-int64(len(good)))
		}
	}
	if lone := c.lone.Load(); lone != ed25519BatchPause {
		t.Fatalf("counted %d lone checks during a pause of %d", lone, ed25519BatchPause)
	}
	before := c.batches.Load()
	if ok := batch(&b, good); slices.Contains(ok, false) || c.batches.Load() != before+1 {
		t.Fatalf("after the pause: verdicts %v, %d batches counted; want one more than %d", ok, c.batches.Load(), before)
	}
}
