package projections

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aglx/ledger/protocol"
)

// Zones: groups an agent enters with zone.join, proving it knows the zone's
// shared secret (an hmac-sha256 signature), being registered and live, and
// having enough reputation. A member gets a session token derived from the
// node's TokenKey, so that a replay derives it again and nothing stores it.

// Zone defaults, as in the reference's zone.deny ("Reputation below
// required threshold (0.6)") and zone.confirm ("role": "member").
const (
	ZoneMinReputationDefault = 0.6
	ZoneRoleDefault          = "member"
)

// ZonesMax bounds the zones of one zone file.
const ZonesMax = 1024 // zones

// ZoneSessionDuration is how long a zone.confirm's session lasts; the
// reference's example confirms a join until about a month later.
const ZoneSessionDuration = 30 * 24 * time.Hour

// zoneFileSizeMax bounds a zone file.
const zoneFileSizeMax = 1 << 20 // bytes

// Zone is one zone of the zone file.
type Zone struct {
	ID string
	// Secret is the shared secret zone.join is signed with. It lives only
	// in the configuration: never in state, a snapshot or a reply.
	Secret []byte
	// MinReputation is the lowest reputation admitted, from 0 to 1.
	// ParseZones makes an absent one ZoneMinReputationDefault; a Zone
	// built in Go is taken as it is.
	MinReputation float64
	// Role is what a member becomes; "" means ZoneRoleDefault.
	Role string
}

// zoneFile is the zone file's form:
//
//	{"zones": [{"id": "research-hub", "secret": "hex digits, or base64:...",
//	            "min_reputation": 0.6, "role": "member"}]}
type zoneFile struct {
	Zones []struct {
		ID            string   `json:"id"`
		Secret        string   `json:"secret"`
		MinReputation *float64 `json:"min_reputation"`
		Role          string   `json:"role"`
	} `json:"zones"`
}

