package projections

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/aglx/ledger/protocol"
)

// Bounds and defaults of the registry's entries.
const (
	// RegistryListMax is the most entries one registry.list carries; a
	// longer answer ends with a "next" cursor to pass back as "after".
	RegistryListMax = 100 // entries
	// RegistryAgentsMax bounds the agents the registry knows. Entries are
	// history and are never evicted; past the bound new ones are refused.
	RegistryAgentsMax = 1 << 20 // agents
	// RegistryKeysMax bounds the agents with a bound key. auth.request
	// binds a key for any URI, with no entry needed, so without a bound
	// one key pair could be bound under URIs without end; past it a first
	// key is refused with 503, as a registration past RegistryAgentsMax is.
	RegistryKeysMax = RegistryAgentsMax // agents
	// RegistrySyncedMax bounds the agents known only from peer registries
	// (registry.sync, which an unsigned registry:// sender may send), so
	// that peers cannot fill the registry and leave agents that register
	// themselves a 503: half of RegistryAgentsMax is always theirs.
	RegistrySyncedMax = RegistryAgentsMax / 2 // agents
	// TTLDefault is the ttl of an entry that never stated one (seconds).
	TTLDefault = 3600
	// StatusHistoryMax bounds the status changes kept per agent.
	StatusHistoryMax = 32 // changes
	// HintsMax and SightingsMax bound what is kept of agents the registry
	// has only heard of; the oldest go first.
	HintsMax     = 1 << 16 // agents
	SightingsMax = 1 << 16 // agents
	// AgentsPageMax bounds one Agents query.
	AgentsPageMax = 1000 // agents
)

// Statuses the registry itself gives. Others are the agent's own words
// ("READY", "IDLE", "BUSY").
const (
	StatusReady   = "READY"   // an agent that registered without one
	StatusExpired = "EXPIRED" // last_seen + ttl has passed, in event time
)

// Where an entry came from.
const (
	SourceSelf = "self" // the agent told this node (registry.update)
	SourceSync = "sync" // a peer registry did (registry.sync)
)

// FetchModeFull asks registry.fetch for every live entry. protocol refuses
// it today (only "update" validates); the fold answers it should it come.
const FetchModeFull = "full"

// agentEntry is one agent the registry knows: its facts, not views. The
// status shown (EXPIRED or the agent's own) is computed from them against
// the registry's clock.
type agentEntry struct {
	AgentID      string         `json:"agent_id"`
	Name         string         `json:"name,omitempty"`
	Type         string         `json:"type,omitempty"`
	Capabilities []string       `json:"capabilities,omitempty"`
	Address      string         `json:"address,omitempty"`
	Port         int64          `json:"port,omitempty"`
	Status       string         `json:"status"`
	TTL          int64          `json:"ttl"` // seconds
	LastSeen     time.Time      `json:"last_seen"`
	Uptime       *int64         `json:"uptime,omitempty"` // seconds, from agent.announce
	Source       string         `json:"source"`
	Via          string         `json:"via,omitempty"` // the registry a second-hand entry came from
	RegisteredAt time.Time      `json:"registered_at"`
	ChangedAt    time.Time      `json:"changed_at"`
	ChangedSeq   uint64         `json:"changed_seq"`
	History      []StatusChange `json:"history"`
}

// StatusChange is one step of an agent's status history.
type StatusChange struct {
	At     time.Time `json:"at"`
	Status string    `json:"status"`
	// Cause is the TYPE of the event that set the status, or "ttl" for an
	// expiry, which no event marks: it is written when the next event about
	// the agent arrives, at the instant the entry expired.
	Cause string `json:"cause"`
	Seq   uint64 `json:"seq,omitempty"`
}

func (a *agentEntry) expiresAt() time.Time {
	return a.LastSeen.Add(time.Duration(a.TTL) * time.Second)
}

func (a *agentEntry) expired(now time.Time) bool { return !now.Before(a.expiresAt()) }

