// Package reputation keeps the agents' reputation scores: a number from 0
// to 1 for each agent, which zones admit by (a zone's min_reputation) and
// which operators read to judge an agent. It is a pure model, like ledger:
// it knows nothing of sockets, NATS or the log, and is fed ratings in log
// order by a fold (projections.Reputation), which decides what counts as a
// rating. docs/REPUTATION.md says why the rules are what they are.
//
// Scores are held in millionths, as integers, so that every replay on
// every platform computes the same digits: a float64 sum could differ by
// the order of operations or a fused multiply-add.
package reputation

import (
	"encoding/json"
	"slices"
	"strings"
)

// Scale is one whole point of reputation: scores and deltas are in
// millionths.
const Scale = 1_000_000

// Default is the score of an agent nobody has rated: halfway, neither
// trusted nor distrusted.
const Default = Scale / 2

// Bounds. A rating past one is not applied, and is counted.
const (
	// PairMax bounds how far one rater can move one agent's score, up and
	// down added together, over the whole log: a fifth of the scale. One
	// friend, or one enemy, cannot make or break an agent on their own.
	PairMax = Scale / 5 // millionths
	// AgentsMax bounds the agents with a score of their own.
	AgentsMax = 1 << 20 // agents
	// PairsMax bounds the rater/ratee pairs remembered for PairMax.
	PairsMax = 1 << 21 // pairs
)

// Model holds every rated agent's score. The zero value is not ready;
// use New.
type Model struct {
	agents map[string]*Agent
	given  map[pair]given
	counts Counts
}

// given is what one rater has done to one ratee: how far it has moved the
// score in all, and the stamp of the last rating applied.
type given struct {
	moved, stamp int64
}

// Agent is one rated agent's standing.
type Agent struct {
	// Score is in millionths, from 0 to Scale.
	Score int64 `json:"score"`
	// Ratings counts the ratings that moved the score; LastSeq is the
	// event of the last one.
	Ratings uint64 `json:"ratings"`
	LastSeq uint64 `json:"last_seq"`
}

// Counts are the model's running totals.
type Counts struct {
	Applied uint64 `json:"applied"`
	// Capped counts ratings cut short by PairMax; Refused those not
	// applied at all (the pair had used its share, or a bound was full);
	// Stale those not stamped after the pair's last rating (copies).
	Capped  uint64 `json:"capped"`
	Refused uint64 `json:"refused"`
	Stale   uint64 `json:"stale"`
}

type pair struct{ rater, ratee string }

// New returns an empty model.
func New() *Model {
	return &Model{agents: map[string]*Agent{}, given: map[pair]given{}}
}

// Score returns uri's score in millionths; Default if nobody rated it.
func (m *Model) Score(uri string) int64 {
	if a := m.agents[uri]; a != nil {
		return a.Score
	}
	return Default
}

// Fraction returns uri's score from 0 to 1, as zones compare it.
func (m *Model) Fraction(uri string) float64 { return float64(m.Score(uri)) / Scale }

// Agent returns uri's standing, and whether anyone rated it.
func (m *Model) Agent(uri string) (Agent, bool) {
	if a := m.agents[uri]; a != nil {
		return *a, true
	}
	return Agent{Score: Default}, false
}

// Counts returns the running totals.
func (m *Model) Counts() Counts { return m.counts }

// Rated is how many agents have a score of their own.
func (m *Model) Rated() int { return len(m.agents) }

