package projections

import (
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

// NeedsCheck reports whether VerifyBatch would check env's signature: the
// policy covers the message and its sender has a key.
func (v *IngestVerifier) NeedsCheck(env *events.Envelope, msg *protocol.Message) bool {
	if v == nil || !MessageNeedsSignature(msg) {
		return false
	}
	_, _, ok := v.Registry.CurrentKey(env.From)
	return ok
}

// VerifyBatch checks the signature of every envelope of envs (each with
// its Msg set) against its sender's current key, where the policy covers
// the message and the sender has a key, and records the verdicts. The
// Ed25519 signatures are checked together (protocol.SigBatcher), about
// half the cost of one by one, to the same verdicts. It is safe to call
// from many goroutines.
func (v *IngestVerifier) VerifyBatch(envs []*events.Envelope) {
	if v == nil {
		return
	}
	var (
		checks   [ingestBatchMax]protocol.SigCheck
		verdicts [ingestBatchMax]VerdictEntry
		errs     [ingestBatchMax]error
		n        int
	)
	flush := func() {
		v.batcher.VerifyBatch(checks[:n], errs[:n])
		for j := range n {
			verdicts[j].OK = errs[j] == nil
		}
		v.Cache.PutAll(verdicts[:n])
		clear(checks[:n])
		clear(verdicts[:n])
		n = 0
	}
	for _, env := range envs {
		if env.Msg == nil || !MessageNeedsSignature(env.Msg) {
			continue
		}
		// The key lookup takes only the registry's key lock, never the
		// runner's: the fold holds that while it applies a stretch of
		// events, and the validation workers must not wait for it.
		pub, kid, ok := v.Registry.CurrentKey(env.From)
		if !ok {
			continue
		}
		checks[n] = envelopeCheck(pub, env)
		verdicts[n] = VerdictEntry{Env: env, KeyID: kid}
		if n++; n == ingestBatchMax {
			flush()
		}
	}
	flush()
}

// ingestBatchMax is how many signatures VerifyBatch hands protocol at
// once, and the largest part of a stretch Prefetch gives one core.
const ingestBatchMax = 64 // signatures

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