func (a *agentEntry) statusAt(now time.Time) string {
	if a.expired(now) {
		return StatusExpired
	}
	return a.Status
}

// record appends a status change, unless the status is what it was.
func (a *agentEntry) record(c StatusChange) {
	if n := len(a.History); n > 0 && a.History[n-1].Status == c.Status {
		return
	}
	a.History = append(a.History, c)
	if len(a.History) > StatusHistoryMax {
		a.History = append(a.History[:0:0], a.History[len(a.History)-StatusHistoryMax:]...)
	}
}

// noteExpiry writes the expiry an entry went through before it is refreshed
// at now.
func (a *agentEntry) noteExpiry(now time.Time) {
	if a.expired(now) {
		a.record(StatusChange{At: a.expiresAt(), Status: StatusExpired, Cause: "ttl"})
	}
}

// agentID derives a new agent's id from the event that registered it: the
// SHA-256 of the event id, laid out as an RFC 9562 version 8 (custom) UUID.
// The same log gives the same ids on every replay.
func agentID(eventID string) string {
	sum := sha256.Sum256([]byte("aglx-agent-id\n" + eventID))
	b := sum[:16]
	b[6] = b[6]&0x0f | 0x80 // version 8
	b[8] = b[8]&0x3f | 0x80 // variant 10
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// newEntry adds an agent, or returns nil when the registry is full.
func (r *Registry) newEntry(uri, id string) *agentEntry {
	if len(r.agents) >= RegistryAgentsMax {
		return nil
	}
	a := &agentEntry{AgentID: id, RegisteredAt: r.now, TTL: TTLDefault}
	r.agents[uri] = a
	r.sorted.insert(uri)
	return a
}

// registryAckBody is the body of registry.ack.
type registryAckBody struct {
	AgentID   string `json:"agent_id,omitempty"`
	TTL       *int64 `json:"ttl,omitempty"`
	Timestamp string `json:"timestamp"`
	Merged    *int   `json:"merged,omitempty"` // entries a registry.sync changed
}

// update upserts the sender's own entry. The agent's word overrides any
// second-hand entry: what a peer said of it is dropped, all but its
// agent_id, once given (here or by a peer registry), which stays. Fields
// the agent leaves out keep the values it gave before, or the defaults.
func (r *Registry) update(e *Event, p *protocol.RegistryUpdate) {
	if r.refuseInauthentic(e) {
		return
	}
	a := r.agents[e.From]
	if a == nil {
		if a = r.newEntry(e.From, agentID(e.ID)); a == nil {
			r.refuse(e, protocol.StatusUnavailable, fmt.Sprintf("the registry holds %d agents, its limit", RegistryAgentsMax))
			return
		}
	} else {
		a.noteExpiry(r.now)
		if a.Source == SourceSync {
			// The agent's own word now. A peer's ttl or status left in
			// place was the agent's until it said otherwise: anyone can
			// send registry.sync as a peer without a key, and one that
			// named an agent with ttl 0 before it registered left its
			// own registration expired at once, undeliverable
			// (helper-56).
			r.synced--
			// Its uptime came from its own agent.announce: kept.
			*a = agentEntry{AgentID: a.AgentID, RegisteredAt: r.now, TTL: TTLDefault, History: a.History, Uptime: a.Uptime}
		}
	}
	a.Source, a.Via = SourceSelf, ""
	a.Name = p.AgentName
	if p.AgentType != "" {
		a.Type = p.AgentType
	}
	if p.Capabilities != nil {
		a.Capabilities = slices.Clone(p.Capabilities)
	}
	if p.Address != "" {
		a.Address = p.Address
	}
	if p.Port != nil {
		a.Port = *p.Port
	}
	switch {
	case p.Status != "":
		a.Status = p.Status
	case a.Status == "":
		a.Status = StatusReady
	}
	if p.TTL != nil {
		a.TTL = *p.TTL
	}
	a.LastSeen, a.ChangedAt, a.ChangedSeq = r.now, r.now, e.Seq
	r.changes.add(r.now, e.Seq, e.From, r.agents)
	a.record(StatusChange{At: r.now, Status: a.Status, Cause: e.Type, Seq: e.Seq})
	ttl := a.TTL
	r.reply(e, protocol.TypeRegistryAck, protocol.StatusOK, registryAckBody{AgentID: a.AgentID, TTL: &ttl, Timestamp: rfc3339(r.now)})
}

// listEntry is one entry of registry.list.
type listEntry struct {
	AgentID  string `json:"agent_id"`
	AgentURI string `json:"agent_uri"`
	Status   string `json:"status"`
	LastSeen string `json:"last_seen"`
}

// registryListBody is the body of registry.list. Timestamp is the event
// time of the fetch: a client that passes it as the next "since" misses
// nothing, since "since" is inclusive.
type registryListBody struct {
	Entries   []listEntry `json:"entries"`
	Next      string      `json:"next,omitempty"`
	Timestamp string      `json:"timestamp"`
}

// cursorPrefix versions the cursor's form, so a later one can differ.
const cursorPrefix = "r1:"

func encodeCursor(uri string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorPrefix + uri))
}

