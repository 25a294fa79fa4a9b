package projections

import (
	"crypto"
	"slices"
	"sync"
	"weak"

	"github.com/aglx/ledger/events"
)

// VerdictCacheMax bounds the envelopes a VerdictCache holds verdicts for;
// the oldest go first. A verdict is needed only between ingest and fold,
// which is moments, so 65,536 covers any backlog the pipeline bounds
// allow.
const VerdictCacheMax = 1 << 16 // envelopes

// verdictKeysMax is how many keys one envelope's signature is checked
// under at ingest: its sender's current key, and for an auth.request the
// key it carries, when that is another.
const verdictKeysMax = 2 // keys

// VerdictCache memoises signature checks between the bridge and the fold.
// The bridge verifies each signed frame at ingest, in parallel workers,
// against the sender's key as it is then (CurrentKey) and, for an
// auth.request, against the key it carries, and records each outcome for
// that envelope under that key's id: the error VerifyEnvelope returns, or
// nil. The fold takes a recorded outcome only for the very envelope that
// was checked (the one the log hands on from memory) and only under the
// key the fold itself would use, so the cache changes how fast a verdict
// is reached, never what it is: a verdict, failure and reason included,
// is a pure function of the message and the key.
//
// Failures are kept as well as successes. Until 2026-12-01 only a
// success was, and the fold checked every failed signature again for its
// reason, on the one goroutine every answer waits for: a flood of forged
// frames in a keyed agent's name cost the fold a lone check each (helper
// 70's note).
//
// Until 2026-11-30 a verdict was looked up by event id alone, and a second
// message with the same id (only a client writing into the event stream
// beside the node can make one) took the first one's verdict live but not
// on replay. It is safe for concurrent use; its zero value is ready to
// use.
type VerdictCache struct {
	mu    sync.Mutex
	m     map[string]cachedVerdict
	order []orderEntry // records in order of first Put
	tick  uint64       // counts records made, to tell one from a later one under the same id
}

// orderEntry names a record for eviction: its event id, and which record
// under that id it was (a record dropped by Forget and made again under
// the same id is another one, which the old entry must not evict).
type orderEntry struct {
	id   string
	tick uint64
}

type cachedVerdict struct {
	// env is the envelope checked. Weak: the cache must not keep up to
	// VerdictCacheMax events alive, and a pointer made from another
	// envelope, even one allocated where this one was, never equals it.
	env     weak.Pointer[events.Envelope]
	tick    uint64 // the orderEntry that evicts it
	under   [verdictKeysMax]keyVerdict
	n       int
	carried *CarriedKey
}

// keyVerdict is the outcome of one check: err is nil if the signature
// verified under the key keyID.
type keyVerdict struct {
	keyID string
	err   error
}

// CarriedKey is the key an auth.request carries, as protocol.ParsePublicKey
// read it: the parse costs a scalar multiplication for an Ed25519 key
// (about 30 µs here), which the validation workers pay instead of the
// fold. Like a verdict, it is a pure function of the message.
type CarriedKey struct {
	Pub   crypto.PublicKey
	KeyID string // protocol.KeyID of Pub
	Err   error  // ParsePublicKey's error; Pub is nil then
}

// NewVerdictCache returns an empty cache.
func NewVerdictCache() *VerdictCache { return &VerdictCache{} }

// Put records that the signature env carries did (err nil) or did not
// verify against the key keyID (protocol.KeyID of it); err is what
// VerifyEnvelope returned.
func (c *VerdictCache) Put(env *events.Envelope, keyID string, err error) {
	c.PutAll([]VerdictEntry{{Env: env, KeyID: keyID, Err: err}})
}

// VerdictEntry is one record for PutAll: a verdict under a key (KeyID not
// empty), the key an auth.request carries (Carried not nil), or both.
type VerdictEntry struct {
	Env     *events.Envelope
	KeyID   string
	Err     error // what VerifyEnvelope returned under KeyID: nil if the signature verified
	Carried *CarriedKey
}

// PutAll is Put for each of vs, under one hold of the cache's lock: the
// validation workers record a batch's verdicts at once.
func (c *VerdictCache) PutAll(vs []VerdictEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]cachedVerdict)
	}
	for _, v := range vs {
		w := weak.Make(v.Env)
		cv, dup := c.m[v.Env.ID]
		if !dup || cv.env != w {
			c.tick++
			cv = cachedVerdict{env: w, tick: c.tick}
			c.order = append(c.order, orderEntry{v.Env.ID, c.tick})
		}
		if v.Carried != nil {
			cv.carried = v.Carried
		}
		if v.KeyID != "" {
			cv.put(keyVerdict{v.KeyID, v.Err})
		}
		c.m[v.Env.ID] = cv
		for len(c.m) > VerdictCacheMax {
			c.evict(c.order[0])
			c.order = c.order[1:]
		}
	}
	if len(c.order) > 2*VerdictCacheMax {
		// Forget, and records replaced under their id, leave entries
		// here that name no record: drop them, in one pass per
		// VerdictCacheMax records at least.
		c.order = slices.DeleteFunc(c.order, func(o orderEntry) bool { cv, ok := c.m[o.id]; return !ok || cv.tick != o.tick })
	}
}

// evict drops the record o names, if it is still there.
func (c *VerdictCache) evict(o orderEntry) {
	if cv, ok := c.m[o.id]; ok && cv.tick == o.tick {
		delete(c.m, o.id)
	}
}

// Forget drops what is recorded for env, once the fold has applied it:
// nothing reads it again. Kept until pushed out by newer records, the
// outcomes of 65,536 auth.requests, each with its reasons and the key it
// carried (an RSA key of up to 4,096 bits), held some 70 MB that anyone
// could keep filled (helper-72).
func (c *VerdictCache) Forget(env *events.Envelope) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, found := c.lookupLocked(env); found {
		delete(c.m, env.ID)
	}
}

// put records kv, replacing an outcome under the same key; beyond
// verdictKeysMax keys, the latest replaces the last.
func (cv *cachedVerdict) put(kv keyVerdict) {
	for i := range cv.n {
		if cv.under[i].keyID == kv.keyID {
			cv.under[i] = kv
			return
		}
	}
	if cv.n < verdictKeysMax {
		cv.n++
	}
	cv.under[cv.n-1] = kv
}

// lookupLocked returns what is recorded for env itself: not for another
// envelope with the same event id. c.mu must be held.
func (c *VerdictCache) lookupLocked(env *events.Envelope) (cachedVerdict, bool) {
	cv, found := c.m[env.ID]
	if !found || cv.env != weak.Make(env) {
		return cachedVerdict{}, false
	}
	return cv, true
}

// Get returns the outcome of checking env's signature under the key
// keyID, if one was recorded for env itself: err is nil if it verified.
func (c *VerdictCache) Get(env *events.Envelope, keyID string) (err error, found bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cv, found := c.lookupLocked(env); found {
		for _, kv := range cv.under[:cv.n] {
			if kv.keyID == keyID {
				return kv.err, true
			}
		}
	}
	return nil, false
}

// Carried returns the key recorded as the one env carries (an
// auth.request's), if any.
func (c *VerdictCache) Carried(env *events.Envelope) (*CarriedKey, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cv, found := c.lookupLocked(env); found && cv.carried != nil {
		return cv.carried, true
	}
	return nil, false
}

// Len is the number of envelopes with something recorded.
func (c *VerdictCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
