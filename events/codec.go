package events

import (
	"fmt"
	"strings"
	"time"

	"github.com/aglx/ledger/protocol"
	"github.com/nats-io/nats.go"
)

// NATS headers that carry an envelope's metadata. The message data is the
// AGLX body exactly as received, so a plain NATS consumer reads the JSON
// payload directly and finds everything else here.
const (
	HdrEventID    = "Aglx-Event-Id"
	HdrType       = "Aglx-Type"
	HdrFrom       = "Aglx-From"
	HdrTo         = "Aglx-To"
	HdrTransport  = "Aglx-Transport"
	HdrDeclared   = "Aglx-Declared"
	HdrPeer       = "Aglx-Peer"
	HdrReceivedAt = "Aglx-Received-At"
	// HdrHeader repeats once per AGLX header line, in arrival order, as
	// "NAME: value" with the sender's spelling of NAME.
	HdrHeader = "Aglx-Header"
	// HdrNoBody marks a frame that had no body at all, as opposed to "{}".
	HdrNoBody = "Aglx-No-Body"
	// HdrDedupID is the client's deduplication key, "id:<FROM>:<ID>", on
	// events whose frame had an ID header. It is not a Nats-Msg-Id: the node
	// deduplicates before it assigns sequences, and JetStream's own
	// deduplication must never drop an event the node has promised a
	// sequence to.
	HdrDedupID = "Aglx-Dedup-Id"
)

// timeFormat is RFC 3339 with nanoseconds, always UTC, so that the stored
// text sorts as the time does.
const timeFormat = "2006-01-02T15:04:05.000000000Z07:00"

// toMsg encodes an envelope as the NATS message the log stores.
func toMsg(e *Envelope) *nats.Msg {
	h := make(nats.Header, 12)
	// No Nats-Msg-Id: every publish to the event stream names the sequence
	// it must land at (Nats-Expected-Last-Sequence), which already makes a
	// repeated publish fail instead of storing twice, and spares the server
	// a deduplication entry per event.
	h[HdrEventID] = []string{e.ID}
	if e.MsgID != "" && e.MsgID != e.ID {
		h[HdrDedupID] = []string{e.MsgID}
	}
	h[HdrType] = []string{e.Type}
	h[HdrFrom] = []string{e.From}
	if e.To != "" {
		h[HdrTo] = []string{e.To}
	}
	h[HdrTransport] = []string{e.Transport}
	if e.Declared != "" {
		h[HdrDeclared] = []string{e.Declared}
	}
	if e.Peer != "" {
		h[HdrPeer] = []string{e.Peer}
	}
	h[HdrReceivedAt] = []string{e.ReceivedAt.UTC().Format(timeFormat)}
	lines := make([]string, len(e.Headers))
	for i, hd := range e.Headers {
		lines[i] = hd.Name + ": " + hd.Value
	}
	if len(lines) > 0 {
		h[HdrHeader] = lines
	}
	if e.Body == nil {
		h[HdrNoBody] = []string{"true"}
	}
	return &nats.Msg{Subject: Subject(e.Type, e.From, e.To), Header: h, Data: e.Body}
}

// FromMsg decodes a stored message back into an envelope. seq is the stream
// sequence the message was read at.
func FromMsg(h nats.Header, data []byte, seq uint64) (*Envelope, error) {
	e := &Envelope{
		ID:        h.Get(HdrEventID),
		Seq:       seq,
		Type:      h.Get(HdrType),
		From:      h.Get(HdrFrom),
		To:        h.Get(HdrTo),
		Transport: h.Get(HdrTransport),
		Declared:  h.Get(HdrDeclared),
		Peer:      h.Get(HdrPeer),
		MsgID:     h.Get(HdrDedupID),
	}
	if e.MsgID == "" {
		e.MsgID = e.ID
	}
	if e.ID == "" || e.Type == "" {
		return nil, fmt.Errorf("event at seq %d: missing %s or %s header: not an AGLX event", seq, HdrEventID, HdrType)
	}
	at, err := time.Parse(time.RFC3339Nano, h.Get(HdrReceivedAt))
	if err != nil {
		return nil, fmt.Errorf("event at seq %d: bad %s: %w", seq, HdrReceivedAt, err)
	}
	e.ReceivedAt = at.UTC()
	for _, line := range h[HdrHeader] {
		name, value, _ := strings.Cut(line, ":")
		e.Headers = append(e.Headers, protocol.Header{Name: name, Value: strings.TrimPrefix(value, " ")})
	}
	if h.Get(HdrNoBody) == "" {
		e.Body = data
		if e.Body == nil {
			e.Body = []byte{}
		}
	}
	return e, nil
}