// fetchAfter reads the optional "after" member of a registry.fetch (an extra
// member, which protocol's payload does not define) and returns the URI
// the page starts after.
func fetchAfter(body []byte) (string, error) {
	raw, ok := bodyMember(body, "after")
	if !ok {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		b, err := base64.RawURLEncoding.DecodeString(s)
		if uri, ok := strings.CutPrefix(string(b), cursorPrefix); err == nil && ok {
			return uri, nil
		}
	}
	return "", protocol.Errorf(protocol.StatusBadRequest, "field %q is not a cursor this registry gave; pass back the \"next\" of a registry.list", "after")
}

// fetch answers registry.fetch with the live entries changed at or after
// "since" (mode "update"), or all of them (mode "full", or no since), in
// order of URI, at most RegistryListMax per page.
func (r *Registry) fetch(e *Event, p *protocol.RegistryFetch) {
	after, err := fetchAfter(e.Body)
	if err != nil {
		r.refuse(e, protocol.StatusBadRequest, sigReason(err))
		return
	}
	full := p.Mode == FetchModeFull || p.Since.IsZero()
	body := registryListBody{Entries: []listEntry{}, Timestamp: rfc3339(r.now)}
	if !full {
		if changed := r.changes.since(p.Since.Time); useChangeLog(len(changed), len(r.agents)) {
			r.fetchChanged(&body, changed, after)
			r.reply(e, protocol.TypeRegistryList, protocol.StatusOK, body)
			return
		}
	}
	r.fetchWalk(&body, full, p.Since.Time, after)
	r.reply(e, protocol.TypeRegistryList, protocol.StatusOK, body)
}

// RegistryFetchScanMax bounds the agents one registry.fetch page looks
// at. The walk skips expired entries, which are never let go, and those
// unchanged since the fetch's T; it runs on the fold, which every reply
// waits for, and an anonymous fetch walked up to a million of them, some
// 5 ms at 50,000 expired entries and 100 ms at a million (helper-98). A
// page that stops here carries "next", the last URI it looked at, with
// fewer than RegistryListMax entries or none: a client goes on while
// there is a "next", as with any page.
const RegistryFetchScanMax = AgentsScanMax // agents