// ParseZones reads a zone file (JSON; the standard library reads no YAML and
// the project takes no dependency for it). A secret is written as hex, or as
// standard base64 after "base64:"; the prefix keeps the two apart, since a
// hex string is valid base64 too. Each secret must hold at least
// protocol.HMACSecretSizeMin bytes, ids must be unique, min_reputation from
// 0 to 1 (absent: 0.6), and unknown members are refused, so that a
// misspelt "min_reputation" does not silently admit everyone.
func ParseZones(b []byte) ([]Zone, error) {
	if len(b) > zoneFileSizeMax {
		return nil, fmt.Errorf("zones: the file is larger than %d bytes", zoneFileSizeMax)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var f zoneFile
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("zones: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("zones: the file holds more than one JSON value")
	}
	zones := make([]Zone, 0, len(f.Zones))
	for i, z := range f.Zones {
		secret, err := parseSecret(z.Secret)
		if err != nil {
			return nil, fmt.Errorf("zones: zone %d (%q): %w", i, z.ID, err)
		}
		minRep := ZoneMinReputationDefault
		if z.MinReputation != nil {
			minRep = *z.MinReputation
		}
		zones = append(zones, Zone{ID: z.ID, Secret: secret, MinReputation: minRep, Role: z.Role})
	}
	if err := checkZones(zones); err != nil {
		return nil, fmt.Errorf("zones: %w", err)
	}
	return zones, nil
}

func parseSecret(s string) ([]byte, error) {
	if rest, ok := strings.CutPrefix(s, "base64:"); ok {
		b, err := base64.StdEncoding.DecodeString(rest)
		if err != nil {
			return nil, errors.New("the secret after \"base64:\" is not standard base64")
		}
		return b, nil
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		return nil, errors.New("the secret must be hex digits, or standard base64 after \"base64:\"")
	}
	return b, nil
}

// checkZones validates zones however they were made.
func checkZones(zones []Zone) error {
	if len(zones) > ZonesMax {
		return fmt.Errorf("%d zones; at most %d are allowed", len(zones), ZonesMax)
	}
	ids := map[string]bool{}
	for _, z := range zones {
		switch {
		case z.ID == "" || len(z.ID) > protocol.IDSizeMax || strings.ContainsFunc(z.ID, func(c rune) bool { return c <= ' ' || c >= 0x7f }):
			return fmt.Errorf("zone id %q must be 1 to %d visible ASCII characters", z.ID, protocol.IDSizeMax)
		case ids[z.ID]:
			return fmt.Errorf("zone id %q appears twice", z.ID)
		case len(z.Secret) < protocol.HMACSecretSizeMin:
			return fmt.Errorf("zone %q: the secret has %d bytes; at least %d are required", z.ID, len(z.Secret), protocol.HMACSecretSizeMin)
		case !(z.MinReputation >= 0 && z.MinReputation <= 1):
			return fmt.Errorf("zone %q: min_reputation must be from 0 to 1", z.ID)
		}
		ids[z.ID] = true
	}
	return nil
}

// zoneState is a zone's configuration and its members.
type zoneState struct {
	cfg     Zone
	members map[string]*zoneMember
	// listed holds the members' URIs, in order, for ZonePage: a page
	// sorted all members on the fold's lock, up to 2^20 of them, to return
	// a thousand (helper-75). It holds exactly the keys of members, so a
	// page walks no more members than it returns. Until
	// 2026-12-01 a member who left stayed listed and was skipped, and a
	// page walked every agent that had ever left the zone, under the
	// fold's read lock, which holds up every reply (helper-98).
	listed uriSet
}

// zoneMember is one agent in a zone. JoinEvent is kept because the
// session token is derived from it; the token itself is not kept.
type zoneMember struct {
	Role         string    `json:"role"`
	JoinedAt     time.Time `json:"joined_at"`
	JoinSeq      uint64    `json:"join_seq"`
	JoinEvent    string    `json:"join_event"`
	Expires      time.Time `json:"expires"`
	Capabilities []string  `json:"capabilities,omitempty"`
	// JoinStamp is the join's own timestamp, the agent's clock: a signed
	// zone.leave stamped before it was made for an earlier membership.
	JoinStamp time.Time `json:"join_stamp,omitzero"`
}

func newZoneStates(zones []Zone) (map[string]*zoneState, []string) {
	m := make(map[string]*zoneState, len(zones))
	ids := make([]string, 0, len(zones))
	for _, z := range zones {
		if z.Role == "" {
			z.Role = ZoneRoleDefault
		}
		z.Secret = slices.Clone(z.Secret)
		m[z.ID] = &zoneState{cfg: z, members: map[string]*zoneMember{}}
		ids = append(ids, z.ID)
	}
	slices.Sort(ids)
	return m, ids
}

// sessionTokenPrefix marks a zone session token and versions its
// derivation.
const sessionTokenPrefix = "ZT-"

// sessionToken derives a member's token: an HMAC under the node's TokenKey
// of the zone, the agent and the join's event id. The same join gives the
// same token on every replay, and no one without the TokenKey can make or
// guess one, so the token never needs to be stored.
func (r *Registry) sessionToken(zoneID, agent, eventID string) string {
	m := hmac.New(sha256.New, r.cfg.TokenKey)
	m.Write([]byte("aglx-zone-session-1\n" + zoneID + "\n" + agent + "\n" + eventID))
	return sessionTokenPrefix + hex.EncodeToString(m.Sum(nil))
}

// ValidSession reports whether token is the session token of agent's
// current, unexpired membership of zoneID. Call it under Runner.View.
func (r *Registry) ValidSession(zoneID, agent, token string) bool {
	z := r.zones[zoneID]
	if z == nil {
		return false
	}
	m := z.members[agent]
	if m == nil || !r.now.Before(m.Expires) {
		return false
	}
	return hmac.Equal([]byte(token), []byte(r.sessionToken(zoneID, agent, m.JoinEvent)))
}

// zoneConfirmBody and zoneDenyBody are the bodies of zone.confirm and
// zone.deny.
type zoneConfirmBody struct {
	ZoneID       string `json:"zone_id"`
	SessionToken string `json:"session_token"`
	Role         string `json:"role"`
	Expires      string `json:"expires"`
}

type zoneDenyBody struct {
	ZoneID    string `json:"zone_id"`
	Reason    string `json:"reason"`
	Timestamp string `json:"timestamp"`
}

func (r *Registry) zoneDeny(e *Event, status protocol.Status, zoneID, reason string) {
	r.reply(e, protocol.TypeZoneDeny, status, zoneDenyBody{zoneID, reason, rfc3339(r.now)})
}

// zoneJoin admits an agent or says why not, always with a zone.deny so
// that the agent reads one of the two answers the reference names; the
// STATUS tells the cases apart. The checks, in order: the zone exists
// (404); the HMAC under its secret verifies (401); the timestamp is within
// the window (401); the same message was not answered before (409: a
// replay must not be handed a session token); the agent has a live entry
// (403); its reputation is at least the zone's minimum (403); an agent with
// a key has no live session in the zone already (409).
func (r *Registry) zoneJoin(e *Event, p *protocol.ZoneJoin) {
	z := r.zones[p.ZoneID]
	if z == nil {
		r.zoneDeny(e, protocol.StatusNotFound, p.ZoneID, fmt.Sprintf("Unknown zone %q", p.ZoneID))
		return
	}
	if err := protocol.VerifyHMAC(z.cfg.Secret, e.Header(protocol.HeaderFrom), e.Header(protocol.HeaderTo), e.Header(protocol.HeaderType), e.Header(protocol.HeaderCredits), e.Body); err != nil {
		r.zoneDeny(e, protocol.StatusUnauthorized, p.ZoneID, sigReason(err))
		return
	}
	if reason := r.outsideWindow(p.Timestamp.Time, e.ReceivedAt); reason != "" {
		r.zoneDeny(e, protocol.StatusUnauthorized, p.ZoneID, reason)
		return
	}
	key, joins := replayKey(e), r.zoneJoinsOf(p.ZoneID)
	horizon := r.now.Add(-2 * r.window)
	joins.dropWhile(func(o seenOutcome) bool { return o.At.Before(horizon) })
	if _, replayed := joins.get(key); replayed {
		r.zoneDeny(e, protocol.StatusConflict, p.ZoneID, "This zone.join was answered before; send a new one with a fresh timestamp")
		return
	}
	// A join refused for a full memory (below) is not remembered, so one
	// stamped no later than the latest such join may be a copy of one
	// (read from the event stream, its ID removed), which, sent again once
	// the memory had room, was admitted (helper-89). It is refused until
	// no such copy can still be within the window.
	if full, ok := r.joinsFull[p.ZoneID]; ok {
		if full.Before(horizon) {
			delete(r.joinsFull, p.ZoneID)
		} else if !p.Timestamp.Time.After(full) {
			r.zoneDeny(e, protocol.StatusConflict, p.ZoneID, "This zone.join is stamped no later than joins the zone refused while its memory was full; send a new one with a fresh timestamp")
			return
		}
	}
	if joins.len() >= ZoneJoinsMax {
		if r.joinsFull == nil {
			r.joinsFull = map[string]time.Time{}
		}
		if t := p.Timestamp.Time.UTC(); t.After(r.joinsFull[p.ZoneID]) {
			r.joinsFull[p.ZoneID] = t
		}
		r.zoneDeny(e, protocol.StatusTooManyRequests, p.ZoneID, fmt.Sprintf(
			"This zone answered %d joins in the last %s; send a new one with a fresh timestamp in a few minutes", ZoneJoinsMax, 2*r.window))
		return
	}
	status := r.admit(e, p, z)
	// The outcome is remembered so that a replay is refused; the answer
	// itself is not, since a confirm carries a session token.
	r.remember(joins, key, e, Reply{Type: e.Type, Status: status})
}

// ZoneJoinsMax bounds the answered zone.joins a zone remembers, for
// refusing replays: those of the last two signature windows, after which a
// replay is refused as stale anyway. When a zone's memory is full of joins
// still that recent, further joins to it are refused (429) instead of one
// being forgotten: until 2026-12-01 one memory served every zone and
// forgot its oldest, so anyone holding one zone's secret could flood it
// with 65,536 joins, push out another zone's join within its window, and
// replay that join (read from the event stream, its ID removed) for a
// fresh session token in its sender's name (helper-87). Now a flood of a
// zone's joins, which takes that zone's secret, delays only that zone's
// joins.
const ZoneJoinsMax = seenOutcomesMax // zone.joins a zone

// zoneJoinsOf is the memory of zone's answered joins.
func (r *Registry) zoneJoinsOf(zone string) *recentMap[seenOutcome] {
	m := r.joins[zone]
	if m == nil {
		m = newRecentMap[seenOutcome](ZoneJoinsMax)
		r.joins[zone] = m
	}
	return m
}

// allJoins is every zone's remembered joins, by replay key (a join's key
// names its zone too, since the body does).
func (r *Registry) allJoins() map[string]seenOutcome {
	out := map[string]seenOutcome{}
	for _, m := range r.joins {
		maps.Copy(out, m.all())
	}
	return out
}

// admit takes the checks of zone.join that depend on the agent, answers,
// and returns the answer's status.
func (r *Registry) admit(e *Event, p *protocol.ZoneJoin, z *zoneState) protocol.Status {
	a := r.agents[e.From]
	switch {
	case a == nil:
		r.zoneDeny(e, protocol.StatusForbidden, p.ZoneID, "Agent not registered")
		return protocol.StatusForbidden
	case a.expired(r.now):
		r.zoneDeny(e, protocol.StatusForbidden, p.ZoneID, "Agent registration expired")
		return protocol.StatusForbidden
	}
	if rep := r.reputationOf(e.From); !(rep >= z.cfg.MinReputation) {
		r.zoneDeny(e, protocol.StatusForbidden, p.ZoneID, "Reputation below required threshold ("+strconv.FormatFloat(z.cfg.MinReputation, 'f', -1, 64)+")")
		return protocol.StatusForbidden
	}
	// The zone's secret is shared by its members, so the HMAC proves
	// membership, not which agent sent the join: any member could join as
	// another and take its session. Once the agent has a key, a join does
	// not replace its live session; the agent ends it first with a
	// zone.leave, which must carry its signature.
	if old := z.members[e.From]; old != nil && r.now.Before(old.Expires) && r.keys[e.From].current() != nil {
		r.zoneDeny(e, protocol.StatusConflict, p.ZoneID, fmt.Sprintf(
			"%s is a member until %s; send a signed zone.leave first to join again", e.From, rfc3339(old.Expires)))
		return protocol.StatusConflict
	}
	m := &zoneMember{Role: z.cfg.Role, JoinedAt: r.now, JoinSeq: e.Seq, JoinEvent: e.ID,
		Expires: r.now.Add(ZoneSessionDuration), Capabilities: slices.Clone(p.Capabilities), JoinStamp: p.Timestamp.Time.UTC()}
	z.members[e.From] = m
	if !z.listed.has(e.From) {
		z.listed.insert(e.From)
	}
	confirm := replyOf(protocol.TypeZoneConfirm, protocol.StatusOK, zoneConfirmBody{
		ZoneID: p.ZoneID, SessionToken: r.sessionToken(p.ZoneID, e.From, e.ID), Role: m.Role, Expires: rfc3339(m.Expires)})
	confirm.FirstOnly = true // the token is the first copy's sender's alone
	r.put(e, confirm)
	return protocol.StatusOK
}

// zoneLeave ends a membership. Leaving a zone one is not in is answered
// with ack all the same: the outcome the agent wants holds.
func (r *Registry) zoneLeave(e *Event, p *protocol.ZoneLeave) {
	if r.refuseInauthentic(e) {
		return
	}
	z := r.zones[p.ZoneID]
	if z == nil {
		r.refuse(e, protocol.StatusNotFound, fmt.Sprintf("unknown zone %q", p.ZoneID))
		return
	}
	// A signed leave is fresh for the whole signature window, and a
	// replay of the one that ended the last membership ended the next:
	// then any zone member could join in the keyed agent's name and take
	// its session (helper-70).
	// The join's own stamp is a zone member's word (any member can make
	// the HMAC) and may run up to the window ahead: bounded by when the
	// join arrived, so that a join stamped ahead cannot block the owner's
	// own leave (helper-71).
	if m := z.members[e.From]; m != nil && r.last.v.Auth == AuthValid {
		began := m.JoinStamp
		if m.JoinedAt.Before(began) {
			began = m.JoinedAt
		}
		if ts, ok := signedTimestamp(e); ok && ts.Before(began) {
			r.refuse(e, protocol.StatusConflict, fmt.Sprintf("this zone.leave is stamped %s, before the membership it would end began (%s): a replay of an earlier leave",
				rfc3339(ts), rfc3339(began)))
			return
		}
	}
	if z.members[e.From] != nil {
		delete(z.members, e.From)
		z.listed.remove(e.From)
	}
	r.ack(e, ackBody{ZoneID: p.ZoneID})
}

// ZoneView is a zone as queries show it: no secret, no tokens.
type ZoneView struct {
	ID            string           `json:"zone_id"`
	Role          string           `json:"role"`
	MinReputation float64          `json:"min_reputation"`
	Members       []ZoneMemberView `json:"members"`
}

// ZoneMemberView is one member of a zone.
type ZoneMemberView struct {
	AgentURI     string    `json:"agent_uri"`
	Role         string    `json:"role"`
	JoinedAt     time.Time `json:"joined_at"`
	Expires      time.Time `json:"expires"`
	Active       bool      `json:"active"` // the session has not expired
	Capabilities []string  `json:"capabilities,omitempty"`
}

// ZoneMembersPageMax is the most members one page of a zone holds.
const ZoneMembersPageMax = 1_000 // members

// Zone returns zone id with its first ZoneMembersPageMax members, sorted
// by URI. Call it under Runner.View.
func (r *Registry) Zone(id string) (ZoneView, bool) { return r.ZonePage(id, "", 0) }

// ZonePage returns zone id with at most limit of its members (0, or more
// than ZoneMembersPageMax, means ZoneMembersPageMax) whose URIs sort
// after after. A zone may have as many members as the registry has
// agents, and one answer holding them all was unbounded. It looks at no
// more members than it returns, whatever the zone's history (listed).
// Call it under Runner.View.
func (r *Registry) ZonePage(id, after string, limit int) (ZoneView, bool) {
	z := r.zones[id]
	if z == nil {
		return ZoneView{}, false
	}
	if limit <= 0 || limit > ZoneMembersPageMax {
		limit = ZoneMembersPageMax
	}
	v := ZoneView{ID: id, Role: z.cfg.Role, MinReputation: z.cfg.MinReputation, Members: []ZoneMemberView{}}
	z.listed.after(after, func(uri string) bool {
		m := z.members[uri]
		if m == nil {
			// listed holds the members only (zoneLeave takes a leaver
			// out); a read must not take the node down if that ever broke.
			return true
		}
		v.Members = append(v.Members, ZoneMemberView{AgentURI: uri, Role: m.Role, JoinedAt: m.JoinedAt, Expires: m.Expires,
			Active: r.now.Before(m.Expires), Capabilities: slices.Clone(m.Capabilities)})
		return len(v.Members) < limit
	})
	return v, true
}

// ZoneIDs lists the configured zones, sorted.
func (r *Registry) ZoneIDs() []string { return slices.Clone(r.zoneIDs) }

// zonesOf lists the zones uri is an active member of, sorted.
func (r *Registry) zonesOf(uri string) []string {
	var out []string
	for _, id := range r.zoneIDs {
		if m := r.zones[id].members[uri]; m != nil && r.now.Before(m.Expires) {
			out = append(out, id)
		}
	}
	return out
}

// ZonesDigest names a zone configuration as the folds use it: each zone's
// id, minimum reputation, role and a SHA-256 of its secret, in id order,
// hashed. Two configurations with the same digest fold the log to the same
// zones; the digest reveals nothing of the secrets (each at least
// protocol.HMACSecretSizeMin random bytes). "none" for no zones.
func ZonesDigest(zones []Zone) string {
	if len(zones) == 0 {
		return "none"
	}
	sorted := slices.Clone(zones)
	slices.SortFunc(sorted, func(a, b Zone) int { return strings.Compare(a.ID, b.ID) })
	h := sha256.New()
	for _, z := range sorted {
		secret := sha256.Sum256(z.Secret)
		role := z.Role
		if role == "" {
			role = ZoneRoleDefault // the same zone, said two ways
		}
		fmt.Fprintf(h, "%q %s %q %x\n", z.ID, strconv.FormatFloat(z.MinReputation, 'g', -1, 64), role, secret)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}
