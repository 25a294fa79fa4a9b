package projections

import (
	"fmt"
	"testing"
	"time"

	"github.com/aglx/ledger/protocol"
)

// TestSameSecondSignedReplayIsRefused: signedOutOfOrder lets a timestamp
// equal to the latest applied pass, and until 2026-12-01 nothing remembered
// which signed update was applied: of two updates an agent stamped in one
// second (a move, then its correction), the first could be replayed for
// the whole window, the entry went back to the old address, and the relay
// delivered there (helper-70). The messages applied at the latest
// timestamp are now remembered, and a replay of one is refused.
func TestSameSecondSignedReplayIsRefused(t *testing.T) {
	const bob = "agent://bob.local"
	at := func(d time.Duration) time.Time { return regT0.Add(d) }
	type tcase struct {
		name, typ, first, second, ack string
		reverted                      func(h *harness) bool
	}
	for _, tc := range []tcase{
		{"registry.update", protocol.TypeRegistryUpdate,
			`{"agent_name":"Bob","address":"10.0.0.1","port":7000,"timestamp":%q}`,
			`{"agent_name":"Bob","address":"10.0.0.2","port":7000,"timestamp":%q}`, protocol.TypeRegistryAck,
			func(h *harness) bool { c, _ := h.r.Contact(bob, at(2*time.Minute)); return c == "10.0.0.1:7000" }},
		{"mentor.register", protocol.TypeMentorRegister,
			`{"agent_name":"Bob","expertise":["go"],"available":true,"timestamp":%q}`,
			`{"agent_name":"Bob","expertise":["go"],"available":false,"timestamp":%q}`, protocol.TypeAck,
			func(h *harness) bool { return h.r.mentors[bob].Available }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			k := newEd25519(t)
			h.bindKey(bob, k, at(0))
			first := signed(t, k, frame(bob, testNode, tc.typ, fmt.Sprintf(tc.first, ts(at(time.Second)))))
			raw := string(first.Body)
			h.mustReply(first, at(time.Second), tc.ack, protocol.StatusOK)
			h.mustReply(signed(t, k, frame(bob, testNode, tc.typ, fmt.Sprintf(tc.second, ts(at(time.Second))))), at(time.Second+300*time.Millisecond), tc.ack, protocol.StatusOK)
			_, rep, _ := h.apply(frame(bob, testNode, tc.typ, raw), at(2*time.Minute))
			if tc.reverted(h) {
				t.Errorf("a replay of the first signed %s, 2 minutes later, was applied (%d) and put the old state back", tc.typ, rep.Status)
			}
		})
	}
}
