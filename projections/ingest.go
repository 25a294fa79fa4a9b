package projections

import (
	"crypto"
	"runtime"
	"sync"

	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/protocol"
)

// IngestVerifier checks signatures at the edge, in the bridge's parallel
// validation workers, so that the fold, which runs on one goroutine, finds
// most verdicts already made. It only memoises: the fold uses a verdict
// only if it was made with the key the fold itself would use, and checks
// the signature itself otherwise, so nothing here can change an outcome.
type IngestVerifier struct {
	Registry *Registry
	Cache    *VerdictCache
	batcher  protocol.SigBatcher
}

// NeedsCheck reports whether the fold will judge env's signature against a
// key, which VerifyBatch then checks ahead of it: a message the policy
// wants signed, or one that carries a signature, from a sender with a key;
// and an auth.request to the node that carries one, against the key it
// carries (one to anyone else binds nothing, and the fold does not check
// it for that).
func (v *IngestVerifier) NeedsCheck(env *events.Envelope, msg *protocol.Message) bool {
	if v == nil || msg.Info.Name == protocol.TypeZoneJoin {
		return false
	}
	if msg.Info.Name == protocol.TypeAuthRequest && msg.HasSignatureMember() && env.To == v.Registry.node {
		return true
	}
	if !MessageNeedsSignature(msg) && !msg.HasSignatureMember() {
		return false
	}
	_, _, ok := v.Registry.CurrentKey(env.From)
	return ok
}

// VerifyBatch checks, for every envelope of envs (each with its Msg set)
// whose signature the fold will check, that signature against its
// sender's current key and, for an auth.request, against the key it
// carries, and records the outcomes (and the carried key as parsed), so
// that the fold, which runs on one goroutine, finds them made. A message
// without a signature is not checked: the fold refuses it, where its
// sender has a key and the policy wants it signed, without a check. The
// Ed25519 signatures are checked together (protocol.SigBatcher), about
// half the cost of one by one, to the same outcomes. It is safe to call
// from many goroutines.
func (v *IngestVerifier) VerifyBatch(envs []*events.Envelope) {
	if v == nil {
		return
	}
	var (
		checks  [ingestBatchMax]protocol.SigCheck
		entries [ingestBatchMax]VerdictEntry
		errs    [ingestBatchMax]error
		n       int
	)
	flush := func() {
		v.batcher.VerifyBatch(checks[:n], errs[:n])
		for j := range n {
			entries[j].Err = errs[j]
		}
		v.Cache.PutAll(entries[:n])
		clear(checks[:n])
		clear(entries[:n])
		clear(errs[:n])
		n = 0
	}
	check := func(env *events.Envelope, pub crypto.PublicKey, keyID string) {
		checks[n] = envelopeCheck(pub, env)
		entries[n] = VerdictEntry{Env: env, KeyID: keyID}
		if n++; n == ingestBatchMax {
			flush()
		}
	}
	for _, env := range envs {
		m := env.Msg
		if m == nil || !m.HasSignatureMember() || m.Info.Name == protocol.TypeZoneJoin {
			continue
		}
		// The key lookup takes only the registry's key lock, never the
		// runner's: the fold holds that while it applies a stretch of
		// events, and the validation workers must not wait for it.
		pub, kid, ok := v.Registry.CurrentKey(env.From)
		if p, isReq := m.Payload.(*protocol.AuthRequest); isReq && env.To == v.Registry.node {
			// The proof of possession: the fold checks the request
			// against the key it carries, which it would otherwise parse
			// (a scalar multiplication for Ed25519) and check on its one
			// goroutine, for any sender, keyed or not.
			ck := ParseCarriedKey(p.PublicKey)
			v.Cache.PutAll([]VerdictEntry{{Env: env, Carried: ck}})
			if ck.Err == nil && (!ok || ck.KeyID != kid) {
				check(env, ck.Pub, ck.KeyID)
			}
		}
		if ok {
			check(env, pub, kid)
		}
	}
	flush()
}

// Forget drops what VerifyBatch recorded for env, whose event the fold
// will not apply (the bridge's resends and failed appends); the fold
// drops the rest as it applies them.
func (v *IngestVerifier) Forget(env *events.Envelope) {
	if v != nil {
		v.Cache.Forget(env)
	}
}

// ingestBatchMax is how many signatures VerifyBatch hands protocol at
// once, and the largest part of a stretch Prefetch gives one core.
const ingestBatchMax = 128 // signatures

// prefetchPartMin is the smallest part of a stretch Prefetch gives one
// core when there are more cores than parts of ingestBatchMax.
const prefetchPartMin = 8 // events

// Prefetch implements Prefetcher: it decodes a stretch of events read back
// from the stream and checks their signatures on every core, in batches,
// so that a replay at start does not check them one by one in the fold.
// The keys it uses are the registry's as it stands before the stretch; a
// verdict made with a key the fold will not use is ignored by the fold,
// which then checks for itself.
func (v *IngestVerifier) Prefetch(envs []*events.Envelope) {
	work := make(chan []*events.Envelope)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for part := range work {
				for _, e := range part {
					if e.Msg == nil {
						if msg, err := protocol.Parse(e.Frame()); err == nil {
							e.Msg = msg
						}
					}
				}
				v.VerifyBatch(part)
			}
		}()
	}
	// Parts of an equal share per core, so that every core has work,
	// but no smaller than a batch worth making.
	part := min(ingestBatchMax, max(prefetchPartMin, (len(envs)+runtime.GOMAXPROCS(0)-1)/runtime.GOMAXPROCS(0)))
	for len(envs) > 0 {
		n := min(len(envs), part)
		work <- envs[:n]
		envs = envs[n:]
	}
	close(work)
	wg.Wait()
}
