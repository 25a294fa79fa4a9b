package projections

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/aglx/ledger/protocol"
)

func fetchFrame(from, mode, since, after string) *protocol.Frame {
	body := fmt.Sprintf(`{"mode":%q,"since":%q`, mode, since)
	if after != "" {
		body += fmt.Sprintf(`,"after":%q`, after)
	}
	return frame(from, testNode, protocol.TypeRegistryFetch, body+"}")
}

func listOf(t *testing.T, rep Reply) (uris []string, next string) {
	t.Helper()
	var body registryListBody
	if err := json.Unmarshal(rep.Body, &body); err != nil {
		t.Fatal(err)
	}
	for _, e := range body.Entries {
		uris = append(uris, e.AgentURI)
	}
	return uris, body.Next
}

// TestTTLAndFetch checks expiry in event time, fetch since a time, and the
// status history, and that a replay gives the same ids and the same views.
func TestTTLAndFetch(t *testing.T) {
	const a, b, c = "agent://a.local", "agent://b.local", "agent://c.local"
	h := newHarness(t)
	at := func(d time.Duration) time.Time { return regT0.Add(d) }
	idA := str(t, h.register(a, 60, at(0)).Body, "agent_id")
	h.register(b, 3600, at(10*time.Second))
	h.register(c, 3600, at(30*time.Second))

	// At 2 minutes a has expired (0 + 60 s): it leaves registry.list. The
	// cases run in order: the registry's clock never goes back.
	tests := []struct {
		name  string
		at    time.Duration
		since string
		want  []string
	}{
		{"before a expired", 59 * time.Second, "2025-01-01T00:00:00Z", []string{a, b, c}},
		{"since long ago, a expired", 2 * time.Minute, "2025-01-01T00:00:00Z", []string{b, c}},
		{"since between b and c", 2 * time.Minute, ts(at(20 * time.Second)), []string{c}},
		{"since is inclusive", 2 * time.Minute, ts(at(10 * time.Second)), []string{b, c}},
		{"since after everything", 2 * time.Minute, ts(at(time.Minute)), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := h.mustReply(fetchFrame("agent://x.local", "update", tt.since, ""), at(tt.at), protocol.TypeRegistryList, protocol.StatusOK)
			if got, next := listOf(t, rep); fmt.Sprint(got) != fmt.Sprint(tt.want) || next != "" {
				t.Errorf("registry.list = %v next %q, want %v", got, next, tt.want)
			}
		})
	}

	// The registry's clock is the latest event time: 2 minutes.
	if got := pageOf(h.r.Agents(AgentFilter{Status: "expired"})); len(got) != 1 || got[0].AgentURI != a {
		t.Errorf("Agents(EXPIRED) = %+v, want a", got)
	}
	if got := pageOf(h.r.Agents(AgentFilter{Capability: "data.analyze"})); len(got) != 3 {
		t.Errorf("Agents(data.analyze) = %d agents, want all 3 (expired ones included)", len(got))
	}
	d, _ := h.r.Agent(a)
	if n := len(d.History); d.Status != StatusExpired || n != 2 || d.History[1].Status != StatusExpired || !d.History[1].At.Equal(at(time.Minute)) {
		t.Errorf("Agent(a) = %s with history %+v; want EXPIRED at 1m", d.Status, d.History)
	}

	// An announce revives a; the history keeps the expiry.
	announce := frame(a, "", protocol.TypeAgentAnnounce, `{"agent_name":"A","uptime":99}`)
	announce.Transport = protocol.TransportUDP
	if _, rep, ok := h.apply(announce, at(3*time.Minute)); ok {
		t.Errorf("agent.announce answered with %s", rep.Type)
	}
	d, _ = h.r.Agent(a)
	if d.Status != "READY" || d.Uptime == nil || *d.Uptime != 99 || len(d.History) != 3 || d.History[2].Cause != protocol.TypeAgentAnnounce {
		t.Errorf("Agent(a) after announce = %+v", d)
	}
	// A re-registration keeps the id.
	if got := str(t, h.register(a, 60, at(4*time.Minute)).Body, "agent_id"); got != idA {
		t.Errorf("agent_id on re-registration = %q, want %q", got, idA)
	}
	// An announce from an unknown agent is a sighting, not an entry.
	stranger := frame("agent://stranger.local", "", protocol.TypeAgentAnnounce, `{"agent_name":"S"}`)
	stranger.Transport = protocol.TransportUDP
	h.apply(stranger, at(5*time.Minute))
	if d, ok := h.r.Agent("agent://stranger.local"); !ok || d.Registered || d.Sighting == nil || d.Sighting.Peer == "" {
		t.Errorf("Agent(stranger) = %+v, %v; want a sighting with its address", d, ok)
	}

	// A replay of the log gives the same ids and the same views.
	r2 := h.replay()
	s1, _ := h.r.Snapshot()
	s2, _ := r2.Snapshot()
	if !bytes.Equal(s1, s2) {
		t.Errorf("replayed Snapshot differs:\n got %s\nwant %s", s2, s1)
	}
	v1, _ := json.Marshal(pageOf(h.r.Agents(AgentFilter{})))
	v2, _ := json.Marshal(pageOf(r2.Agents(AgentFilter{})))
	if !bytes.Equal(v1, v2) {
		t.Errorf("replayed Agents differ:\n got %s\nwant %s", v2, v1)
	}
}

