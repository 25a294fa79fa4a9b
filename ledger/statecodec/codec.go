// Package statecodec is the binary encoding of a fold's saved state: the
// ledger's, the registry's and the other projections' (projections/state.go
// puts them in one file). A fold writes its fields in a fixed order with a
// Writer and reads them back in the same order with a Reader.
//
// It is deliberately small and strict. Nothing is self-describing: a saved
// state is only ever read by the very build that wrote it (the file
// records the build), so there is no schema to evolve. What it guards
// against is a damaged or crafted file: a Reader never panics, never
// allocates more than the input could hold, and keeps the first error, so
// a fold can read everything and check the error once.
package statecodec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
)

// ErrShort says the input ended inside a value.
var ErrShort = errors.New("statecodec: the saved state ends inside a value")

// Writer appends values to a byte slice. Its zero value is ready.
type Writer struct {
	b []byte
}

// NewWriter returns a Writer that appends to b.
func NewWriter(b []byte) *Writer { return &Writer{b: b} }

// Bytes returns everything written so far.
func (w *Writer) Bytes() []byte { return w.b }

// Uint writes an unsigned integer.
func (w *Writer) Uint(v uint64) { w.b = binary.AppendUvarint(w.b, v) }

// Int writes a signed integer.
func (w *Writer) Int(v int64) { w.b = binary.AppendVarint(w.b, v) }

// Len writes a count (of a slice, a map, a string's bytes).
func (w *Writer) Len(n int) { w.Uint(uint64(n)) }

// Bool writes a boolean as one byte.
func (w *Writer) Bool(v bool) {
	if v {
		w.b = append(w.b, 1)
	} else {
		w.b = append(w.b, 0)
	}
}

// Fixed64 writes v as eight bytes, for values that are not small (hashes,
// packed figures): a varint of those takes up to ten.
func (w *Writer) Fixed64(v uint64) { w.b = binary.LittleEndian.AppendUint64(w.b, v) }

// Float writes a float64 exactly (its bits).
func (w *Writer) Float(v float64) { w.Fixed64(math.Float64bits(v)) }

// String writes a string: its length, then its bytes.
func (w *Writer) String(s string) {
	w.Len(len(s))
	w.b = append(w.b, s...)
}

// Blob writes a byte slice: its length, then its bytes. A nil and an
// empty slice are written alike; ReadBlob returns nil for both.
func (w *Writer) Blob(p []byte) {
	w.Len(len(p))
	w.b = append(w.b, p...)
}

// Time writes t to the nanosecond with its zone offset (time.Time's own
// binary form, which keeps both); the zero time is written as such. A
// monotonic clock reading is not written: a fold's times come from
// events, never from the clock.
func (w *Writer) Time(t time.Time) {
	b, err := t.MarshalBinary()
	if err != nil {
		// Only a zone offset that is not a whole minute fails, which no
		// time read from an event has: written as the zero time's marker
		// so that the reader fails on it rather than inventing a time.
		w.Len(0)
		return
	}
	w.Blob(b)
}

// Reader reads values in the order a Writer wrote them. After the first
// error every read returns a zero value; Err says what it was.
type Reader struct {
	b   []byte
	err error
}

// NewReader returns a Reader of b. The strings and slices it returns are
// copies: b may be reused.
func NewReader(b []byte) *Reader { return &Reader{b: b} }

// Err is the first error met, or nil.
func (r *Reader) Err() error { return r.err }

// Fail records err as the reader's error if it has none yet: a fold that
// finds a value out of range says so through the reader, and the reads
// after it return zero values.
func (r *Reader) Fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

// Failf is Fail with a formatted error.
func (r *Reader) Failf(format string, args ...any) {
	r.Fail(fmt.Errorf("statecodec: "+format, args...))
}

// Remaining is how many bytes are left unread.
func (r *Reader) Remaining() int { return len(r.b) }

