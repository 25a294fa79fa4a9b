// Package projections folds the event log into the node's state. A
// projection is a deterministic function of the events it has been given, in
// stream order: it reads time only from event fields, never from the wall
// clock, so replaying the log rebuilds it byte for byte.
package projections

import (
	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/protocol"
)

// Event is what a projection is given: the stored envelope and the message
// decoded from it, once, by the runner for every projection. Msg is nil
// for an event that does not decode (which the bridge never appends, but a
// log is read as found); projections skip such events.
type Event struct {
	*events.Envelope
	Msg *protocol.Message
}

// Projection is a fold over the event log, in the spirit of an FSM in
// hashicorp/raft.
//
// Apply is called once per event, in sequence order, by one goroutine at a
// time, and must be deterministic: the same events give the same state on
// every node and every replay. It must not fail on events it does not
// understand (anything a NATS client can publish on the log's subjects may
// reach it): it ignores them or records them as refused.
type Projection interface {
	Name() string
	Apply(e *Event)
}

// Snapshotter is a projection whose whole state can be written out. The
// bytes must be identical for identical state, so that a rebuild can be
// compared with the live state.
type Snapshotter interface {
	Snapshot() ([]byte, error)
}

// NewEvent decodes a stored envelope for the folds, as the runner does. An
// envelope that does not decode still gives an Event, with Msg nil, and the
// error says why.
func NewEvent(e *events.Envelope) (*Event, error) {
	if e.Msg != nil {
		return &Event{Envelope: e, Msg: e.Msg}, nil
	}
	msg, err := protocol.Parse(e.Frame())
	return &Event{Envelope: e, Msg: msg}, err
}
