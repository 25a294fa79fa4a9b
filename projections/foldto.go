package projections

import (
	"context"
	"errors"
	"fmt"

	"github.com/aglx/ledger/events"
)

// FoldTo folds the log's events after Applied, up to and including to, read
// from the stream, and returns once the folds hold to. It is for folds
// that serve no one while they work, such as a background copy of the
// node's folds that is brought up to a recent event and saved
// (docs/DESIGN.md, "Saved fold state"): unlike Run it neither follows the
// log nor marks the runner ready, and it takes nothing from the log's
// memory, which belongs to the live folds' pace.
//
// pace, if set, is called after each stretch is handed to the folds, so
// that the caller can bound the CPU the fold takes from the live node by
// sleeping there; its error (a stopped context) ends the fold.
func (r *Runner) FoldTo(ctx context.Context, to uint64, pace func() error) error {
	from := r.Applied() + 1
	if to < from {
		return nil
	}
	pipe := r.newStretchPipe(0)
	var paceErr error
	err := r.log.Read(ctx, events.ReadOptions{StartSeq: from}, func(e *events.Envelope) error {
		if e.Seq > to {
			return events.ErrStop
		}
		if pipe.add(e, prefetchChunk, to) {
			return events.ErrStop
		}
		if pace != nil && len(pipe.chunk) == 0 {
			if paceErr = pace(); paceErr != nil {
				return paceErr
			}
		}
		return nil
	})
	if paceErr != nil {
		return paceErr
	}
	if err != nil && !errors.Is(err, events.ErrStop) {
		return fmt.Errorf("projections: folding events %d to %d: %w", from, to, err)
	}
	pipe.finish()
	if got := r.Applied(); got != to {
		// A log that ends before to, or lacks an event in between (its
		// sequences are dense on the node's own stream).
		return fmt.Errorf("projections: folding events %d to %d: the folds stopped at %d", from, to, got)
	}
	return nil
}