func TestFetchPages(t *testing.T) {
	h := newHarness(t)
	const n = 2*RegistryListMax + 50
	for i := range n {
		h.register(fmt.Sprintf("agent://n%03d.local", i), 3600, regT0)
	}
	var all []string
	after := ""
	for page := 0; ; page++ {
		if page > 3 {
			t.Fatal("too many pages")
		}
		rep := h.mustReply(fetchFrame("agent://x.local", "update", "2025-01-01T00:00:00Z", after), regT0.Add(time.Minute), protocol.TypeRegistryList, protocol.StatusOK)
		uris, next := listOf(t, rep)
		if len(uris) > RegistryListMax {
			t.Fatalf("page %d has %d entries", page, len(uris))
		}
		all = append(all, uris...)
		if next == "" {
			break
		}
		after = next
	}
	if len(all) != n || all[0] != "agent://n000.local" || all[n-1] != fmt.Sprintf("agent://n%03d.local", n-1) {
		t.Errorf("pages gave %d entries (%s ... %s), want %d in order", len(all), all[0], all[len(all)-1], n)
	}
	if got := pageOf(h.r.Agents(AgentFilter{After: "agent://n100.local", Limit: 5})); len(got) != 5 || got[0].AgentURI != "agent://n101.local" {
		t.Errorf("Agents(after n100, 5) = %d starting %v", len(got), got)
	}
}

