package events

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/aglx/ledger/protocol"
)

// A batch is the unit of group commit: the events that were waiting when the
// previous commit ended, with the stream sequences the node assigned them,
// stored as one message in the write-ahead stream (see wal.go). Its binary
// form is versioned and length-prefixed, and the decoder trusts nothing:
// every length is checked against what is left before it is used.

// batchMagic starts every encoded batch; the digit is the format version.
const batchMagic = "AGLXB1"

// Bounds on one batch. A batch closes when either is reached; one event
// larger than BatchBytesMax travels alone.
const (
	BatchEventsMax = 4096    // events
	BatchBytesMax  = 4 << 20 // bytes, encoded
	// batchHeadersMax bounds the header count the decoder accepts per event.
	batchHeadersMax = protocol.HeaderCountMax
)

type batch struct {
	walSeq   uint64 // where the write-ahead stream stored it; not encoded
	firstSeq uint64
	events   []*Envelope // events[i].Seq == firstSeq+i
}

// encodedSize estimates an event's encoded size, for closing batches.
func encodedSize(e *Envelope) int {
	n := 64 + len(e.ID) + len(e.MsgID) + len(e.Type) + len(e.From) + len(e.To) + len(e.Transport) + len(e.Declared) + len(e.Peer) + len(e.Body)
	for _, h := range e.Headers {
		n += 4 + len(h.Name) + len(h.Value)
	}
	return n
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendBytes(b []byte, s []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// encodeBatch writes b in the batch format.
func encodeBatch(dst []byte, b *batch) []byte {
	dst = append(dst, batchMagic...)
	dst = binary.AppendUvarint(dst, b.firstSeq)
	dst = binary.AppendUvarint(dst, uint64(len(b.events)))
	for _, e := range b.events {
		dst = appendString(dst, e.ID)
		dst = appendString(dst, e.MsgID)
		dst = appendString(dst, e.Type)
		dst = appendString(dst, e.From)
		dst = appendString(dst, e.To)
		dst = appendString(dst, e.Transport)
		dst = appendString(dst, e.Declared)
		dst = appendString(dst, e.Peer)
		dst = binary.AppendVarint(dst, e.ReceivedAt.UnixNano())
		dst = binary.AppendUvarint(dst, uint64(len(e.Headers)))
		for _, h := range e.Headers {
			dst = appendString(dst, h.Name)
			dst = appendString(dst, h.Value)
		}
		if e.Body == nil {
			dst = append(dst, 0)
		} else {
			dst = append(dst, 1)
			dst = appendBytes(dst, e.Body)
		}
	}
	return dst
}

// errBatch is wrapped by every decoding error.
var errBatch = errors.New("events: corrupt batch")

type batchReader struct {
	b   []byte
	err error
}

func (r *batchReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = fmt.Errorf("%w: bad varint", errBatch)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *batchReader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = fmt.Errorf("%w: bad varint", errBatch)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *batchReader) bytes() []byte {
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.err = fmt.Errorf("%w: a field of %d bytes with %d left", errBatch, n, len(r.b))
		return nil
	}
	out := r.b[:n:n]
	r.b = r.b[n:]
	return out
}

func (r *batchReader) string() string { return string(r.bytes()) }

func (r *batchReader) byte() byte {
	if r.err != nil {
		return 0
	}
	if len(r.b) == 0 {
		r.err = fmt.Errorf("%w: truncated", errBatch)
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// decodeBatch reads a batch. The events' bodies alias data.
func decodeBatch(data []byte) (*batch, error) {
	if len(data) < len(batchMagic) || string(data[:len(batchMagic)]) != batchMagic {
		return nil, fmt.Errorf("%w: no %s header", errBatch, batchMagic)
	}
	r := &batchReader{b: data[len(batchMagic):]}
	b := &batch{firstSeq: r.uvarint()}
	count := r.uvarint()
	if r.err == nil && (count == 0 || count > BatchEventsMax || b.firstSeq == 0) {
		return nil, fmt.Errorf("%w: first seq %d, %d events", errBatch, b.firstSeq, count)
	}
	for i := uint64(0); i < count && r.err == nil; i++ {
		e := &Envelope{Seq: b.firstSeq + i}
		e.ID, e.MsgID, e.Type = r.string(), r.string(), r.string()
		e.From, e.To, e.Transport = r.string(), r.string(), r.string()
		e.Declared, e.Peer = r.string(), r.string()
		e.ReceivedAt = time.Unix(0, r.varint()).UTC()
		nh := r.uvarint()
		if nh > batchHeadersMax {
			return nil, fmt.Errorf("%w: %d headers", errBatch, nh)
		}
		for j := uint64(0); j < nh && r.err == nil; j++ {
			e.Headers = append(e.Headers, protocol.Header{Name: r.string(), Value: r.string()})
		}
		switch r.byte() {
		case 0:
		case 1:
			e.Body = r.bytes()
		default:
			if r.err == nil {
				r.err = fmt.Errorf("%w: bad body flag", errBatch)
			}
		}
		b.events = append(b.events, e)
	}
	if r.err != nil {
		return nil, r.err
	}
	if len(r.b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last event", errBatch, len(r.b))
	}
	return b, nil
}
