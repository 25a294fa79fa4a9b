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
}

// NeedsCheck reports whether Verify would check env's signature: the
// policy covers the message and its sender has a key.
func (v *IngestVerifier) NeedsCheck(env *events.Envelope, msg *protocol.Message) bool {
	if v == nil || !MessageNeedsSignature(msg) {
		return false
	}
	_, _, ok := v.Registry.CurrentKey(env.From)
	return ok
}

// Verify checks env's signature against its sender's current key, if the
// message is one the policy covers and the sender has a key, and records
// the verdict. It is safe to call from many goroutines.
func (v *IngestVerifier) Verify(env *events.Envelope, msg *protocol.Message) {
	if v == nil || !MessageNeedsSignature(msg) {
		return
	}
	// The key lookup takes only the registry's key lock, never the
	// runner's: the fold holds that while it applies a stretch of events,
	// and the validation workers must not wait for it.
	pub, kid, ok := v.Registry.CurrentKey(env.From)
	if !ok {
		return
	}
	v.Cache.Put(env.ID, kid, VerifyEnvelope(pub, env) == nil)
}

// Prefetch implements Prefetcher: it decodes a stretch of events read back
// from the stream and checks their signatures on every core, so that a
// replay at start does not check them one by one in the fold. The keys it
// uses are the registry's as it stands before the stretch; a verdict made
// with a key the fold will not use is ignored by the fold, which then
// checks for itself.
func (v *IngestVerifier) Prefetch(envs []*events.Envelope) {
	work := make(chan *events.Envelope)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e := range work {
				if e.Msg == nil {
					if msg, err := protocol.Parse(e.Frame()); err == nil {
						e.Msg = msg
					}
				}
				if e.Msg != nil {
					v.Verify(e, e.Msg)
				}
			}
		}()
	}
	for _, e := range envs {
		work <- e
	}
	close(work)
	wg.Wait()
}
