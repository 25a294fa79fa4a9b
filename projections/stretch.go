package projections

import "github.com/aglx/ledger/events"

// stretchFold folds events read back from the stream a stretch at a time,
// their signatures checked ahead of the fold in batches on every core
// (IngestVerifier.Prefetch), for a one-off replay that has no runner:
// aglx audit, and the node's key history at start and in a rotation. The
// runner's replay overlaps the checks of one stretch with the fold of the
// one before (stretchPipe); these replays are short or run once.
type stretchFold struct {
	verifier *IngestVerifier
	apply    func(*Event)
	buf      []*events.Envelope
}

func newStretchFold(v *IngestVerifier, apply func(*Event)) *stretchFold {
	return &stretchFold{verifier: v, apply: apply, buf: make([]*events.Envelope, 0, prefetchChunk)}
}

// add takes env, folding the stretch once it is full.
func (s *stretchFold) add(env *events.Envelope) {
	if s.buf = append(s.buf, env); len(s.buf) == prefetchChunk {
		s.flush()
	}
}

// flush folds what is held.
func (s *stretchFold) flush() {
	s.verifier.Prefetch(s.buf)
	for _, env := range s.buf {
		ev, _ := NewEvent(env) // an undecodable event is skipped by every fold, as in the node
		s.apply(ev)
	}
	s.buf = s.buf[:0]
}
