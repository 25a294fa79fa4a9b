package projections

import (
	"cmp"
	"encoding/json"
	"slices"
	"strings"
	"time"
)

// The registry's read side: the queries the HTTP layer and the CLI serve,
// and the snapshot. All of it must be called under Runner.View, and all of
// it is a pure function of the events applied: statuses are computed
// against the registry's clock (Now), never the wall clock.

// AgentFilter selects agents for Agents. Empty fields match everything.
type AgentFilter struct {
	// Status matches the status shown (EXPIRED included), ignoring case.
	Status string
	// Capability matches one of the agent's capabilities exactly.
	Capability string
	// Zone matches agents with an active membership of the zone.
	Zone string
	// After starts the list after this URI, for paging.
	After string
	// Limit bounds the list; 0 or more than AgentsPageMax means
	// AgentsPageMax.
	Limit int
}

// AgentView is one agent as queries show it.
type AgentView struct {
	AgentURI     string    `json:"agent_uri"`
	AgentID      string    `json:"agent_id,omitempty"`
	Name         string    `json:"name,omitempty"`
	Type         string    `json:"type,omitempty"`
	Capabilities []string  `json:"capabilities,omitempty"`
	Address      string    `json:"address,omitempty"`
	Port         int64     `json:"port,omitempty"`
	Status       string    `json:"status,omitempty"` // EXPIRED, or the agent's own
	TTL          int64     `json:"ttl,omitempty"`    // seconds
	LastSeen     time.Time `json:"last_seen,omitzero"`
	Expires      time.Time `json:"expires,omitzero"` // last_seen + ttl
	Uptime       *int64    `json:"uptime,omitempty"`
	Source       string    `json:"source,omitempty"` // self or sync
	Via          string    `json:"via,omitempty"`
	RegisteredAt time.Time `json:"registered_at,omitzero"`
	Zones        []string  `json:"zones,omitempty"`
}

// AgentDetail is everything the registry knows of one URI.
type AgentDetail struct {
	AgentView
	// Registered is false for a URI known only by a key, a hint, a
	// sighting or the mentor directory.
	Registered bool           `json:"registered"`
	Keys       []KeyView      `json:"keys,omitempty"`
	History    []StatusChange `json:"history,omitempty"`
	Hint       *Hint          `json:"hint,omitempty"`
	Sighting   *Sighting      `json:"sighting,omitempty"`
	Mentor     *MentorView    `json:"mentor,omitempty"`
	// Reputation is the score zones admit by, from 0 to 1
	// (docs/REPUTATION.md).
	Reputation float64 `json:"reputation"`
}

// AgentsScanMax bounds the agents one Agents query looks at. A page is
// read under the fold's read lock, which holds up every reply, and a
// filter that matches few agents walked all of them, up to a million:
// half a second per anonymous request (helper-88). A query that stops
// there says where to go on (next), as /v1/handshakes does.
const AgentsScanMax = 10_000 // agents

// Agents lists registered agents, expired ones included (they show as
// EXPIRED), sorted by URI. It looks at no more than AgentsScanMax; when it
// stops there, next is the last URI it looked at, for f.After to go on
// from, else "".
func (r *Registry) Agents(f AgentFilter) (page []AgentView, next string) {
	limit := f.Limit
	if limit <= 0 || limit > AgentsPageMax {
		limit = AgentsPageMax
	}
	out := []AgentView{}
	scanned := 0
	r.sorted.after(f.After, func(uri string) bool {
		if scanned++; scanned > AgentsScanMax {
			return false
		}
		next = uri
		a := r.agents[uri]
		if f.Status != "" && !strings.EqualFold(a.statusAt(r.now), f.Status) {
			return true
		}
		if f.Capability != "" && !slices.Contains(a.Capabilities, f.Capability) {
			return true
		}
		zones := r.zonesOf(uri)
		if f.Zone != "" && !slices.Contains(zones, f.Zone) {
			return true
		}
		out = append(out, r.agentView(uri, a, zones))
		return len(out) < limit
	})
	if scanned <= AgentsScanMax {
		next = "" // the page filled, or the registry ended
	}
	return out, next
}

// StatusesShownMax bounds the statuses StatusKnown lists.
const StatusesShownMax = 32 // statuses

