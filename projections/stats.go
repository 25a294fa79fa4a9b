package projections

import (
	"encoding/json"
	"time"
)

// Stats counts the log: events per TYPE, per sender and per transport, and
// the span of receive times: the simplest projection, and the shape every
// other one follows. The runner applies it last. Unlike the other folds it
// counts events whose message does not decode (by their envelope), so that
// the figures cover the whole log.
type Stats struct {
	Events uint64            `json:"events"`
	ByType map[string]uint64 `json:"by_type"`
	// BySender counts the first StatsSendersMax senders by name and every
	// later one in BySenderOther: FROM costs nothing to vary (an unsigned
	// announce over UDP will do), and /v1/stats must stay small.
	BySender      map[string]uint64 `json:"by_sender"`
	BySenderOther uint64            `json:"by_sender_other,omitempty"`
	ByTransport   map[string]uint64 `json:"by_transport"`
	// First and Last are receive times taken from the events, not the clock.
	First   time.Time `json:"first,omitzero"`
	Last    time.Time `json:"last,omitzero"`
	LastSeq uint64    `json:"last_seq"`
}

// StatsSendersMax bounds the senders Stats counts by name.
const StatsSendersMax = 10_000 // senders

// NewStats returns an empty Stats.
func NewStats() *Stats {
	return &Stats{ByType: map[string]uint64{}, BySender: map[string]uint64{}, ByTransport: map[string]uint64{}}
}

// Name implements Projection.
func (s *Stats) Name() string { return "stats" }

// Apply implements Projection.
func (s *Stats) Apply(e *Event) {
	if e.Foreign != nil {
		// Not an event of the node's (a message someone else put on the
		// stream): skipped, as by every fold. It was counted as an event
		// of TYPE "" and set Last to the zero time.
		return
	}
	s.Events++
	s.ByType[e.Type]++
	if _, ok := s.BySender[e.From]; ok || len(s.BySender) < StatsSendersMax {
		s.BySender[e.From]++
	} else {
		s.BySenderOther++
	}
	s.ByTransport[e.Transport]++
	if s.First.IsZero() {
		s.First = e.ReceivedAt
	}
	s.Last = e.ReceivedAt
	s.LastSeq = e.Seq
}

// Snapshot implements Snapshotter. encoding/json writes map keys sorted, so
// equal state gives equal bytes.
func (s *Stats) Snapshot() ([]byte, error) { return json.Marshal(s) }
