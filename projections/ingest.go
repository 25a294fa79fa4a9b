package projections

import (
	"crypto"

	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/protocol"
)

// IngestVerifier checks signatures at the edge, in the bridge's parallel
// validation workers, so that the fold, which runs on one goroutine, finds
// most verdicts already made. It only memoises: the fold uses a verdict
// only if it was made with the key the fold itself would use, and checks
// the signature itself otherwise, so nothing here can change an outcome.
type IngestVerifier struct {
	Runner   *Runner
	Registry *Registry
	Cache    *VerdictCache
}

// Verify checks env's signature against its sender's current key, if the
// message is one the policy covers and the sender has a key, and records
// the verdict. It is safe to call from many goroutines.
func (v *IngestVerifier) Verify(env *events.Envelope, msg *protocol.Message) {
	if v == nil || !MessageNeedsSignature(msg) {
		return
	}
	var (
		pub crypto.PublicKey
		kid string
		ok  bool
	)
	// Only the key lookup holds the runner's read lock; the verification,
	// the expensive part, runs outside it.
	v.Runner.View(func(uint64) { pub, kid, ok = v.Registry.CurrentKey(env.From) })
	if !ok {
		return
	}
	v.Cache.Put(env.ID, kid, VerifyEnvelope(pub, env) == nil)
}