// TestSyncMerge checks the merge rule of registry.sync and Changed.
func TestSyncMerge(t *testing.T) {
	const peer = "registry://peer.local"
	h := newHarness(t)
	h.register("agent://self.local", 3600, regT0)
	mark := h.seq
	// Each sync is stamped a second after the one before, as a pusher's
	// are: a sync stamped as the last one and the same is a copy (409).
	pushes := 0
	sync := func(entries string, at time.Time) Reply {
		f := h.syncFrame(peer, entries, at.Add(time.Duration(pushes)*time.Second))
		pushes++
		return h.mustReply(f, at, protocol.TypeRegistryAck, protocol.StatusOK)
	}
	entry := func(id, uri, status, lastSeen string) string {
		return fmt.Sprintf(`{"agent_id":%q,"agent_uri":%q,"status":%q,"last_seen":%q,"ttl":600}`, id, uri, status, lastSeen)
	}
	t1 := regT0.Add(time.Minute)
	rep := sync(entry("id-9", "agent://self.local", "BUSY", ts(t1))+","+entry("id-5", "agent://far.local", "READY", ts(regT0)), t1)
	if got := field(t, rep.Body, "merged"); got != 1.0 {
		t.Errorf("merged = %v, want 1 (the agent's own word is kept)", got)
	}
	if d, _ := h.r.Agent("agent://self.local"); d.Source != SourceSelf || d.Status != "READY" {
		t.Errorf("self entry = %+v; a second-hand entry overwrote it", d)
	}
	steps := []struct {
		name   string
		entry  string
		wantID string
		merged float64
	}{
		{"older last_seen loses", entry("id-7", "agent://far.local", "IDLE", ts(regT0.Add(-time.Second))), "id-5", 0},
		{"same last_seen, lower id loses", entry("id-1", "agent://far.local", "IDLE", ts(regT0)), "id-5", 0},
		{"same entry again changes nothing", entry("id-5", "agent://far.local", "READY", ts(regT0)), "id-5", 0},
		{"same last_seen, higher id wins", entry("id-6", "agent://far.local", "IDLE", ts(regT0)), "id-6", 1},
		{"newer last_seen wins", entry("id-2", "agent://far.local", "BUSY", ts(t1)), "id-2", 1},
		{"a future last_seen counts as now", entry("id-3", "agent://far.local", "BUSY", ts(t1.Add(time.Hour))), "id-3", 1},
		{"the fresher one cannot be beaten by its own echo", entry("id-3", "agent://far.local", "BUSY", ts(t1.Add(time.Hour))), "id-3", 0},
	}
	for _, s := range steps {
		rep := sync(s.entry, t1)
		d, _ := h.r.Agent("agent://far.local")
		if got := field(t, rep.Body, "merged"); got != s.merged || d.AgentID != s.wantID || d.Via != peer {
			t.Errorf("%s: merged %v, entry %s via %s; want merged %v, %s", s.name, got, d.AgentID, d.Via, s.merged, s.wantID)
		}
	}
	if d, _ := h.r.Agent("agent://far.local"); !d.LastSeen.Equal(t1) {
		t.Errorf("last_seen = %v, want the clamp to %v", d.LastSeen, t1)
	}

	// Changed lists what changed after the mark, for the pusher.
	ch := h.r.Changed(mark)
	if len(ch) != 1 || ch[0].AgentURI.String() != "agent://far.local" || ch[0].AgentID != "id-3" || ch[0].TTL == nil || *ch[0].TTL != 600 {
		t.Errorf("Changed(%d) = %+v, want far.local", mark, ch)
	}
	if all := h.r.Changed(0); len(all) != 2 || all[0].AgentURI.String() != "agent://self.local" {
		t.Errorf("Changed(0) = %+v, want self then far", all)
	}
	// What Changed returns is a valid registry.sync body.
	if err := (&protocol.RegistrySync{Entries: h.r.Changed(0)}).Validate(); err != nil {
		t.Errorf("RegistrySync{Changed(0)}.Validate() = %v", err)
	}

	// Hints from an exchange are never entries.
	ex := frame("agent://gossip.local", "agent://other.local", protocol.TypeRegistryExchange, `{"known_agents":[{"agent_uri":"agent://rumour.local","status":"READY"}]}`)
	if _, rep, ok := h.apply(ex, t1); ok {
		t.Errorf("exchange between agents answered with %s", rep.Type)
	}
	if d, ok := h.r.Agent("agent://rumour.local"); !ok || d.Registered || d.Hint == nil {
		t.Errorf("Agent(rumour) = %+v, want a hint only", d)
	}
	if got := pageOf(h.r.Agents(AgentFilter{})); len(got) != 2 {
		t.Errorf("Agents() = %d, want 2: hints are not agents", len(got))
	}
}

func TestAgentIDIsVersion8(t *testing.T) {
	id := agentID("01JBE3Q4R8W5X9ZK2M7N6P0T1V")
	if len(id) != 36 || id[14] != '8' || (id[19] != '8' && id[19] != '9' && id[19] != 'a' && id[19] != 'b') {
		t.Errorf("agentID = %q, want an RFC 9562 version 8 UUID", id)
	}
	if agentID("01JBE3Q4R8W5X9ZK2M7N6P0T1V") != id || agentID("01JBE3Q4R8W5X9ZK2M7N6P0T1W") == id {
		t.Error("agentID is not a function of the event id")
	}
}

