package projections

import (
	"fmt"
	"testing"
	"time"

	"github.com/aglx/ledger/protocol"
)

// TestZoneJoinFloodCannotReplayAnotherZonesJoin: whoever holds one zone's
// secret floods that zone with authentic joins under made-up names; a
// join to another zone, read from the event stream and sent again within
// its window, is still refused as a replay (409), and the flooded zone
// refuses joins past its bound (429) instead of forgetting one. Until
// 2026-12-01 one memory served every zone and forgot its oldest: the
// replayed join was admitted, and the attacker was handed a session token
// in its sender's name (helper-87).
func TestZoneJoinFloodCannotReplayAnotherZonesJoin(t *testing.T) {
	vaultSecret := []byte("vault secret, held by vault members only!")
	lobbySecret := []byte("lobby secret, handed to anyone who asks")
	h := newHarness(t, func(c *RegistryConfig) {
		c.Zones = []Zone{
			{ID: "vault", Secret: vaultSecret, MinReputation: 0.5},
			{ID: "lobby", Secret: lobbySecret, MinReputation: 0},
		}
	})
	const victim = "agent://victim.local"
	at := func(d time.Duration) time.Time { return regT0.Add(d) }
	h.register(victim, 3600, at(0))
	join := hmacSigned(t, vaultSecret, frame(victim, testNode, protocol.TypeZoneJoin,
		fmt.Sprintf(`{"zone_id":"vault","agent_id":"v","timestamp":%q}`, ts(at(time.Second)))))
	h.mustReply(join, at(time.Second), protocol.TypeZoneConfirm, protocol.StatusOK)

	lobbyJoin := func(i int) *protocol.Frame {
		return hmacSigned(t, lobbySecret, frame(fmt.Sprintf("agent://f%d.local", i), testNode, protocol.TypeZoneJoin,
			fmt.Sprintf(`{"zone_id":"lobby","agent_id":"f","timestamp":%q}`, ts(at(time.Minute)))))
	}
	for i := range ZoneJoinsMax {
		h.r.Apply(h.event(lobbyJoin(i), at(time.Minute))) // answered 403 (not registered), and remembered
	}
	h.mustReply(lobbyJoin(ZoneJoinsMax), at(time.Minute), protocol.TypeZoneDeny, protocol.StatusTooManyRequests)
	h.mustReply(join, at(90*time.Second), protocol.TypeZoneDeny, protocol.StatusConflict)
}

// TestAJoinRefusedForAFullMemoryCannotBeReplayed: a join refused 429 (the
// zone's memory of answered joins full) is not remembered; once the memory
// has drained, a copy of it, read from the event stream by someone without
// the zone's secret, was admitted within its window and handed a session
// token in its sender's name (helper-89). Joins stamped no later than the
// refused ones are refused until the window has passed; a new one is
// taken.
func TestAJoinRefusedForAFullMemoryCannotBeReplayed(t *testing.T) {
	vaultSecret := []byte("vault secret, held by vault members only!")
	h := newHarness(t, func(c *RegistryConfig) {
		c.Zones = []Zone{{ID: "vault", Secret: vaultSecret, MinReputation: 0}}
	})
	const victim = "agent://victim.local"
	at := func(d time.Duration) time.Time { return regT0.Add(d) }
	h.register(victim, 3600, at(0))
	// A busy vault: its members' joins fill its memory at minute 1.
	for i := range ZoneJoinsMax {
		h.r.Apply(h.event(hmacSigned(t, vaultSecret, frame(fmt.Sprintf("agent://m%d.local", i), testNode, protocol.TypeZoneJoin,
			fmt.Sprintf(`{"zone_id":"vault","agent_id":"m","timestamp":%q}`, ts(at(time.Minute))))), at(time.Minute)))
	}
	// The victim's join at minute 10 is refused 429, and not remembered.
	join := hmacSigned(t, vaultSecret, frame(victim, testNode, protocol.TypeZoneJoin,
		fmt.Sprintf(`{"zone_id":"vault","agent_id":"v","timestamp":%q}`, ts(at(10*time.Minute)))))
	h.mustReply(join, at(10*time.Minute), protocol.TypeZoneDeny, protocol.StatusTooManyRequests)
	// At minute 11 the memory has drained and the join's timestamp is one
	// minute old: a replay of the refused join gets the victim's token.
	_, rep, _ := h.apply(join, at(11*time.Minute+time.Second))
	if rep.Type == protocol.TypeZoneConfirm {
		t.Fatalf("a replay of a join refused 429 was admitted: %s %d %s", rep.Type, rep.Status, rep.Body)
	}
	// A new join, stamped after it, is taken.
	h.mustReply(hmacSigned(t, vaultSecret, frame(victim, testNode, protocol.TypeZoneJoin,
		fmt.Sprintf(`{"zone_id":"vault","agent_id":"v","timestamp":%q}`, ts(at(11*time.Minute+2*time.Second))))),
		at(11*time.Minute+2*time.Second), protocol.TypeZoneConfirm, protocol.StatusOK)
}
