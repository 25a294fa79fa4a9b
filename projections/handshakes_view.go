package projections

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/aglx/ledger/protocol"
)

// Reading the tracker: pages for the HTTP API, and the snapshot a rebuild
// is compared by.

const (
	// HandshakesPageMax bounds one page of handshakes.
	HandshakesPageMax = 1000 // handshakes
	// HandshakesScanMax bounds the handshakes one page looks at, so that
	// a filter that matches little costs a read no more than this; the
	// page's next tells where to go on.
	HandshakesScanMax = 10_000 // handshakes
)

// HandshakeFilter chooses handshakes: those an agent is a party to, in a
// state, of a kind (the request's TYPE), after a seq. Empty fields choose
// all.
type HandshakeFilter struct {
	Agent, State, Kind string
	After              uint64
	Limit              int
}

// HandshakePage is one page of handshakes, oldest request first. Next, if
// not 0, is the After that continues the listing: the page stopped at its
// limit or at HandshakesScanMax.
type HandshakePage struct {
	Handshakes []Handshake `json:"handshakes"`
	Next       uint64      `json:"next,omitempty"`
}

// handshakeStates are the states a filter may name.
var handshakeStates = []string{HandshakePending, HandshakeApproved, HandshakeRejected, HandshakeCancelled, HandshakeExpired}

// HandshakeKinds are the request TYPEs that open a handshake.
var HandshakeKinds = []string{protocol.TypeTaskAssign, protocol.TypeTaskRetry, protocol.TypeCreditRequest,
	protocol.TypeMentorRequest, protocol.TypeShutdownRequest, protocol.TypePlanApproval}

// HandshakeKind reports whether TYPE typ opens a handshake.
func HandshakeKind(typ string) bool { return slices.Contains(HandshakeKinds, typ) }

// Check says what is wrong with f, if anything.
func (f HandshakeFilter) Check() error {
	if f.State != "" && !slices.Contains(handshakeStates, f.State) {
		return fmt.Errorf("state=%q: the states are %v", f.State, handshakeStates)
	}
	return nil
}

// Page returns the handshakes f chooses.
func (h *Handshakes) Page(f HandshakeFilter) HandshakePage {
	limit := f.Limit
	if limit <= 0 || limit > HandshakesPageMax {
		limit = HandshakesPageMax
	}
	b := &h.book
	page := HandshakePage{Handshakes: []Handshake{}}
	i, found := slices.BinarySearch(b.order, f.After)
	if found {
		i++ // after, not at
	}
	for scanned := 0; i < len(b.order); i++ {
		if scanned == HandshakesScanMax || len(page.Handshakes) == limit {
			page.Next = b.order[i-1]
			break
		}
		scanned++ // a handshake let go and not yet compacted away counts too
		q, ok := b.bySeq[b.order[i]]
		if !ok {
			continue
		}
		if (f.Agent == "" || q.Requester == f.Agent || q.Responder == f.Agent) &&
			(f.State == "" || q.State == f.State) && (f.Kind == "" || q.Kind == f.Kind) {
			page.Handshakes = append(page.Handshakes, *q)
		}
	}
	return page
}

// handshakesSnapshot is the tracker's whole state as Snapshot writes it.
type handshakesSnapshot struct {
	Clock      time.Time       `json:"clock"`
	Counts     HandshakeCounts `json:"counts"`
	Handshakes []*Handshake    `json:"handshakes"`
	Pending    int             `json:"pending"`
}

// SnapshotEntries is how many handshakes Snapshot writes
// (Registry.SnapshotEntries says why).
func (h *Handshakes) SnapshotEntries() int { return len(h.book.bySeq) }

// Snapshot implements Snapshotter: every kept handshake by seq, the
// totals and the clock. The indexes follow from the handshakes.
func (h *Handshakes) Snapshot() ([]byte, error) {
	b := &h.book
	s := handshakesSnapshot{Clock: b.now, Counts: b.counts, Handshakes: make([]*Handshake, 0, len(b.bySeq)), Pending: b.pending}
	for _, seq := range b.order {
		if q, ok := b.bySeq[seq]; ok {
			s.Handshakes = append(s.Handshakes, q)
		}
	}
	return json.Marshal(s)
}