func TestRecentMapEvictsOldest(t *testing.T) {
	m := newRecentMap[int](3)
	for i, k := range []string{"a", "b", "a", "c", "d", "e"} {
		m.put(k, i)
	}
	if _, ok := m.get("b"); ok {
		t.Error("b should be gone")
	}
	if _, ok := m.get("a"); ok {
		t.Error("a (last put before c) should be gone")
	}
	if got := len(m.all()); got != 3 {
		t.Errorf("len = %d, want 3", got)
	}
}

// TestSyncedEntriesLeaveRoomForAgents: peers may send registry.sync
// unsigned, so the agents known only from them are bounded apart
// (RegistrySyncedMax); past that, synced entries are left out, and an
// agent that registers itself is still taken, and stops counting as
// synced.
func TestSyncedEntriesLeaveRoomForAgents(t *testing.T) {
	const peer = "registry://peer.local"
	h := newHarness(t)
	entry := func(uri string) string {
		return fmt.Sprintf(`{"agent_id":"id-%s","agent_uri":%q,"status":"READY","ttl":600}`, uri[8:9], uri)
	}
	rep := h.mustReply(h.syncFrame(peer, entry("agent://a.local"), regT0), regT0, protocol.TypeRegistryAck, protocol.StatusOK)
	if got := field(t, rep.Body, "merged"); got != 1.0 || h.r.synced != 1 {
		t.Fatalf("merged %v, synced %d; want 1 and 1", got, h.r.synced)
	}
	h.r.synced = RegistrySyncedMax - 1 // as if peers had sent that many
	rep = h.mustReply(h.syncFrame(peer, entry("agent://b.local")+","+entry("agent://c.local"), regT0), regT0, protocol.TypeRegistryAck, protocol.StatusOK)
	if got := field(t, rep.Body, "merged"); got != 1.0 {
		t.Fatalf("merged = %v at the bound, want 1: the second new entry is left out", got)
	}
	if _, ok := h.r.Agent("agent://c.local"); ok {
		t.Fatal("a synced entry past RegistrySyncedMax was taken")
	}
	h.register("agent://d.local", 3600, regT0)
	h.register("agent://a.local", 3600, regT0) // was second-hand
	if d, ok := h.r.Agent("agent://a.local"); !ok || d.Source != SourceSelf || h.r.synced != RegistrySyncedMax-1 {
		t.Fatalf("after a's own registration: %+v, synced %d; want self and %d", d, h.r.synced, RegistrySyncedMax-1)
	}
}

// TestMentorsPages: the mentor directory comes in URI order, a page at a
// time, each page starting after the last URI of the one before.
func TestMentorsPages(t *testing.T) {
	h := newHarness(t)
	for _, n := range []string{"c", "a", "b"} {
		f := frame("agent://"+n+".local", testNode, protocol.TypeMentorRegister, `{"agent_name":"M","expertise":["nlp"],"available":true}`)
		h.mustReply(f, regT0, protocol.TypeAck, protocol.StatusOK)
	}
	uris := func(ms []MentorView) (out []string) {
		for _, m := range ms {
			out = append(out, m.AgentURI)
		}
		return out
	}
	tests := []struct {
		after string
		limit int
		want  string
	}{
		{"", 2, "[agent://a.local agent://b.local]"},
		{"agent://b.local", 2, "[agent://c.local]"},
		{"agent://c.local", 2, "[]"},
		{"", 0, "[agent://a.local agent://b.local agent://c.local]"}, // out of range: a full page
	}
	for _, tc := range tests {
		if got := fmt.Sprint(uris(h.r.MentorsPage(tc.after, tc.limit))); got != tc.want {
			t.Errorf("MentorsPage(%q, %d) = %s, want %s", tc.after, tc.limit, got, tc.want)
		}
	}
}

