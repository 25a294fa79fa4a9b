package events

import (
	"fmt"
	"math"

	"github.com/aglx/ledger/protocol"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// An event must fit the event stream's message size limit (StreamConfig:
// the body limit plus envelopeOverhead). The decoder bounds each header
// line and the number of headers, but not what they come to in the
// envelope, where every header is JSON-escaped (a control character or a
// stray byte of invalid UTF-8 takes six bytes). A frame that passed the
// decoder could therefore make an event the stream refuses, after the
// write-ahead stream had taken it and the sender had its ack: the
// publisher would then retry it forever and no later event would reach
// the projections. Append refuses such a frame with 413 before anything
// is stored. Two limits apply: the stream's message size, and JetStream's
// own bound on a message's header block (64 KiB), which the envelope, one
// header, meets first for a frame of many long headers.

// storedSizeSlack covers what the stored message holds besides the
// envelope and the body: the NATS header block, the event id header and
// the expected-last-sequence header the publisher adds.
const storedSizeSlack = 512 // bytes

// storedHeaderMax is the most a stored message's NATS header block may
// take: JetStream refuses a message whose headers pass 65,535 bytes,
// whatever its size limit, and the whole envelope travels in one header.
const storedHeaderMax = math.MaxUint16 // bytes

// checkSize refuses (413) an envelope whose message in the event stream
// would pass limit bytes, or whose header block would pass
// storedHeaderMax. Most envelopes are far below both by a quick bound;
// only those near one are encoded to measure them.
func checkSize(e *Envelope, limit int) error {
	hdrBound, bodyLen := storedHeaderBound(e), len(e.Body)
	if hdrBound <= storedHeaderMax && hdrBound+bodyLen <= limit {
		return nil
	}
	hdr := storedHeaderSize(e)
	switch {
	case hdr > storedHeaderMax:
		return &protocol.Error{Status: protocol.StatusTooLarge, Reason: fmt.Sprintf(
			"the message's headers would take %d bytes in the event log, escaped as JSON; the most is %d: send fewer or shorter headers", hdr, storedHeaderMax)}
	case hdr+bodyLen > limit:
		return &protocol.Error{Status: protocol.StatusTooLarge, Reason: fmt.Sprintf(
			"the message would take %d bytes in the event log, its headers escaped as JSON; the most is %d: send fewer or shorter headers, or a shorter body", hdr+bodyLen, limit)}
	}
	return nil
}

// storedHeaderBound is at least storedHeaderSize(e): every string at its
// most escaped (six bytes a byte), plus generous room for the fixed
// fields.
func storedHeaderBound(e *Envelope) int {
	const escapedMax = 6 // bytes per byte: \u00XX
	n := storedSizeSlack + 256 + 2*len(e.ID)
	for _, s := range []string{e.Type, e.From, e.To, e.Transport, e.Declared, e.Peer, e.MsgID} {
		n += escapedMax*len(s) + 16
	}
	for _, h := range e.Headers {
		n += escapedMax*(len(h.Name)+len(h.Value)) + 8
	}
	return n
}

// storedHeaderSize is the size of the NATS header block of e's message in
// the event stream, with room for the largest write-ahead batch number and
// expected-last-sequence header.
func storedHeaderSize(e *Envelope) int {
	m, _ := appendMsg(nil, e, math.MaxUint64)
	m.Header[jetstream.ExpectedLastSeqHeader] = []string{"18446744073709551615"}
	return headerSize(m.Header)
}

// headerSize is the size of a NATS header block: the version line, each
// "Name: value" line, and the blank line.
func headerSize(h nats.Header) int {
	n := len("NATS/1.0\r\n") + len("\r\n")
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(": ") + len(v) + len("\r\n")
		}
	}
	return n
}
