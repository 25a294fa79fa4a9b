package events

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/nats-io/nats.go"
)

func TestCodecRoundTrip(t *testing.T) {
	for _, e := range []*Envelope{
		testEnvelope(1, "credit.transfer", "agent://a.local", "agent://b.local"),
		func() *Envelope {
			e := testEnvelope(2, "agent.announce", "agent://a.local", "")
			e.Body = nil
			return e
		}(),
		func() *Envelope {
			e := testEnvelope(3, "ack", "agent://a.local", "agent://b")
			e.MsgID = "id:agent://a.local:x"
			return e
		}(),
	} {
		m := toMsg(e, 3)
		got, err := FromMsg(m.Header, m.Data, 7)
		if err != nil {
			t.Fatal(err)
		}
		e.Seq = 7
		if !reflect.DeepEqual(got, e) {
			t.Fatalf("FromMsg(toMsg(e)) =\n%+v\nwant\n%+v", got, e)
		}
	}
}

// FuzzFromMsg feeds arbitrary header values to the envelope decoder, which
// reads whatever a NATS client left on the stream: it must refuse or
// decode, never panic, and what it decodes must encode back the same.
func FuzzFromMsg(f *testing.F) {
	good := toMsg(testEnvelope(1, "credit.transfer", "agent://a", "agent://b"), 9)
	f.Add("01TEST", good.Header.Get(HdrEnvelope), "{}")
	f.Add("", `{"v":1}`, "")
	f.Add("x", `{"v":1,"type":"ack","received_at":"2025-10-29T18:00:00Z","headers":[["A","\u0000"]]}`, "")
	f.Fuzz(func(t *testing.T, id, envelope, body string) {
		h := nats.Header{HdrEventID: {id}, HdrEnvelope: {envelope}}
		e, err := FromMsg(h, []byte(body), 1)
		if err != nil {
			return
		}
		m := toMsg(e, 0)
		again, err := FromMsg(m.Header, m.Data, 1)
		if err != nil {
			t.Fatalf("a decoded envelope did not decode again: %v", err)
		}
		if again.ID != e.ID || again.Type != e.Type || string(again.Body) != string(e.Body) || len(again.Headers) != len(e.Headers) {
			t.Fatalf("re-encoding changed the envelope: %+v -> %+v", e, again)
		}
	})
}

// TestAppendJSONString: what the envelope writes is JSON that reads back
// as the string written (invalid UTF-8 as U+FFFD), with and without the
// plain-ASCII fast path.
func TestAppendJSONString(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"agent://a.local", "agent://a.local"},
		{`say "hi"`, `say "hi"`},
		{`back\slash`, `back\slash`},
		{"tab\there", "tab\there"},
		{"nul\x00del\x7f", "nul\x00del\x7f"},
		{"café", "café"},
		{"plain then é and \"q\"\n", "plain then é and \"q\"\n"},
		{"bad \xff byte", "bad \ufffd byte"},
	} {
		b := appendJSONString(nil, tc.in)
		var got string
		if err := json.Unmarshal(b, &got); err != nil || got != tc.want {
			t.Errorf("appendJSONString(%q) = %s, reads back %q (%v), want %q", tc.in, b, got, err, tc.want)
		}
	}
}
