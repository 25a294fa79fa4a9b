package projections

import "github.com/aglx/ledger/reputation"

// Folds is the node's set of projections, made and ordered in one place:
// the node, the benchmark's node and its cold replay all fold the log
// through the same set, in the same order, so that none of them drifts.
type Folds struct {
	// Registry comes first: every later fold asks it whether the event's
	// signature holds, and with the keys as they stood before the event.
	Registry *Registry
	// Credits (the ledger) answers credit and task messages.
	Credits *Credits
	// Handshakes follows both, and leaves out what they refused.
	Handshakes *Handshakes
	// Reputation reads what the tracker matched; the registry reads its
	// scores, as of the event before, for zone.join.
	Reputation *Reputation
	Stats      *Stats
}

// NewFolds makes the node's folds from the registry's configuration; its
// Reputation is replaced by the scores the reputation fold keeps, and the
// ledger answers into the same Outbox (nil: no replies, as in a replay
// that only rebuilds).
func NewFolds(cfg RegistryConfig) *Folds {
	scores := reputation.New()
	cfg.Reputation = scores.Fraction
	f := &Folds{Registry: NewRegistry(cfg), Stats: NewStats()}
	f.Credits = NewCredits(cfg.NodeURI, f.Registry, cfg.Outbox)
	f.Handshakes = NewHandshakes(f.Registry, f.Registry, f.Credits)
	f.Reputation = NewReputation(scores, f.Registry, f.Handshakes)
	return f
}

// All lists the folds in the order the runner applies them.
func (f *Folds) All() []Projection {
	return []Projection{f.Registry, f.Credits, f.Handshakes, f.Reputation, f.Stats}
}