// Done fails the reader if bytes are left unread: a state that is longer
// than what the build reads is not the one it wrote.
func (r *Reader) Done() error {
	if r.err == nil && len(r.b) > 0 {
		r.err = fmt.Errorf("statecodec: %d bytes left after the saved state", len(r.b))
	}
	return r.err
}

// Uint reads an unsigned integer.
func (r *Reader) Uint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.Fail(ErrShort)
		return 0
	}
	r.b = r.b[n:]
	return v
}

// Int reads a signed integer.
func (r *Reader) Int() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.Fail(ErrShort)
		return 0
	}
	r.b = r.b[n:]
	return v
}

// Uint32 reads an unsigned integer that must fit in 32 bits.
func (r *Reader) Uint32() uint32 {
	v := r.Uint()
	if v > math.MaxUint32 {
		r.Failf("%d does not fit in 32 bits", v)
		return 0
	}
	return uint32(v)
}

// Len reads a count of items each written in at least min bytes: a count
// the rest of the input cannot hold is an error, so a crafted count never
// makes the caller allocate more than the input's size allows. min below
// 1 counts as 1.
func (r *Reader) Len(min int) int {
	v := r.Uint()
	if r.err != nil {
		return 0
	}
	if min < 1 {
		min = 1
	}
	if v > uint64(len(r.b)/min) {
		r.Failf("a count of %d items is more than the %d bytes left can hold", v, len(r.b))
		return 0
	}
	return int(v)
}

// Bool reads a boolean.
func (r *Reader) Bool() bool {
	if r.err != nil {
		return false
	}
	if len(r.b) < 1 {
		r.Fail(ErrShort)
		return false
	}
	v := r.b[0]
	r.b = r.b[1:]
	if v > 1 {
		r.Failf("a boolean of %d", v)
		return false
	}
	return v == 1
}

// Fixed64 reads eight bytes written by Writer.Fixed64.
func (r *Reader) Fixed64() uint64 {
	if r.err != nil {
		return 0
	}
	if len(r.b) < 8 {
		r.Fail(ErrShort)
		return 0
	}
	v := binary.LittleEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

// Float reads a float64 written by Writer.Float.
func (r *Reader) Float() float64 { return math.Float64frombits(r.Fixed64()) }

// take returns the next n bytes, aliasing the input.
func (r *Reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n > len(r.b) {
		r.Fail(ErrShort)
		return nil
	}
	p := r.b[:n:n]
	r.b = r.b[n:]
	return p
}

// String reads a string.
func (r *Reader) String() string {
	n := r.Len(1)
	return string(r.take(n))
}

// Blob reads a byte slice; an empty one is nil.
func (r *Reader) Blob() []byte {
	n := r.Len(1)
	if n == 0 {
		return nil
	}
	return append([]byte(nil), r.take(n)...)
}

// BlobView is Blob without the copy: the slice aliases the input, for a
// caller that keeps the input unchanged while it uses the slice (a saved
// state's sections, each as large as a fold, read out of the file held
// in memory anyway).
func (r *Reader) BlobView() []byte {
	n := r.Len(1)
	if n == 0 {
		return nil
	}
	return r.take(n)
}

// Time reads a time written by Writer.Time.
func (r *Reader) Time() time.Time {
	n := r.Len(1)
	p := r.take(n)
	if r.err != nil {
		return time.Time{}
	}
	var t time.Time
	if err := t.UnmarshalBinary(p); err != nil {
		r.Fail(fmt.Errorf("statecodec: a time: %w", err))
		return time.Time{}
	}
	// No time a fold keeps comes from outside what RFC 3339 writes (the
	// years 0000-9999, zone offsets within a day), and one that does
	// cannot be written as JSON: a crafted state with one loaded, and the
	// stats' snapshot failed (FuzzLoadStateStats).
	if y := t.Year(); y < 0 || y > 9999 {
		r.Failf("a time in the year %d, outside 0000-9999", y)
		return time.Time{}
	}
	if _, off := t.Zone(); off <= -24*60*60 || off >= 24*60*60 {
		r.Failf("a time with a zone offset of %d s, a day or more", off)
		return time.Time{}
	}
	return t
}
