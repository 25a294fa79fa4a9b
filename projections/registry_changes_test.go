package projections

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/aglx/ledger/protocol"
)

// TestFetchFromChangesMatchesTheWalk: for any history of registry updates
// and announcements (times that sometimes go back, entries that expire),
// an update-mode registry.fetch read from the change log gives, page by
// page, the same entries and cursors as the walk over every agent.
func TestFetchFromChangesMatchesTheWalk(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		h := newHarness(t)
		agents := rapid.IntRange(1, 300).Draw(rt, "agents")
		at := regT0
		var times []time.Time
		for i := range rapid.IntRange(0, 2500).Draw(rt, "events") {
			// Mostly forward, sometimes back: the registry's clock must not follow.
			at = at.Add(time.Duration(rapid.IntRange(-20, 60).Draw(rt, "step")) * time.Second)
			uri := fmt.Sprintf("agent://a%03d.local", rapid.IntRange(0, agents-1).Draw(rt, "agent"))
			if i%5 == 4 {
				f := frame(uri, "", protocol.TypeAgentAnnounce, `{"agent_name":"x","uptime":5}`)
				f.Transport = protocol.TransportUDP
				h.apply(f, at)
			} else {
				ttl := rapid.IntRange(1, 3600).Draw(rt, "ttl")
				h.apply(frame(uri, testNode, protocol.TypeRegistryUpdate,
					fmt.Sprintf(`{"agent_name":"x","status":"READY","ttl":%d}`, ttl)), at)
			}
			times = append(times, at)
		}
		if len(h.r.changes.entries) > 2*len(h.r.agents)+changeLogSlack {
			rt.Fatalf("the change log holds %d entries for %d agents", len(h.r.changes.entries), len(h.r.agents))
		}
		for range 5 {
			since := regT0.Add(time.Duration(rapid.IntRange(-60, 2500*60).Draw(rt, "since")) * time.Second)
			after, pages := "", 0
			for {
				var fromLog, fromWalk registryListBody
				h.r.fetchChanged(&fromLog, h.r.changes.since(since), after)
				h.r.fetchWalk(&fromWalk, false, since, after)
				if !reflect.DeepEqual(fromLog, fromWalk) {
					rt.Fatalf("since %s after %q: from the change log\n%+v\nfrom the walk\n%+v", since, after, fromLog, fromWalk)
				}
				if fromWalk.Next == "" {
					break
				}
				last := fromWalk.Entries[len(fromWalk.Entries)-1].AgentURI
				after = last
				if pages++; pages > agents {
					rt.Fatalf("more pages than agents")
				}
			}
		}
	})
}

// TestUpdateFetchReadsOnlyTheChanges: a fetch for what changed in the last
// minute, with many agents unchanged for longer, reads the change log's
// tail, not every agent. Counted in entries looked at, not timed.
func TestUpdateFetchReadsOnlyTheChanges(t *testing.T) {
	h := newHarness(t)
	const agents = 20000
	for i := range agents {
		uri := fmt.Sprintf("agent://a%05d.local", i)
		h.apply(frame(uri, testNode, protocol.TypeRegistryUpdate, `{"agent_name":"x","status":"READY","ttl":86400}`), regT0)
	}
	later := regT0.Add(time.Hour)
	for i := range 3 {
		uri := fmt.Sprintf("agent://a%05d.local", i*7000)
		h.apply(frame(uri, testNode, protocol.TypeRegistryUpdate, `{"agent_name":"x","status":"BUSY","ttl":86400}`), later)
	}
	changed := h.r.changes.since(later.Add(-time.Minute))
	if len(changed) != 3 || !useChangeLog(len(changed), agents) {
		t.Fatalf("a fetch for the last minute would read %d changes (change log used: %v); want the 3 made", len(changed), useChangeLog(len(changed), agents))
	}
	_, rep, _ := h.apply(frame("agent://a00001.local", testNode, protocol.TypeRegistryFetch,
		fmt.Sprintf(`{"mode":"update","since":%q}`, ts(later.Add(-time.Minute)))), later)
	for _, uri := range []string{"agent://a00000.local", "agent://a07000.local", "agent://a14000.local"} {
		if !strings.Contains(string(rep.Body), uri) {
			t.Errorf("the update fetch misses %s: %s", uri, rep.Body)
		}
	}
	if n := strings.Count(string(rep.Body), `"agent_uri"`); n != 3 {
		t.Errorf("the update fetch lists %d entries; want 3: %s", n, rep.Body)
	}
}