// FuzzFetchAfter: the "after" cursor of a registry.fetch is agent input.
// Whatever it holds, reading it does not panic, and a cursor this registry
// gave reads back as the URI it was made for.
func FuzzFetchAfter(f *testing.F) {
	f.Add([]byte(`{"mode":"full","after":"cjE6YWdlbnQ6Ly9hLmxvY2Fs"}`), "agent://a.local")
	f.Add([]byte(`{"after":123}`), "")
	f.Add([]byte(`{"after":"!!"}`), "agent://\u00e9.local")
	f.Fuzz(func(t *testing.T, body []byte, uri string) {
		fetchAfter(body)
		b, err := json.Marshal(map[string]string{"after": encodeCursor(uri)})
		if err != nil {
			t.Fatal(err)
		}
		got, err := fetchAfter(b)
		if err != nil || got != uri {
			t.Fatalf("fetchAfter(encodeCursor(%q)) = %q, %v", uri, got, err)
		}
	})
}

// TestOwnRegistrationDropsWhatAPeerSaid: a registry.sync from any peer
// without a key may name an agent this node does not know yet, with ttl 0
// and a status of its choosing. The agent's own registry.update, leaving
// ttl and status out, kept both: its registration was expired at once, and
// messages for it undeliverable (helper-56). The agent's word now starts
// from the defaults; only the agent_id a peer gave stays.
func TestOwnRegistrationDropsWhatAPeerSaid(t *testing.T) {
	const sink = "agent://sink.local"
	h := newHarness(t)
	h.mustReply(h.syncFrame(testPeer,
		fmt.Sprintf(`{"agent_id":"x-1","agent_uri":%q,"status":"GONE","last_seen":%q,"ttl":0}`, sink, ts(regT0)), regT0),
		regT0, protocol.TypeRegistryAck, protocol.StatusOK)
	at := regT0.Add(time.Second)
	rep := h.mustReply(frame(sink, testNode, protocol.TypeRegistryUpdate, `{"agent_name":"Sink","address":"127.0.0.1","port":7000}`),
		at, protocol.TypeRegistryAck, protocol.StatusOK)
	if ttl := field(t, rep.Body, "ttl"); ttl != float64(TTLDefault) {
		t.Errorf("registry.ack ttl = %v, want the default %d", ttl, TTLDefault)
	}
	if c, _ := h.r.Contact(sink, at.Add(time.Minute)); c != "127.0.0.1:7000" {
		t.Errorf("Contact a minute after the agent registered = %q, want its address", c)
	}
	if got := pageOf(h.r.Agents(AgentFilter{Limit: 10})); len(got) != 1 || got[0].Status != StatusReady || got[0].AgentID != "x-1" {
		t.Errorf("Agents = %+v; want the sink READY, with the agent_id the peer gave", got)
	}
	// A rebuild from the log reaches the same registry.
	if got, err := h.replay().Snapshot(); err != nil || !bytes.Equal(got, h.snapshot()) {
		t.Errorf("a replayed registry differs (%v)", err)
	}
}

// TestStatusKnown: a status is known when the registry gives it or an
// agent has it, ignoring case; otherwise the statuses in use come back,
// the most held first, at most StatusesShownMax of them.
func TestStatusKnown(t *testing.T) {
	h := newHarness(t)
	at := regT0
	for i := range StatusesShownMax + 3 {
		status := fmt.Sprintf("S%02d", i)
		if i < 2 {
			status = "BUSY" // two agents: the most held
		}
		body := fmt.Sprintf(`{"agent_name":"a%d","status":%q,"ttl":3600}`, i, status)
		h.mustReply(frame(fmt.Sprintf("agent://a%d.local", i), testNode, protocol.TypeRegistryUpdate, body), at, protocol.TypeRegistryAck, protocol.StatusOK)
	}
	for _, tt := range []struct {
		status string
		known  bool
	}{{"BUSY", true}, {"busy", true}, {"s07", true}, {"READY", true}, {"expired", true}, {"bogus", false}} {
		known, held := h.r.StatusKnown(tt.status)
		if known != tt.known || (known && held != nil) {
			t.Errorf("StatusKnown(%q) = %v, %v; want %v", tt.status, known, held, tt.known)
		}
	}
	_, held := h.r.StatusKnown("bogus")
	if len(held) != StatusesShownMax || held[0] != "BUSY" || held[1] != "S02" || held[StatusesShownMax-1] != "S32" {
		t.Errorf("StatusKnown(bogus) lists %v; want BUSY, then S02 to S32", held)
	}
	if _, held := newHarness(t).r.StatusKnown("bogus"); held == nil || len(held) != 0 {
		t.Errorf("StatusKnown on an empty registry lists %#v, want an empty list", held)
	}
}

