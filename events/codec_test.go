package events

import (
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
		m := toMsg(e)
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
	f.Add("01TEST", "credit.transfer", "agent://a", "agent://b", "tcp", "2025-10-29T18:00:00Z", "FROM: agent://a", "{}")
	f.Add("", "", "", "", "", "not a time", ":", "")
	f.Fuzz(func(t *testing.T, id, typ, from, to, transport, at, header, body string) {
		h := nats.Header{
			HdrEventID: {id}, HdrType: {typ}, HdrFrom: {from}, HdrTo: {to},
			HdrTransport: {transport}, HdrReceivedAt: {at}, HdrHeader: {header},
		}
		e, err := FromMsg(h, []byte(body), 1)
		if err != nil {
			return
		}
		m := toMsg(e)
		again, err := FromMsg(m.Header, m.Data, 1)
		if err != nil {
			t.Fatalf("a decoded envelope did not decode again: %v", err)
		}
		if again.ID != e.ID || again.Type != e.Type || string(again.Body) != string(e.Body) || len(again.Headers) != len(e.Headers) {
			t.Fatalf("re-encoding changed the envelope: %+v -> %+v", e, again)
		}
	})
}
