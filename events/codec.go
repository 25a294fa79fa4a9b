package events

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/aglx/ledger/protocol"
	"github.com/nats-io/nats.go"
)

// NATS headers that carry an envelope's metadata. The message data is the
// AGLX body exactly as received, so a plain NATS consumer reads the JSON
// payload directly; the rest of the envelope travels as one JSON header.
// Few headers matter: JetStream scans every header of every message for
// its own, and twelve headers halve the rate of async publishes on the
// development machine compared with none.
const (
	// HdrEventID is the event's ULID, on its own for consumers that want
	// only that.
	HdrEventID = "Aglx-Event-Id"
	// HdrEnvelope is the envelope as a JSON object (envelopeJSON).
	HdrEnvelope = "Aglx-Envelope"
)

// envelopeVersion is the format of HdrEnvelope; FromMsg refuses others.
const envelopeVersion = 1

// envelopeJSON is HdrEnvelope. Headers keep arrival order and the sender's
// spelling of each name.
type envelopeJSON struct {
	V          int         `json:"v"`
	Type       string      `json:"type"`
	From       string      `json:"from"`
	To         string      `json:"to,omitempty"`
	Transport  string      `json:"transport"`
	Declared   string      `json:"declared,omitempty"`
	Peer       string      `json:"peer,omitempty"`
	ReceivedAt string      `json:"received_at"`
	DedupID    string      `json:"dedup_id,omitempty"`
	NoBody     bool        `json:"no_body,omitempty"`
	WALSeq     uint64      `json:"wal_seq,omitempty"`
	Headers    [][2]string `json:"headers"`
}

// timeFormat is RFC 3339 with nanoseconds, always UTC, so that the stored
// text sorts as the time does.
const timeFormat = "2006-01-02T15:04:05.000000000Z07:00"

// toMsg encodes an envelope as the NATS message the event stream stores.
// walSeq is the write-ahead batch it came from (0 if none).
//
// No Nats-Msg-Id: every publish to the event stream names the sequence it
// must land at (Nats-Expected-Last-Sequence), which already makes a
// repeated publish fail instead of storing twice. The client's dedup key,
// "id:<FROM>:<ID>", is only recorded (dedup_id): the node deduplicates
// before it assigns sequences, and JetStream's own deduplication must never
// drop an event the node has promised a sequence to.
func toMsg(e *Envelope, walSeq uint64) *nats.Msg {
	m, _ := appendMsg(nil, e, walSeq)
	return m
}

// appendMsg is toMsg that builds the envelope header in scratch and returns
// it for the next call: the publisher encodes every event, and the header
// is copied into its string anyway.
func appendMsg(scratch []byte, e *Envelope, walSeq uint64) (*nats.Msg, []byte) {
	b := scratch[:0]
	b = append(b, `{"v":1,"type":`...)
	b = appendJSONString(b, e.Type)
	b = append(b, `,"from":`...)
	b = appendJSONString(b, e.From)
	if e.To != "" {
		b = append(b, `,"to":`...)
		b = appendJSONString(b, e.To)
	}
	b = append(b, `,"transport":`...)
	b = appendJSONString(b, e.Transport)
	if e.Declared != "" {
		b = append(b, `,"declared":`...)
		b = appendJSONString(b, e.Declared)
	}
	if e.Peer != "" {
		b = append(b, `,"peer":`...)
		b = appendJSONString(b, e.Peer)
	}
	b = append(b, `,"received_at":"`...)
	b = e.ReceivedAt.UTC().AppendFormat(b, timeFormat)
	b = append(b, '"')
	if e.MsgID != "" && e.MsgID != e.ID {
		b = append(b, `,"dedup_id":`...)
		b = appendJSONString(b, e.MsgID)
	}
	if e.Body == nil {
		b = append(b, `,"no_body":true`...)
	}
	if walSeq > 0 {
		b = append(b, `,"wal_seq":`...)
		b = strconv.AppendUint(b, walSeq, 10)
	}
	b = append(b, `,"headers":[`...)
	for i, h := range e.Headers {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		b = appendJSONString(b, h.Name)
		b = append(b, ',')
		b = appendJSONString(b, h.Value)
		b = append(b, ']')
	}
	b = append(b, "]}"...)
	h := nats.Header{HdrEventID: {e.ID}, HdrEnvelope: {string(b)}}
	return &nats.Msg{Subject: Subject(e.Type, e.From, e.To), Header: h, Data: e.Body}, b
}

// appendJSONString appends s as a JSON string. Control characters and any
// invalid UTF-8 are escaped, so the result is one line, as a NATS header
// value must be.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	// The common case, plain printable ASCII, is copied in one append.
	plain := 0
	for plain < len(s) {
		c := s[plain]
		if c < 0x20 || c >= 0x7F || c == '"' || c == '\\' {
			break
		}
		plain++
	}
	b = append(b, s[:plain]...)
	for i := plain; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20 || c == 0x7F:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// walSeqOf reads the write-ahead batch an event came from, for recovery.
func walSeqOf(h nats.Header) (uint64, error) {
	var ej struct {
		WALSeq uint64 `json:"wal_seq"`
	}
	if err := json.Unmarshal([]byte(h.Get(HdrEnvelope)), &ej); err != nil {
		return 0, err
	}
	return ej.WALSeq, nil
}

// FromMsg decodes a stored message back into an envelope. seq is the stream
// sequence the message was read at.
func FromMsg(h nats.Header, data []byte, seq uint64) (*Envelope, error) {
	id := h.Get(HdrEventID)
	raw := h.Get(HdrEnvelope)
	if id == "" || raw == "" {
		return nil, fmt.Errorf("event at seq %d: missing %s or %s header: not an AGLX event", seq, HdrEventID, HdrEnvelope)
	}
	var ej envelopeJSON
	if err := json.Unmarshal([]byte(raw), &ej); err != nil {
		return nil, fmt.Errorf("event at seq %d: bad %s: %w", seq, HdrEnvelope, err)
	}
	if ej.V != envelopeVersion {
		return nil, fmt.Errorf("event at seq %d: envelope version %d; this node reads %d", seq, ej.V, envelopeVersion)
	}
	if ej.Type == "" {
		return nil, fmt.Errorf("event at seq %d: the envelope has no type", seq)
	}
	at, err := time.Parse(time.RFC3339Nano, ej.ReceivedAt)
	if err != nil {
		return nil, fmt.Errorf("event at seq %d: bad received_at: %w", seq, err)
	}
	e := &Envelope{
		ID: id, Seq: seq, Type: ej.Type, From: ej.From, To: ej.To,
		Transport: ej.Transport, Declared: ej.Declared, Peer: ej.Peer,
		ReceivedAt: at.UTC(), MsgID: ej.DedupID,
	}
	if e.MsgID == "" {
		e.MsgID = e.ID
	}
	if len(ej.Headers) > 0 {
		e.Headers = make([]protocol.Header, len(ej.Headers))
		for i, p := range ej.Headers {
			e.Headers[i] = protocol.Header{Name: p[0], Value: p[1]}
		}
	}
	if !ej.NoBody {
		e.Body = data
		if e.Body == nil {
			e.Body = []byte{}
		}
	}
	return e, nil
}
