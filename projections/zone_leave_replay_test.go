package projections

import (
	"fmt"
	"testing"
	"time"

	"github.com/aglx/ledger/protocol"
)

// TestZoneLeaveReplayCannotEndANewSession: until 2026-12-01 a keyed
// agent's signed zone.leave was not remembered, and the order check let an
// equal timestamp pass, so anyone who saw it (event stream, plain TCP)
// could send it again within the window after the agent re-joined (the
// documented recovery: leave, then join). The new session ended, and a
// zone member could then join FROM the agent and hold its session: what
// TestZoneJoinCannotTakeAKeyedAgentsSession meant to prevent (helper-70).
func TestZoneLeaveReplayCannotEndANewSession(t *testing.T) {
	const carol = keyedCarolURI
	h, k, at := keyedCarol(t)
	join := func(when time.Duration) *protocol.Frame {
		return hmacSigned(t, testZoneSecretA, frame(carol, testNode, protocol.TypeZoneJoin,
			fmt.Sprintf(`{"zone_id":"research-hub","agent_id":"x","timestamp":%q}`, ts(at(when)))))
	}
	h.mustReply(join(2*time.Second), at(2*time.Second), protocol.TypeZoneConfirm, protocol.StatusOK)
	leave := signed(t, k, frame(carol, testNode, protocol.TypeZoneLeave,
		fmt.Sprintf(`{"zone_id":"research-hub","timestamp":%q}`, ts(at(4*time.Second)))))
	leaveBody := append([]byte(nil), leave.Body...)
	h.mustReply(leave, at(4*time.Second), protocol.TypeAck, protocol.StatusOK)
	token := str(t, h.mustReply(join(5*time.Second), at(5*time.Second), protocol.TypeZoneConfirm, protocol.StatusOK).Body, "session_token")

	// Mallory replays carol's captured leave, byte for byte, 2 minutes later.
	replay := frame(carol, testNode, protocol.TypeZoneLeave, string(leaveBody))
	_, rep, _ := h.apply(replay, at(2*time.Minute))
	t.Logf("replayed zone.leave: %s %d %s", rep.Type, rep.Status, rep.Body)
	if !h.r.ValidSession("research-hub", carol, token) {
		t.Errorf("a replayed signed zone.leave ended carol's new session")
	}
	// Mallory, a member holding the zone's secret, now joins as carol.
	_, rep, _ = h.apply(join(2*time.Minute+time.Second), at(2*time.Minute+time.Second))
	t.Logf("mallory's join FROM carol: %s %d %s", rep.Type, rep.Status, rep.Body)
	if rep.Type == protocol.TypeZoneConfirm {
		t.Errorf("a zone member took keyed carol's session: %s", rep.Body)
	}
}

// TestZoneJoinStampedAheadDoesNotBlockTheOwnersLeave: a join's timestamp
// is a zone member's word (every member holds the secret) and may run up
// to the window ahead; a member who joined in a keyed agent's name with a
// join stamped ahead made the agent's own signed leave look like a replay
// of an earlier one (helper-71). The membership began when the join
// arrived, at the latest.
func TestZoneJoinStampedAheadDoesNotBlockTheOwnersLeave(t *testing.T) {
	const carol = keyedCarolURI
	h, k, at := keyedCarol(t)
	ahead := hmacSigned(t, testZoneSecretA, frame(carol, testNode, protocol.TypeZoneJoin,
		fmt.Sprintf(`{"zone_id":"research-hub","agent_id":"x","timestamp":%q}`, ts(at(2*time.Second+4*time.Minute+50*time.Second)))))
	h.mustReply(ahead, at(2*time.Second), protocol.TypeZoneConfirm, protocol.StatusOK)
	leave := signed(t, k, frame(carol, testNode, protocol.TypeZoneLeave,
		fmt.Sprintf(`{"zone_id":"research-hub","timestamp":%q}`, ts(at(10*time.Second)))))
	h.mustReply(leave, at(10*time.Second), protocol.TypeAck, protocol.StatusOK)
}
