package projections

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aglx/ledger/protocol"
)

// TestSyncOnlyFromNamedPeers: registry.sync is taken only from the peers
// the operator names (RegistryConfig.SyncFrom, aglxd --sync-from), signed
// with a key bound to them. The binding alone was the test: auth.request
// binds a first key to any URI, registry:// ones included, for anyone, so
// anyone could name itself registry://ANYTHING, bind a key of its own and
// sync as a peer: overwrite what the operator's real peer said of an
// agent, invent entries, and have the node pass them on, signed with the
// node's key, to its own peers (Changed feeds the pusher; helper-97).
func TestSyncOnlyFromNamedPeers(t *testing.T) {
	const real, mallory = testPeer, "registry://mallory.invalid"
	const far, ghost = "agent://far.local", "agent://ghost.local"
	at := func(d time.Duration) time.Time { return regT0.Add(d) }
	entry := func(id, uri, status string, ttl int) string {
		return fmt.Sprintf(`{"agent_id":%q,"agent_uri":%q,"status":%q,"ttl":%d}`, id, uri, status, ttl)
	}
	h := newHarness(t)
	h.mustReply(h.syncFrame(real, entry("8b1e9b45-0000-4000-8000-000000000001", far, "READY", 3600), at(0)), at(0), protocol.TypeRegistryAck, protocol.StatusOK)
	mark := h.seq
	// mallory: a fresh key, bound to a name nobody gave it, then a sync.
	rep := h.mustReply(h.syncFrame(mallory, entry("ffffffff-ffff-4fff-bfff-ffffffffffff", far, "REVOKED", 0)+","+entry("ghost-1", ghost, "READY", 86400), at(time.Minute)),
		at(time.Minute), protocol.TypeError, protocol.StatusForbidden)
	if !strings.Contains(string(rep.Body), "--sync-from") {
		t.Errorf("the refusal does not say where peers are named: %s", rep.Body)
	}
	d, _ := h.r.Agent(far)
	g, _ := h.r.Agent(ghost)
	for _, c := range []struct {
		what string
		bad  bool
	}{
		{fmt.Sprintf("the real peer's entry for %s was overwritten by %s: status %q via %s", far, mallory, d.Status, d.Via), d.Via != real || d.Status != "READY"},
		{fmt.Sprintf("an entry %s was invented by %s (status %q)", ghost, mallory, g.Status), g.Via == mallory},
		{fmt.Sprintf("the node's pusher would send on %d entries that only %s vouched for", len(h.r.Changed(mark)), mallory), len(h.r.Changed(mark)) > 0},
	} {
		if c.bad {
			t.Error(c.what)
		}
	}
}
