package projections

import (
	"fmt"

	"github.com/aglx/ledger/ledger/statecodec"
)

var _ StateSaver = (*Reputation)(nil)

// SaveState implements StateSaver: the fold's guard against an event
// applied twice, then the scores (reputation.Model.SaveState). The
// registry and the handshake tracker it reads are wiring, saved with
// their own folds.
func (r *Reputation) SaveState(w *statecodec.Writer) error {
	w.Uint(r.lastSeq)
	return r.M.SaveState(w)
}

// LoadState implements StateSaver. The scores are loaded into the model
// the fold was made with, not a new one: NewFolds gave the registry that
// model's Fraction to admit zone members by.
func (r *Reputation) LoadState(rd *statecodec.Reader) error {
	lastSeq := rd.Uint()
	if err := rd.Err(); err != nil {
		return fmt.Errorf("reputation: loading the saved state: %w", err)
	}
	if err := r.M.LoadState(rd); err != nil {
		return err
	}
	r.lastSeq = lastSeq
	return nil
}
