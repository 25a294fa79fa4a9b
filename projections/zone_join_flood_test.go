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
