package reputation

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aglx/ledger/ledger/statecodec"
)

// The model's saved state, for projection snapshots: a start loads the
// scores where the last stop left them instead of replaying every rating.
// Everything the model keeps is saved, for it all decides later outcomes:
// the scores weight the raters, the pairs' moved totals hold PairMax and
// their stamps refuse copies, and the counts are shown.
//
// The model holds no floats (scores are millionths, so that a replay
// computes the same digits everywhere), so nothing here needs
// Writer.Float.

// SaveState writes the whole model: the agents by URI, the pairs by rater
// then ratee, then the counts. Sorted, so that the same model always gives
// the same bytes. It does not change the model.
func (m *Model) SaveState(w *statecodec.Writer) error {
	uris := slices.Sorted(maps.Keys(m.agents))
	w.Len(len(uris))
	for _, uri := range uris {
		a := m.agents[uri]
		w.String(uri)
		w.Int(a.Score)
		w.Uint(a.Ratings)
		w.Uint(a.LastSeq)
	}
	pairs := slices.SortedFunc(maps.Keys(m.given), comparePairs)
	w.Len(len(pairs))
	for _, p := range pairs {
		g := m.given[p]
		w.String(p.rater)
		w.String(p.ratee)
		w.Int(g.moved)
		w.Int(g.stamp)
	}
	w.Uint(m.counts.Applied)
	w.Uint(m.counts.Capped)
	w.Uint(m.counts.Refused)
	w.Uint(m.counts.Stale)
	return nil
}

func comparePairs(a, b pair) int {
	if c := strings.Compare(a.rater, b.rater); c != 0 {
		return c
	}
	return strings.Compare(a.ratee, b.ratee)
}

// LoadState reads what SaveState wrote into m, a model fresh from New. A
// state Rate could not have made is refused rather than loaded: keys out
// of order or repeated (the same state must have one encoding), a score
// outside 0 to Scale, a pair that moved nothing or more than PairMax, an
// agent rating itself, more agents or pairs than the bounds hold. Such a
// state would not panic the model, but it would rate on from figures no
// log gives.
func (m *Model) LoadState(r *statecodec.Reader) error {
	// An agent is at least a URI's length, a score, two counts: 4 bytes.
	n := r.Len(4)
	if n > AgentsMax {
		r.Fail(fmt.Errorf("%d agents saved, more than the %d the model holds", n, AgentsMax))
	}
	agents := make(map[string]*Agent, n)
	prev := ""
	for i := 0; i < n && r.Err() == nil; i++ {
		uri := r.String()
		a := &Agent{Score: r.Int(), Ratings: r.Uint(), LastSeq: r.Uint()}
		switch {
		case r.Err() != nil:
		case uri == "" || i > 0 && uri <= prev:
			r.Fail(fmt.Errorf("agent %q is out of order or empty", uri))
		case a.Score < 0 || a.Score > Scale:
			r.Fail(fmt.Errorf("agent %q has the score %d, outside 0 to %d", uri, a.Score, Scale))
		case a.Ratings == 0:
			r.Fail(fmt.Errorf("agent %q has a score of its own and no rating", uri))
		}
		agents[uri] = a
		prev = uri
	}
	// A pair is two strings' lengths and two figures: 4 bytes.
	n = r.Len(4)
	if n > PairsMax {
		r.Fail(fmt.Errorf("%d pairs saved, more than the %d the model remembers", n, PairsMax))
	}
	pairs := make(map[pair]given, n)
	var last pair
	for i := 0; i < n && r.Err() == nil; i++ {
		p := pair{rater: r.String(), ratee: r.String()}
		g := given{moved: r.Int(), stamp: r.Int()}
		switch {
		case r.Err() != nil:
		case p.rater == "" || p.ratee == "" || p.rater == p.ratee:
			r.Fail(fmt.Errorf("the pair %q, %q is no rater and ratee", p.rater, p.ratee))
		case i > 0 && comparePairs(last, p) >= 0:
			r.Fail(fmt.Errorf("the pair %q, %q is out of order", p.rater, p.ratee))
		case g.moved <= 0 || g.moved > PairMax:
			r.Fail(fmt.Errorf("the pair %q, %q moved %d, outside 1 to %d", p.rater, p.ratee, g.moved, PairMax))
		}
		pairs[p] = g
		last = p
	}
	c := Counts{Applied: r.Uint(), Capped: r.Uint(), Refused: r.Uint(), Stale: r.Uint()}
	if err := r.Err(); err != nil {
		return fmt.Errorf("reputation: loading the saved model: %w", err)
	}
	m.agents, m.given, m.counts = agents, pairs, c
	return nil
}