// pageOf is an Agents page without where to go on.
func pageOf(page []AgentView, _ string) []AgentView { return page }

// TestAgentsLooksAtABoundedNumber: a filter that matches few agents looks
// at no more than AgentsScanMax of them for a page, and says where to go
// on; the pages together list every match (helper-88: half a second under
// the fold's read lock at a million agents).
func TestAgentsLooksAtABoundedNumber(t *testing.T) {
	h := newHarness(t)
	const n = AgentsScanMax + 500
	for i := range n {
		caps := `[]`
		if i%1000 == 999 {
			caps = `["rare"]`
		}
		h.r.Apply(h.event(frame(fmt.Sprintf("agent://n%06d.local", i), testNode, protocol.TypeRegistryUpdate,
			fmt.Sprintf(`{"agent_name":"N","capabilities":%s,"ttl":3600}`, caps)), regT0))
	}
	var all []AgentView
	after, pages := "", 0
	for {
		page, next := h.r.Agents(AgentFilter{Capability: "rare", After: after})
		all, pages = append(all, page...), pages+1
		if next == "" {
			break
		}
		after = next
	}
	if pages != 2 || len(all) != n/1000 {
		t.Fatalf("%d pages listing %d agents; want 2 pages and every one of the %d", pages, len(all), n/1000)
	}
}

// TestFetchLooksAtABoundedNumber: a registry.fetch page looks at no more
// than RegistryFetchScanMax agents, expired ones included, and says where
// to go on, with fewer entries or none; the pages together list every
// live entry in order. An anonymous fetch walked every expired entry on
// the fold, which every reply waits for (helper-98).
func TestFetchLooksAtABoundedNumber(t *testing.T) {
	for _, tc := range []struct {
		name       string
		mode       string
		wantPages  int
		firstEmpty bool
	}{
		{"full", "full", 2, true},
		{"update, past the change log", "update", 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			const expired, live = RegistryFetchScanMax + 500, 3
			for i := range expired {
				h.register(fmt.Sprintf("agent://a%06d.local", i), 1, regT0) // expires in a second
			}
			for i := range live {
				h.register(fmt.Sprintf("agent://z%d.local", i), 3600, regT0.Add(time.Hour))
			}
			var all []string
			after, pages := "", 0
			for {
				rep := h.mustReply(fetchFrame("agent://x.local", tc.mode, "2025-01-01T00:00:00Z", after), regT0.Add(time.Hour), protocol.TypeRegistryList, protocol.StatusOK)
				uris, next := listOf(t, rep)
				if pages == 0 && tc.firstEmpty && (len(uris) != 0 || next == "") {
					t.Fatalf("the first page looked past %d expired entries: %d entries, next %q", RegistryFetchScanMax, len(uris), next)
				}
				all, pages = append(all, uris...), pages+1
				if next == "" {
					break
				}
				if pages > 5 {
					t.Fatal("too many pages")
				}
				after = next
			}
			if pages != tc.wantPages || len(all) != live || all[0] != "agent://z0.local" {
				t.Fatalf("%d pages listing %v; want %d pages listing the %d live agents", pages, all, tc.wantPages, live)
			}
		})
	}
}
