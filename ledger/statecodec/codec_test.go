package statecodec

import (
	"errors"
	"math"
	"testing"
	"time"
)

func TestRoundTrip(t *testing.T) {
	at := time.Date(2026, 12, 2, 7, 30, 0, 123456789, time.UTC)
	w := NewWriter(nil)
	w.Uint(0)
	w.Uint(math.MaxUint64)
	w.Int(-5)
	w.Len(3)
	w.Bool(true)
	w.Fixed64(0xdeadbeefcafebabe)
	w.Float(-0.25)
	w.String("agent://a.local")
	w.Blob(nil)
	w.Blob([]byte{1, 2})
	w.Blob([]byte{3})
	w.Time(at)
	w.Time(time.Time{})

	r := NewReader(w.Bytes())
	checks := []struct {
		name      string
		got, want any
	}{
		{"uint 0", r.Uint(), uint64(0)},
		{"uint max", r.Uint(), uint64(math.MaxUint64)},
		{"int", r.Int(), int64(-5)},
		{"len", r.Len(0), 3},
		{"bool", r.Bool(), true},
		{"fixed64", r.Fixed64(), uint64(0xdeadbeefcafebabe)},
		{"float", r.Float(), -0.25},
		{"string", r.String(), "agent://a.local"},
		{"nil blob", r.Blob() == nil, true},
		{"blob", string(r.Blob()), "\x01\x02"},
		{"blob view", string(r.BlobView()), "\x03"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
	if got := r.Time(); !got.Equal(at) || got.Location() != time.UTC {
		t.Errorf("time: got %v, want %v", got, at)
	}
	if got := r.Time(); !got.IsZero() {
		t.Errorf("zero time: got %v", got)
	}
	if err := r.Done(); err != nil {
		t.Fatal(err)
	}
}

// TestReaderRefusesWhatTheInputCannotHold: a damaged or crafted file must
// give an error, not a panic or an allocation of the size a count claims.
func TestReaderRefusesWhatTheInputCannotHold(t *testing.T) {
	cases := []struct {
		name string
		in   []byte
		read func(r *Reader)
	}{
		{"empty uint", nil, func(r *Reader) { r.Uint() }},
		{"count past the input", NewWriter(nil).appendLen(1 << 40), func(r *Reader) { r.Len(1) }},
		{"string longer than the input", append(NewWriter(nil).appendLen(10), 'a'), func(r *Reader) { _ = r.String() }},
		{"bool of 2", []byte{2}, func(r *Reader) { r.Bool() }},
		{"short fixed64", []byte{1, 2, 3}, func(r *Reader) { r.Fixed64() }},
		{"bad time", NewWriter(nil).appendBlob([]byte{99}), func(r *Reader) { r.Time() }},
		{"uint32 overflow", NewWriter(nil).appendLen(1 << 33), func(r *Reader) { r.Uint32() }},
		{"a time past the year 9999", NewWriter(nil).appendTime(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)), func(r *Reader) { r.Time() }},
		{"a time before the year 0", NewWriter(nil).appendTime(time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)), func(r *Reader) { r.Time() }},
		{"a zone offset of a day", NewWriter(nil).appendTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("", 24*60*60))), func(r *Reader) { r.Time() }},
		{"bytes left", []byte{0, 0}, func(r *Reader) { r.Uint() }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := NewReader(c.in)
			c.read(r)
			if r.Done() == nil {
				t.Fatal("read without an error")
			}
			if r.Uint() != 0 || r.String() != "" {
				t.Fatal("a read after an error returned a value")
			}
		})
	}
	r := NewReader(nil)
	r.Uint()
	if !errors.Is(r.Err(), ErrShort) {
		t.Fatalf("err = %v, want ErrShort", r.Err())
	}
}

func (w *Writer) appendLen(n int) []byte { w.Len(n); return w.Bytes() }

func (w *Writer) appendBlob(p []byte) []byte { w.Blob(p); return w.Bytes() }

func (w *Writer) appendTime(t time.Time) []byte { w.Time(t); return w.Bytes() }

// FuzzReader reads arbitrary input as a mix of every kind of value: it
// must never panic, and a count must never exceed what the input holds.
func FuzzReader(f *testing.F) {
	w := NewWriter(nil)
	w.String("seed")
	w.Time(time.Unix(1, 2).UTC())
	w.Len(2)
	w.Bool(false)
	f.Add(w.Bytes(), []byte{0, 1, 2, 3})
	f.Fuzz(func(t *testing.T, in, ops []byte) {
		r := NewReader(in)
		for _, op := range ops {
			switch op % 9 {
			case 0:
				r.Uint()
			case 1:
				r.Int()
			case 2:
				if n := r.Len(1); n > len(in) {
					t.Fatalf("count %d past an input of %d bytes", n, len(in))
				}
			case 3:
				r.Bool()
			case 4:
				r.Fixed64()
			case 5:
				_ = r.String()
			case 6:
				r.Blob()
			case 7:
				r.Time()
			case 8:
				r.Uint32()
			}
		}
		_ = r.Done()
	})
}