// fetchWalk fills a page of registry.list by walking the agents in order
// of URI from the cursor: every live entry in full mode, those changed at
// or after since otherwise, looking at no more than RegistryFetchScanMax.
func (r *Registry) fetchWalk(body *registryListBody, full bool, since time.Time, after string) {
	scanned := 0
	r.sorted.after(after, func(uri string) bool {
		if scanned == RegistryFetchScanMax {
			body.Next = encodeCursor(after)
			return false
		}
		scanned++
		after = uri // the last looked at
		a := r.agents[uri]
		if a.expired(r.now) || (!full && a.ChangedAt.Before(since)) {
			return true
		}
		if len(body.Entries) == RegistryListMax {
			body.Next = encodeCursor(body.Entries[len(body.Entries)-1].AgentURI)
			return false
		}
		body.Entries = append(body.Entries, listEntry{a.AgentID, uri, a.Status, rfc3339(a.LastSeen)})
		return true
	})
}

// fetchChanged fills a page of an update-mode registry.list from the
// changes since the fetch's T, with the same entries, order and cursor as
// the walk over all agents in fetch: live entries not expired, after the
// cursor, by URI, RegistryListMax of them, and a cursor when more follow.
func (r *Registry) fetchChanged(body *registryListBody, changed []changeEntry, after string) {
	// An agent with an entry here changed at or after T, and so did its
	// last change, since the fold's clock never goes back: a stale entry
	// names an agent the walk would list too. seen lists each agent once.
	var uris []string
	seen := make(map[string]bool, len(changed))
	for _, c := range changed {
		if seen[c.uri] || c.uri <= after || r.agents[c.uri].expired(r.now) {
			continue
		}
		seen[c.uri] = true
		uris = append(uris, c.uri)
	}
	slices.Sort(uris)
	if len(uris) > RegistryListMax {
		uris = uris[:RegistryListMax]
		body.Next = encodeCursor(uris[len(uris)-1])
	}
	for _, uri := range uris {
		a := r.agents[uri]
		body.Entries = append(body.Entries, listEntry{a.AgentID, uri, a.Status, rfc3339(a.LastSeen)})
	}
}

// sync merges a peer registry's entries. The rule, per entry: what an agent
// told this node itself is never overwritten; otherwise the entry with the
// later last_seen wins, and on a tie the higher agent_id, so that two
// registries exchanging the same entries agree whatever the order, and an
// entry that changes nothing is not counted as changed (which ends echoes).
// A last_seen that is absent (the reference's example carries none) or
// later than this node's clock counts as this node's clock: a peer cannot
// make an entry look fresher than now.
func (r *Registry) sync(e *Event, p *protocol.RegistrySync) {
	switch {
	case !strings.HasPrefix(e.From, protocol.SchemeRegistry+"://"):
		r.refuse(e, protocol.StatusForbidden, "registry.sync is accepted only from a registry (registry://NAME)")
		return
	case e.From == r.node:
		r.refuse(e, protocol.StatusForbidden, "a registry does not sync with itself")
		return
	case !r.syncFrom[e.From]:
		if _, ok := r.unnamedSyncs[e.From]; ok || len(r.unnamedSyncs) < UnnamedSyncPeersMax {
			r.unnamedSyncs[e.From]++
		}
		r.refuse(e, protocol.StatusForbidden, fmt.Sprintf(
			"this node takes registry.sync only from the peers its operator names (aglxd --sync-from); %s is not one", e.From))
		return
	case r.last.v.Auth == AuthInvalid:
		r.refuse(e, protocol.StatusUnauthorized, r.last.v.Reason)
		return
	case r.last.v.Auth != AuthValid:
		// Until 2026-12-01 a peer without a bound key was taken at its
		// word: anyone could send a registry.sync as any registry://
		// name, expire or invent entries, fill every synced slot, and
		// have the node sign them on to its own peers (helper-68).
		r.refuse(e, protocol.StatusUnauthorized, fmt.Sprintf(
			"a registry.sync must be signed with a key bound to %s: its operator binds the peer's node key here first, with an auth.request over TLS signed with it (docs/OPERATIONS.md, \"Federation\")", e.From))
		return
	}
	if reason := r.signedOutOfOrder(e); reason != "" {
		// A copy of an older sync, resent within its window by whoever
		// held it (a reader of the log, anyone on the path of a plain
		// push), put back what the peer had since changed, and the node
		// sent it on (helper-97).
		r.refuse(e, protocol.StatusConflict, reason)
		return
	}
	merged := 0
	for i := range p.Entries {
		if r.merge(e, &p.Entries[i]) {
			merged++
		}
	}
	r.reply(e, protocol.TypeRegistryAck, protocol.StatusOK, registryAckBody{Timestamp: rfc3339(r.now), Merged: &merged})
}

