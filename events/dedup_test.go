package events

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/aglx/ledger/protocol"
	"pgregory.net/rapid"
)

// modelIDIndex is the duplicate index written as plainly as possible: every
// key with when it was added, forgotten when it is older than the window
// or beyond the newest max.
type modelIDIndex struct {
	window time.Duration
	max    int
	keys   []modelKey // oldest first
}

type modelKey struct {
	key     string
	a       Appended
	at      time.Time
	removed bool
}

func (m *modelIDIndex) expire(now time.Time) {
	for len(m.keys) > 0 && (len(m.keys) > m.max || now.Sub(m.keys[0].at) > m.window) {
		m.keys = m.keys[1:]
	}
}

func (m *modelIDIndex) lookup(key string, now time.Time) (Appended, bool) {
	m.expire(now)
	for i := len(m.keys) - 1; i >= 0; i-- {
		if k := m.keys[i]; k.key == key && !k.removed {
			return k.a, true
		} else if k.key == key {
			return Appended{}, false
		}
	}
	return Appended{}, false
}

func (m *modelIDIndex) add(key string, a Appended, at time.Time) {
	m.keys = append(m.keys, modelKey{key: key, a: a, at: at})
	m.expire(at)
}

func (m *modelIDIndex) remove(key string) {
	for i := len(m.keys) - 1; i >= 0; i-- {
		if m.keys[i].key == key {
			m.keys[i].removed = true
			return
		}
	}
}

// TestIDIndexMatchesModel: whatever mix of appends, resends, removals
// (a failed batch takes its keys back) and time passing, the index
// answers a resend exactly as the model does, and holds what it holds.
func TestIDIndexMatchesModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		window := time.Duration(rapid.IntRange(1, 50).Draw(t, "window")) * time.Millisecond
		max := rapid.IntRange(1, 40).Draw(t, "max")
		x := newIDIndex(window, max)
		m := &modelIDIndex{window: window, max: max}
		now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
		seq := uint64(0)
		for range rapid.IntRange(1, 300).Draw(t, "ops") {
			key := fmt.Sprintf("id:agent://a.local:%d", rapid.IntRange(0, 30).Draw(t, "key"))
			now = now.Add(time.Duration(rapid.IntRange(0, 5).Draw(t, "step")) * time.Millisecond)
			switch rapid.IntRange(0, 3).Draw(t, "op") {
			case 0, 1:
				got, _, gotOK := x.lookup(key, now)
				want, wantOK := m.lookup(key, now)
				if gotOK != wantOK || got != want {
					t.Fatalf("lookup(%s) at %v = %+v, %v; the model says %+v, %v", key, now, got, gotOK, want, wantOK)
				}
				if !gotOK {
					seq++
					a := Appended{EventID: fmt.Sprint("ev-", seq), Seq: seq}
					x.add(key, a, now, 0)
					m.add(key, a, now)
				}
			case 2:
				x.remove(key)
				m.remove(key)
			case 3:
				x.expire(now)
				m.expire(now)
			}
			if x.size() != len(m.keys) {
				t.Fatalf("the index holds %d keys; the model %d", x.size(), len(m.keys))
			}
		}
	})
}

// BenchmarkIDIndexAdd adds keys to a full window of n: the cost of an
// append must not grow with the window (it did: each add copied it all).
func BenchmarkIDIndexAdd(b *testing.B) {
	for _, n := range []int{1_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			x := newIDIndex(time.Hour, n)
			at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
			keys := make([]string, 2*n)
			for i := range keys {
				keys[i] = fmt.Sprint("id:agent://a.local:", i)
			}
			for i := range n {
				x.add(keys[i], Appended{Seq: uint64(i + 1)}, at, 0)
			}
			b.ResetTimer()
			i := 0
			for b.Loop() {
				x.add(keys[n+i%n], Appended{Seq: uint64(n + i + 1)}, at, 0)
				i++
			}
		})
	}
}

// TestClientKeyIsUnambiguous: two different senders or IDs never share a
// key. The last colon ends FROM, and the ID unescapes back.
func TestClientKeyIsUnambiguous(t *testing.T) {
	tests := []struct{ from, id, want string }{
		{"agent://a.local", "17", "id:agent://a.local:17"},
		{"agent://a", "80:x", "id:agent://a:80%3Ax"},
		{"agent://a:80", "x", "id:agent://a:80:x"},
		{"agent://a", "100%", "id:agent://a:100%25"},
		{"agent://a", "%3A", "id:agent://a:%253A"},
	}
	for _, tc := range tests {
		if got := ClientKey(tc.from, tc.id); got != tc.want {
			t.Errorf("ClientKey(%q, %q) = %q, want %q", tc.from, tc.id, got, tc.want)
		}
	}
	text := rapid.StringOfN(rapid.RuneFrom([]rune("a:%3A/.")), 0, 8, -1)
	rapid.Check(t, func(t *rapid.T) {
		from, id := "agent://"+text.Draw(t, "host"), text.Draw(t, "id")
		key := ClientKey(from, id)
		cut := strings.LastIndexByte(key, ':')
		gotFrom, gotID := key[len("id:"):cut], strings.NewReplacer("%3A", ":", "%25", "%").Replace(key[cut+1:])
		if gotFrom != from || gotID != id {
			t.Fatalf("ClientKey(%q, %q) = %q, which reads back as %q, %q", from, id, key, gotFrom, gotID)
		}
	})
}