// StatusKnown says whether status is one the registry gives (READY,
// EXPIRED) or some agent has now, matched as AgentFilter.Status matches:
// ignoring case. When it is neither, held is the statuses the agents have
// now, as they wrote them, the most held first, at most
// StatusesShownMax. An agent's status is its own word (up to
// protocol.LabelSizeMax bytes), so there is no closed list of statuses to
// check a filter against: what the agents have is the best answer to a
// filter that matches none of them, a typo or a word nobody uses now.
// It walks every agent, so callers ask it only after an Agents query that
// matched none in a registry of at most AgentsScanMax agents.
func (r *Registry) StatusKnown(status string) (known bool, held []string) {
	if len(r.agents) > AgentsScanMax {
		return true, nil // too many to walk: say nothing
	}
	if strings.EqualFold(status, StatusReady) || strings.EqualFold(status, StatusExpired) {
		return true, nil
	}
	count := map[string]int{}
	for _, a := range r.agents {
		s := a.statusAt(r.now)
		if strings.EqualFold(s, status) {
			return true, nil
		}
		count[s]++
	}
	held = make([]string, 0, len(count)) // [], not null, for no agent at all
	for s := range count {
		held = append(held, s)
	}
	slices.SortFunc(held, func(a, b string) int {
		if c := cmp.Compare(count[b], count[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	return false, held[:min(len(held), StatusesShownMax)]
}

func (r *Registry) agentView(uri string, a *agentEntry, zones []string) AgentView {
	v := AgentView{AgentURI: uri, AgentID: a.AgentID, Name: a.Name, Type: a.Type, Capabilities: slices.Clone(a.Capabilities),
		Address: a.Address, Port: a.Port, Status: a.statusAt(r.now), TTL: a.TTL, LastSeen: a.LastSeen, Expires: a.expiresAt(),
		Source: a.Source, Via: a.Via, RegisteredAt: a.RegisteredAt, Zones: zones}
	if a.Uptime != nil {
		u := *a.Uptime
		v.Uptime = &u
	}
	return v
}

// Agent returns what the registry knows of uri: its entry, keys (oldest
// first), zones, status history (with an expiry no event has marked yet),
// and any hint, sighting or mentor entry.
func (r *Registry) Agent(uri string) (AgentDetail, bool) {
	d := AgentDetail{AgentView: AgentView{AgentURI: uri}, Keys: r.keyViews(uri), Reputation: r.reputationOf(uri)}
	if a := r.agents[uri]; a != nil {
		d.Registered = true
		d.AgentView = r.agentView(uri, a, r.zonesOf(uri))
		d.History = slices.Clone(a.History)
		if n := len(d.History); a.expired(r.now) && (n == 0 || d.History[n-1].Status != StatusExpired) {
			d.History = append(d.History, StatusChange{At: a.expiresAt(), Status: StatusExpired, Cause: "ttl"})
		}
	}
	if h, ok := r.hints.get(uri); ok {
		d.Hint = &h
	}
	if s, ok := r.sightings.get(uri); ok {
		d.Sighting = &s
	}
	if m := r.mentors[uri]; m != nil {
		v := r.mentorView(uri, m)
		d.Mentor = &v
	}
	found := d.Registered || d.Keys != nil || d.Hint != nil || d.Sighting != nil || d.Mentor != nil
	return d, found
}

// registrySnapshot is the registry's whole state, keyed by URI or id so
// that encoding/json writes it sorted. It holds no zone secret and no
// session token (a member's join event id, from which the token is
// derived under the TokenKey, is no secret), and not the clock: the clock
// is the receive time of the last event, which every event moves, and
// leaving it out lets a test show that a refused event changed nothing.
type registrySnapshot struct {
	Agents    map[string]*agentEntry  `json:"agents"`
	Keys      map[string][]*keyRecord `json:"keys"`
	Zones     map[string]zoneSnapshot `json:"zones"`
	Mentors   map[string]*mentor      `json:"mentors"`
	Hints     map[string]Hint         `json:"hints"`
	Sightings map[string]Sighting     `json:"sightings"`
	Answered  map[string]seenOutcome  `json:"answered"`
	Joins     map[string]seenOutcome  `json:"joins_answered"`
	// JoinsFull is, by zone, the latest timestamp of a join the zone
	// refused for a full memory (joinsFull); left out when there is none,
	// as there was none before it.
	JoinsFull map[string]time.Time `json:"joins_full,omitempty"`
	// NodeKeys is the node's own key history once it has rotated its key;
	// left out before, when it holds only the first key, which is
	// configuration (and was not in a snapshot before rotations were).
	NodeKeys []*keyRecord `json:"node_keys,omitempty"`
}

type zoneSnapshot struct {
	Role          string                 `json:"role"`
	MinReputation float64                `json:"min_reputation"`
	Members       map[string]*zoneMember `json:"members"`
}

// SnapshotEntries is about how many entries Snapshot writes, so that a
// caller under the folds' lock can tell a snapshot too large to make
// there before it makes it (the last-stop record in aglxd).
func (r *Registry) SnapshotEntries() int {
	n := len(r.agents) + len(r.keys) + len(r.nodeKeys.keys) + len(r.mentors) + r.hints.len() + r.sightings.len() + r.seen.len() + len(r.joinsFull)
	for _, z := range r.zones {
		n += len(z.members)
	}
	for _, j := range r.joins {
		n += j.len()
	}
	return n
}

// Snapshot implements Snapshotter: the state as canonical JSON (members
// and map keys sorted), identical for identical state.
func (r *Registry) Snapshot() ([]byte, error) {
	s := registrySnapshot{
		Agents:    r.agents,
		Keys:      make(map[string][]*keyRecord, len(r.keys)),
		Zones:     make(map[string]zoneSnapshot, len(r.zones)),
		Mentors:   r.mentors,
		Hints:     r.hints.all(),
		Sightings: r.sightings.all(),
		Answered:  r.seen.all(),
		Joins:     r.allJoins(),
		JoinsFull: r.joinsFull,
	}
	for uri, kr := range r.keys {
		s.Keys[uri] = kr.keys
	}
	if len(r.nodeKeys.keys) > 1 || r.nodeKeys.keys[0].BoundBy != nodeKeyConfigured {
		s.NodeKeys = r.nodeKeys.keys
	}
	for id, z := range r.zones {
		s.Zones[id] = zoneSnapshot{Role: z.cfg.Role, MinReputation: z.cfg.MinReputation, Members: z.members}
	}
	return json.Marshal(s)
}