// merge applies one synced entry and reports whether it changed anything.
func (r *Registry) merge(e *Event, in *protocol.RegistryEntry) bool {
	uri := in.AgentURI.String()
	if uri == r.node {
		return false
	}
	seen := in.LastSeen.Time.UTC()
	if in.LastSeen.IsZero() || seen.After(r.now) {
		seen = r.now
	}
	a := r.agents[uri]
	if a != nil {
		newer := seen.After(a.LastSeen) || (seen.Equal(a.LastSeen) && in.AgentID > a.AgentID)
		if a.Source == SourceSelf || !newer {
			return false
		}
		a.noteExpiry(r.now)
	} else if r.synced >= RegistrySyncedMax {
		return false
	} else if a = r.newEntry(uri, in.AgentID); a == nil {
		return false
	} else {
		r.synced++
	}
	a.AgentID, a.Source, a.Via = in.AgentID, SourceSync, e.From
	if in.Status != "" {
		a.Status = in.Status
	} else if a.Status == "" {
		a.Status = StatusReady
	}
	a.TTL = TTLDefault
	if in.TTL != nil {
		a.TTL = *in.TTL
	}
	a.LastSeen, a.ChangedAt, a.ChangedSeq = seen, r.now, e.Seq
	r.changes.add(r.now, e.Seq, uri, r.agents)
	a.record(StatusChange{At: r.now, Status: a.Status, Cause: e.Type, Seq: e.Seq})
	return true
}

// SyncEntry is one entry a federation pusher sends in a registry.sync.
type SyncEntry = protocol.RegistryEntry

// Changed returns the entries changed by events after sinceSeq, first-hand
// and second-hand alike (so that entries travel along a chain of
// registries), ordered by the sequence that changed them and then by URI.
// A pusher remembers the applied sequence it read them at (Runner.View
// gives it) and passes it next time; it splits a long answer into
// registry.sync messages that fit the peer's body limit. Call it under
// Runner.View.
func (r *Registry) Changed(sinceSeq uint64) []SyncEntry {
	out, _ := r.ChangedPage(sinceSeq, 0)
	return out
}

// ChangedPage is Changed, a page at a time: it stops at the end of the
// first event whose entries bring the page to max or more (0: no bound),
// and then returns the sequence of that event as through, from which the
// next page goes on; through is 0 when the page took every change. A
// pusher reads its pages under Runner.View, one View each, so that the
// fold, and every reply waiting on it, is held up for one page at a time:
// the first push after a start reads the whole registry, and a
// million entries read under one View held every reply for as long
// (helper-98).
func (r *Registry) ChangedPage(sinceSeq uint64, max int) (out []SyncEntry, through uint64) {
	// Read from the change log, which is in the order of the events
	// that made the changes, not by walking every agent: a push walked
	// and sorted the whole registry under the fold's lock, every
	// interval and for every peer (helper-75).
	es := r.changes.entries
	i := sort.Search(len(es), func(i int) bool { return es[i].seq > sinceSeq })
	var run []string // the URIs one event changed, in URI order
	for i < len(es) {
		if max > 0 && len(out) >= max {
			return out, es[i-1].seq
		}
		seq := es[i].seq
		run = run[:0]
		for ; i < len(es) && es[i].seq == seq; i++ {
			if a := r.agents[es[i].uri]; a != nil && a.ChangedSeq == seq { // live: not changed again since
				run = append(run, es[i].uri)
			}
		}
		slices.Sort(run)
		run = slices.Compact(run) // a sync may name one agent twice
		for _, uri := range run {
			if e, ok := r.syncEntry(uri); ok {
				out = append(out, e)
			}
		}
	}
	return out, 0
}

