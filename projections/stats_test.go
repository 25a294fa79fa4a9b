package projections

import (
	"fmt"
	"testing"

	"github.com/aglx/ledger/events"
)

// TestStatsBoundsSenders: senders past StatsSendersMax are counted
// together, so that varying FROM cannot grow /v1/stats without bound; a
// sender already named goes on being counted by name.
func TestStatsBoundsSenders(t *testing.T) {
	s := NewStats()
	apply := func(from string) {
		s.Apply(&Event{Envelope: &events.Envelope{Seq: s.LastSeq + 1, Type: "agent.announce", From: from, Transport: events.TransportUDP}})
	}
	for i := range StatsSendersMax + 5 {
		apply(fmt.Sprintf("agent://n%d.x", i))
	}
	apply("agent://n0.x")
	if len(s.BySender) != StatsSendersMax || s.BySenderOther != 5 || s.BySender["agent://n0.x"] != 2 || s.Events != StatsSendersMax+6 {
		t.Fatalf("%d senders by name, %d others, n0 counted %d, %d events; want %d, 5, 2, %d",
			len(s.BySender), s.BySenderOther, s.BySender["agent://n0.x"], s.Events, StatsSendersMax, StatsSendersMax+6)
	}
}
