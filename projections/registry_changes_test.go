package projections

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/aglx/ledger/protocol"
)

// TestFetchFromChangesMatchesTheWalk: for any history of registry
// updates, announcements and peer syncs (times that sometimes go back,
// entries that expire, synced last_seen values before and after the
// clock), the change log stays in order with a live entry per changed
// agent, and an update-mode registry.fetch read from it gives, page by
// page, the same entries and cursors as the walk over every agent.
func TestFetchFromChangesMatchesTheWalk(t *testing.T) {
	const peer = "registry://peer.local"
	rapid.Check(t, func(rt *rapid.T) {
		h := newHarness(t)
		agents := rapid.IntRange(1, 300).Draw(rt, "agents")
		pick := func(label string) string {
			return fmt.Sprintf("agent://a%03d.local", rapid.IntRange(0, agents-1).Draw(rt, label))
		}
		at := regT0
		// The peer stamps its syncs by its own clock, which does not go
		// back: a sync stamped before the last one is refused as a copy.
		var stamped time.Time
		for range rapid.IntRange(0, 2500).Draw(rt, "events") {
			// Mostly forward, sometimes back: the registry's clock must not follow.
			at = at.Add(time.Duration(rapid.IntRange(-20, 60).Draw(rt, "step")) * time.Second)
			switch rapid.IntRange(0, 4).Draw(rt, "kind") {
			case 0:
				f := frame(pick("agent"), "", protocol.TypeAgentAnnounce, `{"agent_name":"x","uptime":5}`)
				f.Transport = protocol.TransportUDP
				h.apply(f, at)
			case 1:
				var entries []string
				for range rapid.IntRange(1, 5).Draw(rt, "synced") {
					seen := at.Add(time.Duration(rapid.IntRange(-3600, 600).Draw(rt, "last_seen")) * time.Second)
					entries = append(entries, fmt.Sprintf(`{"agent_id":"id-%d","agent_uri":%q,"status":"READY","last_seen":%q,"ttl":%d}`,
						rapid.IntRange(0, 9).Draw(rt, "id"), pick("synced agent"), ts(seen), rapid.IntRange(1, 3600).Draw(rt, "synced ttl")))
				}
				if at.Before(stamped) {
					continue
				}
				stamped = at
				if _, rep, _ := h.apply(h.syncFrame(peer, strings.Join(entries, ","), at), at); rep.Status != protocol.StatusOK {
					rt.Fatalf("the sync was refused: %s %s", rep.Type, rep.Body)
				}
			default:
				h.apply(frame(pick("agent"), testNode, protocol.TypeRegistryUpdate,
					fmt.Sprintf(`{"agent_name":"x","status":"READY","ttl":%d}`, rapid.IntRange(1, 3600).Draw(rt, "ttl"))), at)
			}
		}
		log := h.r.changes.entries
		if len(log) > 2*len(h.r.agents)+changeLogSlack {
			rt.Fatalf("the change log holds %d entries for %d agents", len(log), len(h.r.agents))
		}
		live := map[string]bool{}
		for i, c := range log {
			if i > 0 && c.at.Before(log[i-1].at) {
				rt.Fatalf("the change log goes back in time at entry %d", i)
			}
			if a := h.r.agents[c.uri]; a.ChangedSeq == c.seq {
				if !a.ChangedAt.Equal(c.at) {
					rt.Fatalf("%s changed at %s, its entry says %s", c.uri, a.ChangedAt, c.at)
				}
				live[c.uri] = true
			}
		}
		for uri := range h.r.agents {
			if !live[uri] {
				rt.Fatalf("%s has no live entry in the change log", uri)
			}
		}
		// What a federation pusher sends after any position: the same as
		// the walk over every agent that Changed was until 2026-12-01.
		for range 5 {
			sinceSeq := uint64(rapid.IntRange(0, int(h.seq)+1).Draw(rt, "since seq"))
			want := changedByWalk(h.r, sinceSeq)
			if got := h.r.Changed(sinceSeq); !reflect.DeepEqual(got, want) {
				rt.Fatalf("Changed(%d) from the change log:\n%+v\nfrom the walk:\n%+v", sinceSeq, got, want)
			}
			// And a page at a time, as a pusher reads it: the pages
			// together are the whole, each ends with an event (the next
			// page starts past it), and only a page that took every
			// change says so.
			max := rapid.IntRange(1, 20).Draw(rt, "page")
			var paged []SyncEntry
			for from, pages := sinceSeq, 0; ; pages++ {
				page, through := h.r.ChangedPage(from, max)
				paged = append(paged, page...)
				if through == 0 {
					break
				}
				if through <= from || len(page) < max || pages > len(want) {
					rt.Fatalf("ChangedPage(%d, %d) = %d entries through %d", from, max, len(page), through)
				}
				from = through
			}
			if !slices.EqualFunc(paged, want, func(a, b SyncEntry) bool { return reflect.DeepEqual(a, b) }) {
				rt.Fatalf("Changed(%d) in pages of %d:\n%+v\nat once:\n%+v", sinceSeq, max, paged, want)
			}
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
				after = fromWalk.Entries[len(fromWalk.Entries)-1].AgentURI
				if pages++; pages > agents {
					rt.Fatalf("more pages than agents")
				}
			}
		}
	})
}

