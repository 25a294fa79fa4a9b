package projections

import (
	"math"

	"github.com/aglx/ledger/protocol"
	"github.com/aglx/ledger/reputation"
)

// Reputation folds mentors' feedback into the agents' reputation scores
// (reputation.Model), which the registry admits zone members by. A
// mentor.feedback's reputation_delta counts when all of these hold
// (docs/REPUTATION.md says why each does):
//
//   - it answers a mentor.request the mentee sent that mentor and that was
//     pending (the handshake tracker matched it): advice nobody asked for
//     moves nothing, so no one can rate a stranger up or down;
//   - its signature verified: the mentor has a key, so the rating is the
//     mentor's and no one else's;
//   - the mentor is in the mentor directory (mentor.register) when it
//     rates.
//
// The move is weighted by the mentor's own score and bounded per pair
// (reputation.Model.Rate). Everything else leaves scores alone.
type Reputation struct {
	M          *reputation.Model
	handshakes *Handshakes
	registry   *Registry
	lastSeq    uint64 // the highest seq applied: an event at or below it is skipped
}

// NewReputation returns the fold over m, which must run after the
// registry and the handshake tracker it reads.
func NewReputation(m *reputation.Model, registry *Registry, handshakes *Handshakes) *Reputation {
	return &Reputation{M: m, registry: registry, handshakes: handshakes}
}

// Name implements Projection.
func (r *Reputation) Name() string { return "reputation" }

// Snapshot implements Snapshotter.
func (r *Reputation) Snapshot() ([]byte, error) { return r.M.Snapshot() }

// SnapshotEntries is how many entries Snapshot writes
// (Registry.SnapshotEntries says why).
func (r *Reputation) SnapshotEntries() int { return r.M.SnapshotEntries() }

// Apply implements Projection.
func (r *Reputation) Apply(e *Event) {
	if e.Foreign != nil || e.Msg == nil {
		return
	}
	if e.Seq != 0 && e.Seq <= r.lastSeq {
		return // applied already: a log read twice
	}
	if e.Seq != 0 { // an event without a sequence (a test's) must not reset the guard
		r.lastSeq = e.Seq
	}
	p, ok := e.Msg.Payload.(*protocol.MentorFeedback)
	if !ok || p.ReputationDelta == nil {
		return
	}
	// The handshake this feedback answered, between the same two agents,
	// and asked for by the mentee itself: a request in the mentee's name
	// that its key did not sign could be anyone's (helper-78).
	q, ok := r.handshakes.EndedBy(e)
	if !ok || q.Kind != protocol.TypeMentorRequest || q.Responder != e.From || q.Requester != e.To || !q.Signed {
		return
	}
	if r.registry.Authenticate(e).Auth != AuthValid || !r.registry.IsMentor(e.From) {
		return
	}
	// Parse keeps the delta from -1 to 1; math.Round of a product of two
	// float64s is the same on every platform. The signed timestamp orders
	// the mentor's ratings of this mentee, so a copy of a signed feedback,
	// sent again to answer a later request, is not counted again.
	delta := int64(math.Round(*p.ReputationDelta * reputation.Scale))
	r.M.Rate(q.Responder, q.Requester, delta, p.Timestamp.Time.UnixNano(), e.Seq)
}