// TestResendWithinTheWindowOutOfOrder: frames reach the committer out of
// receive order. A frame received 121 s after an original, committed
// before the original's resend (received at 119 s), moved the index's
// clock past the original's window, and the resend was stored twice.
func TestResendWithinTheWindowOutOfOrder(t *testing.T) {
	l, _ := openTestLog(t, t.TempDir())
	ctx := context.Background()
	t0 := time.Now().UTC()
	orig := testEnvelope(1, "task.assign", "agent://a.local", "agent://b.local")
	orig.MsgID = ClientKey("agent://a.local", "k")
	orig.ReceivedAt = t0
	other := testEnvelope(2, "task.assign", "agent://c.local", "agent://b.local")
	other.MsgID = ClientKey("agent://c.local", "z")
	other.ReceivedAt = t0.Add(121 * time.Second)
	resend := testEnvelope(3, "task.assign", "agent://a.local", "agent://b.local")
	resend.MsgID = orig.MsgID
	resend.ReceivedAt = t0.Add(119 * time.Second)

	first := appendAll(t, l, orig)[0]
	appendAll(t, l, other)
	a, err := l.Append(ctx, resend).Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !a.Duplicate || a.Seq != first.Seq {
		t.Fatalf("a resend received 119 s after the first = %+v; want a duplicate of seq %d", a, first.Seq)
	}
}

// TestContentDigestOfHeaders: header names count in any letters and any
// order of names, but one name's values in the order they came, since
// every reader takes the first (helper-89).
func TestContentDigestOfHeaders(t *testing.T) {
	env := func(hs ...string) *Envelope {
		e := &Envelope{Type: "ack", To: "agent://b.local", Body: []byte(`{}`)}
		for i := 0; i < len(hs); i += 2 {
			e.Headers = append(e.Headers, protocol.Header{Name: hs[i], Value: hs[i+1]})
		}
		return e
	}
	tests := []struct {
		name string
		a, b *Envelope
		same bool
	}{
		{"names in other letters and order", env("X-A", "1", "X-B", "2"), env("x-b", "2", "x-a", "1"), true},
		{"one name's values in another order", env("X-A", "1", "X-A", "2"), env("X-A", "2", "X-A", "1"), false},
		{"a value moved to another name", env("X-A", "1", "X-B", "2"), env("X-A", "2", "X-B", "1"), false},
		{"the key's headers do not count", env("FROM", "agent://a.local", "ID", "1"), env("FROM", "agent://c.local", "ID", "2"), true},
		{"a name longer than a buffer", env(strings.Repeat("x", 200), "1"), env(strings.Repeat("X", 200), "1"), true},
	}
	for _, tc := range tests {
		if got := contentDigest(tc.a) == contentDigest(tc.b); got != tc.same {
			t.Errorf("%s: same digest %v, want %v", tc.name, got, tc.same)
		}
	}
}

// TestIDIndexDoesNotKeepTheKeys: the index keeps a fixed-size hash of
// each key, not the key: at its bound of keys some 640 bytes long (a long
// FROM, an ID of escaped colons) the strings alone took 930 MB
// (helper-86).
func TestIDIndexDoesNotKeepTheKeys(t *testing.T) {
	const n = 50_000
	host := strings.Repeat(strings.Repeat("h", 63)+".", 3) + strings.Repeat("h", 61)
	id := strings.Repeat(":", protocol.IDSizeMax-8)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	x := newIDIndex(time.Hour, n)
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for i := range n {
		x.add(ClientKey("registry://"+host+":65535", fmt.Sprintf("%s%08d", id, i)),
			Appended{EventID: fmt.Sprintf("01TEST%020d", i), Seq: uint64(i + 1)}, at, 0)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / n
	t.Logf("%d bytes a key", per)
	if per > 400 {
		t.Fatalf("the index holds %d bytes a key of %d bytes; want a fixed size, far below the key", per, len(ClientKey("registry://"+host+":65535", id+"00000000")))
	}
	runtime.KeepAlive(x)
}