// TestFetchSinceAnyYear: a since from year 0001 to 9999 (what a timestamp
// may say) gives the walk's answer; Unix nanoseconds would wrap outside
// 1678 to 2262 and give none or all.
func TestFetchSinceAnyYear(t *testing.T) {
	h := newHarness(t)
	for i := range 5 {
		h.apply(frame(fmt.Sprintf("agent://a%d.local", i), testNode, protocol.TypeRegistryUpdate, `{"agent_name":"x","status":"READY","ttl":86400}`), regT0)
	}
	for _, tt := range []struct {
		since string
		want  int
	}{{"0001-01-01T00:00:00Z", 5}, {"1600-01-01T00:00:00Z", 5}, {"1677-01-01T00:00:00Z", 5}, {"2300-01-01T00:00:00Z", 0}, {"9999-12-31T23:59:59Z", 0}} {
		_, rep, _ := h.apply(frame("agent://a1.local", testNode, protocol.TypeRegistryFetch, fmt.Sprintf(`{"mode":"update","since":%q}`, tt.since)), regT0)
		if got := strings.Count(string(rep.Body), `"agent_uri"`); got != tt.want {
			t.Errorf("since %s: %d entries, want %d: %s", tt.since, got, tt.want, rep.Body)
		}
	}
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

// changedByWalk is Registry.Changed as it was until 2026-12-01: every agent
// walked, those changed after sinceSeq sorted by the sequence of their
// change and then by URI. The change log must give the same.
func changedByWalk(r *Registry, sinceSeq uint64) []SyncEntry {
	var uris []string
	for uri, a := range r.agents {
		if a.ChangedSeq > sinceSeq {
			uris = append(uris, uri)
		}
	}
	slices.SortFunc(uris, func(x, y string) int {
		if c := cmp.Compare(r.agents[x].ChangedSeq, r.agents[y].ChangedSeq); c != 0 {
			return c
		}
		return strings.Compare(x, y)
	})
	var out []SyncEntry
	for _, uri := range uris {
		if e, ok := r.syncEntry(uri); ok {
			out = append(out, e)
		}
	}
	return out
}

// TestAPushSkipsAnEntryNamedByNoURI: the registry keys an entry by its
// event's envelope FROM, which the node writes from the parsed message; a
// log read as found may hold another writer's envelope whose FROM is no
// URI at all. Such an entry is no peer's to take, and a push that met it
// panicked, in every push to every peer (helper-124).
func TestAPushSkipsAnEntryNamedByNoURI(t *testing.T) {
	h := newHarness(t)
	at := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	h.register("agent://a.local", 3600, at)
	f := frame("agent://b.local", testNode, protocol.TypeRegistryUpdate, `{"agent_name":"B","status":"READY","ttl":3600}`)
	e := h.event(f, at)
	e.From = "not a uri" // as another writer's envelope may say
	h.applyEvent(e)
	if _, ok := h.r.agents["not a uri"]; !ok {
		t.Fatal("the registry did not keep the entry: the test no longer reaches the case")
	}
	page, _ := h.r.ChangedPage(0, 0)
	if len(page) != 1 || page[0].AgentURI.String() != "agent://a.local" {
		t.Fatalf("ChangedPage = %+v; want agent://a.local alone", page)
	}
}
