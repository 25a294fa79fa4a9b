package bridge

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestCursorRecord: the relay's saved position reads back as written,
// reads the bare sequence every earlier version wrote, and refuses a
// record it could not have written, rather than resuming from a wrong
// place.
func TestCursorRecord(t *testing.T) {
	due := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		in      string
		cursor  uint64
		pending []pendingRetry
		err     string
	}{
		{name: "bare sequence, as before", in: "42", cursor: 42},
		{name: "zero", in: "0", cursor: 0},
		{name: "owed messages", in: `{"cursor":9,"pending":[{"seq":3,"attempts":2,"due":"2026-12-01T10:00:00Z","addr":"127.0.0.1:9"},{"seq":9,"attempts":0,"due":"2026-12-01T10:00:00Z"}]}`,
			cursor: 9, pending: []pendingRetry{{Seq: 3, Attempts: 2, Due: due, Addr: "127.0.0.1:9"}, {Seq: 9, Due: due}}},
		{name: "empty", in: "", err: "cursor"},
		{name: "negative", in: "-1", err: "cursor"},
		{name: "not json", in: "{cursor", err: "record"},
		{name: "owed past the cursor", in: `{"cursor":2,"pending":[{"seq":3,"attempts":1,"due":"2026-12-01T10:00:00Z"}]}`, err: "does not fit"},
		{name: "owed at zero", in: `{"cursor":2,"pending":[{"seq":0,"attempts":1,"due":"2026-12-01T10:00:00Z"}]}`, err: "does not fit"},
		{name: "given up already", in: `{"cursor":5,"pending":[{"seq":3,"attempts":10,"due":"2026-12-01T10:00:00Z"}]}`, err: "does not fit"},
		{name: "too many", in: `{"cursor":5000,"pending":[` + strings.Repeat(`{"seq":1,"attempts":0,"due":"2026-12-01T10:00:00Z"},`, relayPendingMax) + `{"seq":1,"attempts":0,"due":"2026-12-01T10:00:00Z"}]}`, err: "at most"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cursor, pending, err := decodeCursor([]byte(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("decodeCursor(%.60q) = %d, %v, %v; want an error about %q", tc.in, cursor, pending, err, tc.err)
				}
				return
			}
			if err != nil || cursor != tc.cursor || !reflect.DeepEqual(pending, tc.pending) {
				t.Fatalf("decodeCursor(%q) = %d, %+v, %v; want %d, %+v", tc.in, cursor, pending, err, tc.cursor, tc.pending)
			}
			again := encodeCursor(cursor, pending)
			c2, p2, err := decodeCursor([]byte(again))
			if err != nil || c2 != cursor || !reflect.DeepEqual(p2, pending) {
				t.Fatalf("written again as %s, it reads %d, %+v, %v", again, c2, p2, err)
			}
		})
	}
}

// FuzzDecodeCursor: any stored value is read or refused, never a panic,
// and what is read is written back to the same position.
func FuzzDecodeCursor(f *testing.F) {
	f.Add([]byte("42"))
	f.Add([]byte(`{"cursor":9,"pending":[{"seq":3,"attempts":2,"due":"2026-12-01T10:00:00Z","addr":"127.0.0.1:9"}]}`))
	f.Add([]byte(`{"cursor":1,"pending":null}`))
	f.Fuzz(func(t *testing.T, v []byte) {
		cursor, pending, err := decodeCursor(v)
		if err != nil {
			return
		}
		c2, p2, err := decodeCursor([]byte(encodeCursor(cursor, pending)))
		if err != nil || c2 != cursor || len(p2) != len(pending) {
			t.Fatalf("%q read as %d, %v; written again it reads %d, %v, %v", v, cursor, pending, c2, p2, err)
		}
		for i := range pending {
			if p2[i].Seq != pending[i].Seq || p2[i].Attempts != pending[i].Attempts || p2[i].Addr != pending[i].Addr || !p2[i].Due.Equal(pending[i].Due) {
				t.Fatalf("%q: pending %d read as %+v, written again %+v", v, i, pending[i], p2[i])
			}
		}
	})
}