// syncEntry is the agent at uri as a pusher sends it; ok is false for an
// entry whose URI does not parse, which no peer could take. The node keys
// an entry by the envelope's FROM, which it writes from the parsed
// message, but a log read as found can hold another writer's envelope,
// and one whose FROM was no URI panicked here, in every push to a peer
// (helper-124).
func (r *Registry) syncEntry(uri string) (SyncEntry, bool) {
	a := r.agents[uri]
	u, err := protocol.ParseURI(uri)
	if err != nil {
		return SyncEntry{}, false
	}
	ttl := a.TTL
	return SyncEntry{AgentID: a.AgentID, AgentURI: u, Status: a.Status, LastSeen: protocol.Timestamp{Time: a.LastSeen}, TTL: &ttl}, true
}

// Hint is what an agent said of another in a registry.exchange. Hints are
// never entries: nobody vouched for them but a peer.
type Hint struct {
	Status     string    `json:"status,omitempty"`
	ReportedBy string    `json:"reported_by"`
	At         time.Time `json:"at"`
	Seq        uint64    `json:"seq"`
}

// exchange keeps an exchange's known_agents as hints, the latest per agent.
func (r *Registry) exchange(e *Event, p *protocol.RegistryExchange, toNode bool) {
	if v := r.last.v; v.Auth == AuthInvalid {
		if toNode {
			r.refuse(e, protocol.StatusUnauthorized, v.Reason)
		}
		return
	}
	for _, k := range p.KnownAgents {
		r.hints.put(k.AgentURI.String(), Hint{Status: k.Status, ReportedBy: e.From, At: r.now, Seq: e.Seq})
	}
	if toNode {
		r.reply(e, protocol.TypeRegistryAck, protocol.StatusOK, registryAckBody{Timestamp: rfc3339(r.now)})
	}
}

// Sighting is an agent.announce from an agent with no entry: where it was
// heard from and what it said.
type Sighting struct {
	Name      string    `json:"name"`
	Type      string    `json:"type,omitempty"`
	Uptime    *int64    `json:"uptime,omitempty"`
	Peer      string    `json:"peer"`
	Transport string    `json:"transport"`
	At        time.Time `json:"at"`
	Seq       uint64    `json:"seq"`
}

// announce refreshes a known agent's last_seen and uptime, reviving an
// expired entry, or records a sighting of an unknown one heard from a known
// address. It is never answered.
func (r *Registry) announce(e *Event, p *protocol.AgentAnnounce) {
	if r.last.v.Auth == AuthInvalid {
		return
	}
	if r.last.v.Auth == AuthValid && r.signedOutOfOrder(e) != "" {
		// A copy of an older signed announce (a datagram anyone on the
		// path may keep) brought back an entry that had expired
		// (helper-97). Announces are never answered.
		return
	}
	var uptime *int64
	if p.Uptime != nil {
		u := *p.Uptime
		uptime = &u
	}
	if a := r.agents[e.From]; a != nil {
		a.noteExpiry(r.now)
		a.LastSeen, a.Uptime, a.ChangedAt, a.ChangedSeq = r.now, uptime, r.now, e.Seq
		r.changes.add(r.now, e.Seq, e.From, r.agents)
		a.record(StatusChange{At: r.now, Status: a.Status, Cause: e.Type, Seq: e.Seq})
		return
	}
	if e.Peer != "" {
		r.sightings.put(e.From, Sighting{Name: p.AgentName, Type: p.AgentType, Uptime: uptime, Peer: e.Peer, Transport: e.Transport, At: r.now, Seq: e.Seq})
	}
}