// Rate applies the rating delta (millionths, from -Scale to Scale) that
// rater gives ratee at the event seq, and returns how far it moved the
// score and, if it moved less than asked, why. stamp orders one rater's
// ratings of one ratee (the rating message's own signed timestamp, in
// nanoseconds): a rating not stamped after the last one applied is a copy
// of an earlier message, or older than what the rater said since, and is
// not applied.
//
// The move is delta, weighted by the rater's own score and by the room
// left in its direction: up by delta * w * (Scale - s), down by |delta| * w
// * s, over Scale squared, where s is the ratee's score and w the rater's.
// So a score approaches 0 and 1 but never leaves them, a rater nobody
// trusts moves little, and the same praise lifts a low score more than a
// high one. Integer division truncates toward zero, so a replay computes
// the same digits. No rater moves one ratee by more than PairMax in all.
func (m *Model) Rate(rater, ratee string, delta, stamp int64, seq uint64) (moved int64, why string) {
	delta = max(-Scale, min(Scale, delta))
	if delta == 0 || rater == ratee || rater == "" || ratee == "" {
		return 0, "no rating: a zero delta, or an agent rating itself"
	}
	p := pair{rater, ratee}
	g, known := m.given[p]
	if !known && len(m.given) >= PairsMax {
		m.counts.Refused++
		return 0, "the model remembers the most rater/ratee pairs it can"
	}
	if known && stamp <= g.stamp {
		m.counts.Stale++
		return 0, "not stamped after this rater's last rating of this agent: a copy, or overtaken"
	}
	a := m.agents[ratee]
	if a == nil && len(m.agents) >= AgentsMax {
		m.counts.Refused++
		return 0, "the model holds the most rated agents it can"
	}
	s := m.Score(ratee)
	w := m.Score(rater)
	var room int64
	if delta > 0 {
		room = Scale - s
	} else {
		room = s
	}
	// delta * w fits in an int64 (10^12); times room (10^6) it would not
	// always fit with headroom for the sign, so divide once in between.
	moved = delta * w / Scale * room / Scale
	left := PairMax - g.moved
	switch {
	case left <= 0:
		m.counts.Refused++
		return 0, "this rater has moved this agent's score as far as one rater may"
	case moved > left:
		moved, why = left, "cut to what one rater may still move this agent's score"
		m.counts.Capped++
	case -moved > left:
		moved, why = -left, "cut to what one rater may still move this agent's score"
		m.counts.Capped++
	}
	if moved == 0 {
		return 0, "the rating rounds to no change"
	}
	if a == nil {
		a = &Agent{Score: Default}
		m.agents[strings.Clone(ratee)] = a
	}
	if !known {
		p = pair{strings.Clone(rater), strings.Clone(ratee)}
	}
	m.given[p] = given{moved: g.moved + abs(moved), stamp: stamp}
	a.Score = max(0, min(Scale, a.Score+moved))
	a.Ratings++
	a.LastSeq = seq
	m.counts.Applied++
	return moved, why
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// snapshot is the model's whole state as Snapshot writes it: agents and
// pairs sorted, so that equal state gives equal bytes.
type snapshot struct {
	Agents map[string]Agent `json:"agents"`
	Counts Counts           `json:"counts"`
	Given  [][4]any         `json:"given"` // rater, ratee, moved, stamp
}

// SnapshotEntries is how many agents and pairs Snapshot writes, for a
// caller that must know a snapshot's size before it makes one.
func (m *Model) SnapshotEntries() int { return len(m.agents) + len(m.given) }

// Snapshot writes the whole model: every rated agent and every pair's
// share used, sorted.
func (m *Model) Snapshot() ([]byte, error) {
	s := snapshot{Agents: make(map[string]Agent, len(m.agents)), Counts: m.counts, Given: make([][4]any, 0, len(m.given))}
	for uri, a := range m.agents {
		s.Agents[uri] = *a
	}
	pairs := make([]pair, 0, len(m.given))
	for p := range m.given {
		pairs = append(pairs, p)
	}
	slices.SortFunc(pairs, func(a, b pair) int {
		if c := strings.Compare(a.rater, b.rater); c != 0 {
			return c
		}
		return strings.Compare(a.ratee, b.ratee)
	})
	for _, p := range pairs {
		g := m.given[p]
		s.Given = append(s.Given, [4]any{p.rater, p.ratee, g.moved, g.stamp})
	}
	return json.Marshal(s)
}
