package projections

import (
	"fmt"
	"testing"
	"time"

	"github.com/aglx/ledger/protocol"
)

// TestSignedSyncOrAnnounceCopyTakesNoEffect: a signed message is fresh for
// the whole signature window, and whoever holds a copy (a reader of the
// event stream, anyone on the path of a UDP announce or a plain-TCP sync)
// can send it again. A copy of an older registry.sync put back what the
// peer had since changed (and the node sent it on); a copy of an announce
// brought back an entry that had expired (helper-97). Both now keep the
// order of their sender's signed timestamps, as registry.update does.
func TestSignedSyncOrAnnounceCopyTakesNoEffect(t *testing.T) {
	at := func(d time.Duration) time.Time { return regT0.Add(d) }
	const peer, x = testPeer, "agent://x.local"
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, h *harness) (bad bool, what string)
	}{
		{"registry.sync without last_seen (the reference's form): an old sync puts the old status back", func(t *testing.T, h *harness) (bool, string) {
			first := h.syncFrame(peer, fmt.Sprintf(`{"agent_id":"8b1e9b45-4a2c-4a83-9341-34f58f1c83c2","agent_uri":%q,"status":"READY","ttl":3600}`, x), at(time.Second))
			copyBody := append([]byte(nil), first.Body...)
			h.mustReply(first, at(time.Second), protocol.TypeRegistryAck, protocol.StatusOK)
			h.mustReply(h.syncFrame(peer, fmt.Sprintf(`{"agent_id":"8b1e9b45-4a2c-4a83-9341-34f58f1c83c2","agent_uri":%q,"status":"REVOKED","ttl":3600}`, x), at(time.Minute)),
				at(time.Minute), protocol.TypeRegistryAck, protocol.StatusOK)
			replay := frame(peer, testNode, protocol.TypeRegistrySync, string(copyBody))
			_, rep, _ := h.apply(replay, at(3*time.Minute))
			a, _ := h.r.Agent(x)
			return a.Status == "READY", fmt.Sprintf("replay answered %s %d; status now %q", rep.Type, rep.Status, a.Status)
		}},
		{"registry.sync with last_seen ahead of the node's clock: the same", func(t *testing.T, h *harness) (bool, string) {
			ahead := ts(at(10 * time.Minute)) // the peer's clock runs ahead
			first := h.syncFrame(peer, fmt.Sprintf(`{"agent_id":"8b1e9b45-4a2c-4a83-9341-34f58f1c83c2","agent_uri":%q,"status":"READY","ttl":3600,"last_seen":%q}`, x, ahead), at(time.Second))
			copyBody := append([]byte(nil), first.Body...)
			h.mustReply(first, at(time.Second), protocol.TypeRegistryAck, protocol.StatusOK)
			h.mustReply(h.syncFrame(peer, fmt.Sprintf(`{"agent_id":"8b1e9b45-4a2c-4a83-9341-34f58f1c83c2","agent_uri":%q,"status":"REVOKED","ttl":3600,"last_seen":%q}`, x, ts(at(11*time.Minute))), at(time.Minute)),
				at(time.Minute), protocol.TypeRegistryAck, protocol.StatusOK)
			replay := frame(peer, testNode, protocol.TypeRegistrySync, string(copyBody))
			_, rep, _ := h.apply(replay, at(3*time.Minute))
			a, _ := h.r.Agent(x)
			return a.Status == "READY", fmt.Sprintf("replay answered %s %d; status now %q", rep.Type, rep.Status, a.Status)
		}},
		{"agent.announce: a copy revives an entry that expired", func(t *testing.T, h *harness) (bool, string) {
			k := newEd25519(t)
			h.bindKey(x, k, at(0))
			h.mustReply(signed(t, k, frame(x, testNode, protocol.TypeRegistryUpdate, fmt.Sprintf(`{"agent_name":"x","ttl":60,"timestamp":%q}`, ts(at(0))))),
				at(0), protocol.TypeRegistryAck, protocol.StatusOK)
			ann := signed(t, k, frame(x, "", protocol.TypeAgentAnnounce, fmt.Sprintf(`{"agent_name":"x","uptime":5,"timestamp":%q}`, ts(at(10*time.Second)))))
			ann.Transport = protocol.TransportUDP
			copyBody := append([]byte(nil), ann.Body...)
			h.apply(ann, at(10*time.Second))
			// x goes away; its entry expires at 70 s. A copy sent at 4 min:
			replay := frame(x, "", protocol.TypeAgentAnnounce, string(copyBody))
			replay.Transport = protocol.TransportUDP
			h.apply(replay, at(4*time.Minute))
			a, _ := h.r.Agent(x)
			return a.Status != "EXPIRED", fmt.Sprintf("status %q, last_seen %s, expires %s", a.Status, a.LastSeen.Format(time.RFC3339), a.Expires.Format(time.RFC3339))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			if bad, what := tc.run(t, h); bad {
				t.Errorf("a copy of a signed message took effect again: %s", what)
			}
		})
	}
}
