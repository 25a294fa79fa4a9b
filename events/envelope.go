// Package events is the node's event log: the envelope every received AGLX
// message is wrapped in, the subjects it is stored under, and the JetStream
// stream that holds it. The log is append-only; everything else the node knows
// is a fold over it (package projections).
package events

import (
	"time"

	"github.com/aglx/ledger/protocol"
)

// Transports that can carry a frame to the node, as recorded in an envelope.
const (
	TransportTCP = "tcp"
	TransportTLS = "tls"
	TransportUDP = "udp"
	// TransportNode marks an event the node made itself rather than
	// received: its own key rotation (aglxd --rotate-node-key), appended
	// straight to the log, with no peer.
	TransportNode = "node"
)

// Envelope is one received AGLX message as the log keeps it. It holds the
// frame's headers and body exactly as they arrived, plus what only the node
// knows: when and how the frame came in, and where the log put it.
type Envelope struct {
	// ID is a ULID the node assigns on receipt. It is the event's name in
	// replies (event_id) and in every later reference.
	ID string
	// Seq is the stream sequence; zero until the log has stored the event.
	Seq  uint64
	Type string
	From string
	// To is empty for a broadcast (agent.announce).
	To string
	// Transport is how the frame reached the node: tcp, tls or udp; node
	// for an event the node made itself (TransportNode).
	Transport string
	// Declared is the transport the frame's start line names (TCP or UDP).
	Declared string
	// Peer is the remote address, host:port.
	Peer string
	// ReceivedAt is the node's clock when the frame was decoded, in UTC.
	// Folds read time from here, never from the wall clock.
	ReceivedAt time.Time
	// Headers are all header lines in arrival order, unknown ones included.
	Headers []protocol.Header
	// Body is the JSON body, byte for byte as received; nil if there was none.
	Body []byte
	// MsgID is the client's deduplication key ("id:FROM:ID"), or ID.
	MsgID string
	// Msg is the decoded message, when the node decoded it on the way in;
	// it is never stored, and a reader of the stream decodes it afresh
	// (protocol.Parse of Frame() gives the same message).
	Msg *protocol.Message
	// Foreign says why the stream's message at Seq is not an event of
	// this node's, when Read hands back this envelope in its place: the
	// stream takes anything a NATS client with the right to publish puts
	// on its subjects. Such an envelope has no TYPE and no body, and every
	// fold skips it; never stored.
	Foreign error
}

// Frame rebuilds the AGLX frame the envelope was made from.
func (e *Envelope) Frame() *protocol.Frame {
	return &protocol.Frame{Transport: e.Declared, Headers: e.Headers, Body: e.Body}
}

// ReceivedAtText is ReceivedAt as the stream stores it in the envelope's
// received_at: RFC 3339 with all nine digits of nanoseconds, UTC. The node
// has written every received_at in this form, so this is the stored text
// byte for byte. Readers that print the time should use it: the fixed
// width makes the texts sort as the times do, and time.Time's own JSON
// (RFC3339Nano) drops trailing zeros, so that .46328735Z sorted after
// .463287351Z.
func (e *Envelope) ReceivedAtText() string { return e.ReceivedAt.UTC().Format(timeFormat) }

// Header returns the value of the named AGLX header, ignoring case.
func (e *Envelope) Header(name string) string {
	f := protocol.Frame{Headers: e.Headers}
	return f.Value(name)
}
