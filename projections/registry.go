package projections

import (
	"crypto"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/aglx/ledger/protocol"
)

// The registry is the node's fold over who is out there (registry.update,
// registry.sync, agent.announce, registry.exchange), which key speaks for
// whom (auth.request, key.rotate), who may enter which zone (zone.join,
// zone.leave) and who mentors (mentor.register, mentor.report). Its files:
//
//	registry.go           configuration, the Registry type, Apply's dispatch, replies
//	registry_entries.go   agent entries, TTL, fetch, sync, hints, sightings
//	registry_changes.go   the log of changed entries, for fetch and federation
//	contact.go            where an agent is reached, for the relay
//	uriset.go             the ordered set of URIs behind the paged lists
//	keys.go               key binding, rotation, key history, replayed requests
//	auth.go               Authenticate and the signature policy
//	verdicts.go           VerdictCache: the validation workers' checks, for the fold
//	ingest.go             IngestVerifier: those checks, made ahead of the fold
//	zones.go              zone configuration, join and leave, session tokens
//	mentors.go            the mentor directory
//	registry_snapshot.go  the read side: Agents, Agent, Snapshot
//	registry_state*.go    the saved state: SaveState, LoadState
//
// The registry acts on a message only when it is addressed to the node
// (TO is the node's URI), except registry.exchange (agent to agent; its
// entries become hints whoever it is for) and agent.announce (a broadcast).
// Everything else is the log's to record and the addressee's to act on.

// SignatureWindowDefault is how far a signed message's timestamp may lie from
// its arrival, either way. Five minutes tolerates ordinary clock drift and
// queueing while keeping a captured message useless soon after.
const SignatureWindowDefault = 5 * time.Minute

// signatureWindowMax bounds the configured window: beyond an hour a "stale"
// check stops meaning anything.
const signatureWindowMax = time.Hour

// tokenKeySizeMin is the shortest TokenKey accepted when zones are
// configured: a short key would make session tokens guessable.
const tokenKeySizeMin = 16 // bytes

// ReputationDefault is the reputation of an agent nobody has rated
// (reputation.Default), and every agent's where no reputation model is
// given: a registry made on its own, as in tests and the audit. Issue 5
// set it: "until then every agent has 0.5".
const ReputationDefault = 0.5

// RegistryConfig is what a Registry is built from. Everything in it is part
// of the fold's input: a node replaying its log with another configuration
// (another zone file, another window) may reach other decisions about past
// messages, so operators change it knowingly.
type RegistryConfig struct {
	// NodeURI is the node's own URI, e.g. "registry://localhost". It must
	// be spelled as the bridge writes it in the FROM of its replies, since
	// auth.response is signed over that FROM.
	NodeURI string
	// NodeKey signs auth.response. Ed25519 and RSA PKCS #1 v1.5 signatures
	// are deterministic, so signing inside a fold gives the same bytes on
	// replay.
	NodeKey crypto.Signer
	// NodePublicKey stands in for NodeKey in a fold that answers no one
	// (aglx audit, a replay tool; Outbox nil): the node's public key is
	// all the state needs, to check what the node itself signed, so an
	// auditor need not hold the node's secret. Such a registry folds the
	// same state; the auth.response it would have sent goes unsigned, to
	// nobody. Ignored when NodeKey is set.
	NodePublicKey crypto.PublicKey
	// NodeFirstKey is the key the node's first messages in the log were
	// signed with, when the node has rotated its key since (aglxd
	// --rotate-node-key; the event stream's metadata, events.
	// MetaNodeFirstKey). The fold checks the node's messages against it
	// and follows the node's own key.rotate events in the log from there,
	// as it does an agent's, so that mints made before a rotation still
	// count on replay. Nil: NodeKey's (or NodePublicKey's) public key,
	// right for a node that never rotated.
	NodeFirstKey crypto.PublicKey
	// Zones are the zones agents may join (ParseZones).
	Zones []Zone
	// SyncFrom names the peer registries whose registry.sync this node
	// takes (aglxd --sync-from), as canonical URIs. A peer's key is bound
	// by the auth.request that any registry:// name may send for itself,
	// so the binding alone said nothing of whether the operator trusts
	// the peer: anyone could name itself registry://ANYTHING, bind a key
	// and sync, overwrite or invent entries, and have the node sign them
	// on to its own peers (helper-97). None: no registry.sync is taken.
	// Like the zones, it is an input of the fold: a start with another
	// list folds the syncs of the log by it.
	SyncFrom []string
	// TokenKey derives zone session tokens. It is never stored or
	// written; without it the tokens a replay derives would differ.
	TokenKey []byte
	// Outbox receives the node's replies; nil means none are given (a
	// replay tool, a test).
	Outbox *Outbox
	// Verdicts holds signature checks made at ingest; nil means the fold
	// checks every signature itself.
	Verdicts *VerdictCache
	// SignatureWindow is SignatureWindowDefault when zero.
	SignatureWindow time.Duration
	// Reputation gives an agent's reputation, from 0 to 1, as of the event
	// being applied; it must be a deterministic function of the log. Nil
	// means ReputationDefault for everyone.
	Reputation func(uri string) float64
}

// Validate checks a configuration and says what is wrong with it. NewRegistry
// panics on a configuration that fails it, so the caller checks first and
// reports the error to the operator.
func (c *RegistryConfig) Validate() error {
	u, err := protocol.ParseURI(c.NodeURI)
	if err != nil {
		return fmt.Errorf("registry: node URI: %w", err)
	}
	if u.String() != c.NodeURI {
		return fmt.Errorf("registry: node URI %q must be written canonically, as %q", c.NodeURI, u.String())
	}
	pub := c.NodePublicKey
	switch {
	case c.NodeKey != nil:
		pub = c.NodeKey.Public()
	case c.Outbox != nil:
		return errors.New("registry: a node key is required to sign auth.response")
	case pub == nil:
		return errors.New("registry: the node's key is required (its private key to answer, or its public key for a fold that answers no one)")
	}
	if _, err := protocol.MarshalPublicKey(pub); err != nil {
		return fmt.Errorf("registry: node key: %w", err)
	}
	if c.NodeFirstKey != nil {
		if _, err := protocol.MarshalPublicKey(c.NodeFirstKey); err != nil {
			return fmt.Errorf("registry: the node's first key: %w", err)
		}
	}
	if c.SignatureWindow < 0 || c.SignatureWindow > signatureWindowMax {
		return fmt.Errorf("registry: signature window %v must be from 0 (the default, %v) to %v", c.SignatureWindow, SignatureWindowDefault, signatureWindowMax)
	}
	if err := checkZones(c.Zones); err != nil {
		return fmt.Errorf("registry: %w", err)
	}
	if err := CheckSyncFrom(c.SyncFrom, c.NodeURI); err != nil {
		return fmt.Errorf("registry: %w", err)
	}
	if len(c.Zones) > 0 && len(c.TokenKey) < tokenKeySizeMin {
		return fmt.Errorf("registry: zones need a session token key of at least %d bytes", tokenKeySizeMin)
	}
	return nil
}

// Registry is the registry projection. It implements Projection and
// Snapshotter. Apply is called by the runner; every other method reads state
// and must be called under Runner.View (or from another projection's Apply),
// never concurrently with Apply.
type Registry struct {
	cfg      RegistryConfig
	syncFrom map[string]bool // cfg.SyncFrom
	// unnamedSyncs counts the registry.sync frames refused because their
	// sender is not in syncFrom, by sender, at most UnnamedSyncPeersMax
	// senders: the start warns of them, since a node upgraded without
	// --sync-from loses on replay every entry its peers gave it. No
	// snapshot holds it, since it changes no outcome; a saved state does
	// (SaveState), so that a start from one warns as a replay would.
	unnamedSyncs map[string]int
	node         string
	// nodeKeys is the node's own key history: its first key (config, not
	// state), then each key its own key.rotate events bound.
	nodeKeys *keyring
	window   time.Duration

	// now is the registry's clock: the latest ReceivedAt applied. Expiry
	// is measured against it, never against the wall clock.
	now time.Time
	// last memoises the verdict on the event being applied, computed
	// before the registry changed anything, for Authenticate.
	last struct {
		id string
		v  Verdict
	}
	// answered says whether the registry put a reply for the event being
	// applied (refuseForgedRest).
	answered bool
	// refusedID is the id of the last event the registry refused, for
	// RefusedEvent.
	refusedID string

	agents map[string]*agentEntry
	sorted uriSet // URIs of agents, in order, for stable pages
	// changes lists entry changes in fold order, for registry.fetch in
	// update mode (registry_changes.go).
	changes changeLog
	keys    map[string]*keyring
	// keysMu lets the bridge's validation workers look up keys
	// (CurrentKey) without the runner's lock, which the fold holds while
	// it applies a stretch of events. The fold, the only writer, takes it
	// to change the map or a keyring's slice; its own reads need no lock.
	keysMu  sync.RWMutex
	zones   map[string]*zoneState
	zoneIDs []string // sorted
	mentors map[string]*mentor
	// mentorsListed holds the mentors' URIs in order, for MentorsPage.
	mentorsListed uriSet
	hints         *recentMap[Hint]
	sightings     *recentMap[Sighting]
	seen          *recentMap[seenOutcome]
	synced        int // agents known only from peers (Source == SourceSync)
	// joins remembers answered zone.joins apart from seen, one memory per
	// zone (zoneJoinsOf): anyone with a key can fill seen with answered
	// auth.requests, and a join pushed out of it within its window could
	// be replayed for a fresh session token.
	joins map[string]*recentMap[seenOutcome]
	// joinsFull holds, by zone, the latest timestamp of a join refused
	// because the zone's memory was full (zones.go).
	joinsFull map[string]time.Time
}

// NewRegistry returns an empty registry. It panics if cfg fails Validate.
func NewRegistry(cfg RegistryConfig) *Registry {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	if cfg.SignatureWindow == 0 {
		cfg.SignatureWindow = SignatureWindowDefault
	}
	pub := cfg.NodePublicKey
	if cfg.NodeKey != nil {
		pub = cfg.NodeKey.Public()
	}
	if cfg.NodeFirstKey != nil {
		pub = cfg.NodeFirstKey
	}
	text, _ := protocol.MarshalPublicKey(pub) // Validate parsed it
	r := &Registry{
		cfg:  cfg,
		node: cfg.NodeURI,
		nodeKeys: &keyring{keys: []*keyRecord{{
			KeyID: protocol.KeyID(pub), PublicKey: text, BoundBy: nodeKeyConfigured, pub: pub}}},
		window:    cfg.SignatureWindow,
		agents:    map[string]*agentEntry{},
		keys:      map[string]*keyring{},
		mentors:   map[string]*mentor{},
		hints:     newRecentMap[Hint](HintsMax),
		sightings: newRecentMap[Sighting](SightingsMax),
		seen:      newRecentMap[seenOutcome](seenOutcomesMax),
		joins:     map[string]*recentMap[seenOutcome]{},
	}
	r.zones, r.zoneIDs = newZoneStates(cfg.Zones)
	r.syncFrom = map[string]bool{}
	for _, peer := range cfg.SyncFrom {
		r.syncFrom[peer] = true
	}
	r.unnamedSyncs = map[string]int{}
	return r
}

// CheckSyncFrom says what is wrong with a list of peers to take
// registry.sync from (RegistryConfig.SyncFrom) for the node named node:
// each must be a registry:// URI in canonical form, and not the node.
func CheckSyncFrom(peers []string, node string) error {
	for _, peer := range peers {
		u, err := protocol.ParseURI(peer)
		switch {
		case err != nil:
			return fmt.Errorf("sync peer %q: %s", peer, protocol.ReasonOf(err))
		case u.Scheme != protocol.SchemeRegistry:
			return fmt.Errorf("sync peer %q: a peer is a registry, registry://NAME", peer)
		case u.String() != peer:
			return fmt.Errorf("sync peer %q: write it in canonical form, %q", peer, u.String())
		case peer == node:
			return fmt.Errorf("sync peer %q: that is this node's own name", peer)
		}
	}
	return nil
}

// UnnamedSyncPeersMax bounds the senders UnnamedSyncs remembers.
const UnnamedSyncPeersMax = 16 // senders

// UnnamedSyncs returns, by sender, how many registry.sync frames the
// registry refused because their sender is not one it takes syncs from
// (RegistryConfig.SyncFrom), for at most UnnamedSyncPeersMax senders; call
// it under Runner.View.
func (r *Registry) UnnamedSyncs() map[string]int { return maps.Clone(r.unnamedSyncs) }

// Name implements Projection.
func (r *Registry) Name() string { return "registry" }

// Now is the registry's clock: the latest receive time of the events
// applied. Statuses such as EXPIRED are computed against it.
func (r *Registry) Now() time.Time { return r.now }

// SignatureWindow is how far a signed message's timestamp may lie from its
// arrival; the ledger keeps refused signed messages for as long
// (refusedCopies).
func (r *Registry) SignatureWindow() time.Duration { return r.window }

// Apply implements Projection. The verdict on the event's signature is
// taken first, against the keys as they stood before the event, so that a
// key.rotate is checked with the key it replaces and Authenticate gives the
// other projections the same answer.
func (r *Registry) Apply(e *Event) {
	if c := r.cfg.Verdicts; c != nil {
		// The registry is the cache's one reader (the other folds take
		// the verdict from r.last), and it is done with e after this.
		defer c.Forget(e.Envelope)
	}
	r.last.id, r.last.v = e.ID, r.authenticate(e)
	r.answered = false
	if e.Msg == nil {
		return
	}
	defer r.refuseForgedRest(e)
	if e.ReceivedAt.After(r.now) {
		r.now = e.ReceivedAt.UTC()
	}
	switch p := e.Msg.Payload.(type) {
	case *protocol.RegistryExchange:
		r.exchange(e, p, e.To == r.node)
		return
	case *protocol.AgentAnnounce:
		r.announce(e, p)
		return
	}
	if e.To != r.node {
		return
	}
	switch p := e.Msg.Payload.(type) {
	case *protocol.RegistryUpdate:
		r.update(e, p)
	case *protocol.RegistryFetch:
		r.fetch(e, p)
	case *protocol.RegistrySync:
		r.sync(e, p)
	case *protocol.MentorRegister:
		r.mentorRegister(e, p)
	case *protocol.MentorReport:
		r.mentorReport(e, p)
	case *protocol.AuthRequest:
		r.authRequest(e, p)
	case *protocol.KeyRotate:
		r.keyRotate(e, p)
	case *protocol.ZoneJoin:
		r.zoneJoin(e, p)
	case *protocol.ZoneLeave:
		r.zoneLeave(e, p)
	}
}

// refuseForgedRest answers e with 401 when its signature failed and no
// fold answers it otherwise: a message that carries a signature which does
// not verify (or one its sender's key requires and it lacks) is refused
// whatever its TYPE, and the relay withholds what was refused. Until
// 2026-12-01 only the TYPEs the policy requires signed were: a
// mentor.request, plan or shutdown message, ack or error, or an
// agent.announce over TCP with a garbage signature was answered 202 and
// delivered with the node's RELAYED-BY (helper-63). Credit and task
// messages are the ledger fold's to answer (Credits.Apply), which runs
// after this one.
func (r *Registry) refuseForgedRest(e *Event) {
	if r.last.v.Auth != AuthInvalid || r.answered {
		return
	}
	switch e.Msg.Info.Group {
	case protocol.GroupCredit, protocol.GroupTask:
		return
	}
	r.refuse(e, protocol.StatusUnauthorized, r.last.v.Reason)
}

// reply gives the node's answer to e. body is marshalled to JSON; the types
// passed here marshal without error, so a failure is a bug.
func (r *Registry) reply(e *Event, typ string, status protocol.Status, body any) {
	r.put(e, replyOf(typ, status, body))
}

// replyOf is a reply with body in JSON. The registry's bodies are its own
// types, so a failure to marshal one is a bug.
func replyOf(typ string, status protocol.Status, body any) Reply {
	b, err := json.Marshal(body)
	if err != nil {
		panic(fmt.Sprintf("registry: reply body for %s: %v", typ, err))
	}
	return Reply{Type: typ, Status: status, Body: b}
}

func (r *Registry) put(e *Event, rep Reply) {
	r.answered = true
	if rep.Type == protocol.TypeError {
		r.refusedID = e.ID
	}
	if r.cfg.Outbox != nil {
		r.cfg.Outbox.Put(e.Seq, rep)
	}
}

// errorBody is the body of an error reply, as the bridge writes its own.
type errorBody struct {
	Status int    `json:"status"`
	Reason string `json:"reason"`
}

// reputationOf is uri's reputation, from 0 to 1, as of the event before
// the one being applied.
func (r *Registry) reputationOf(uri string) float64 {
	if r.cfg.Reputation == nil {
		return ReputationDefault
	}
	return r.cfg.Reputation(uri)
}

// RefusedEvent reports whether the registry refused e while applying it:
// folds applied after it (the handshake tracker) leave refused events out.
func (r *Registry) RefusedEvent(e *Event) bool { return e.ID != "" && e.ID == r.refusedID }

// refuse answers e with an error frame.
func (r *Registry) refuse(e *Event, status protocol.Status, reason string) {
	r.reply(e, protocol.TypeError, status, errorBody{int(status), reason})
}

// refuseInauthentic answers e with 401 if its signature check failed
// (r.last, made by Apply for e) and reports whether it did.
func (r *Registry) refuseInauthentic(e *Event) bool {
	v := r.last.v
	if v.Auth == AuthInvalid {
		r.refuse(e, protocol.StatusUnauthorized, v.Reason)
		return true
	}
	if v.Auth == AuthValid {
		if reason := r.signedOutOfOrder(e); reason != "" {
			r.refuse(e, protocol.StatusConflict, reason)
			return true
		}
	}
	return false
}

// signedOutOfOrder says why a signed message that changes the registry is
// older than one of its TYPE from the same sender already applied, or
// records its timestamp and returns "". A signed message is fresh for the
// whole signature window, and only auth.request, key.rotate and zone.join
// are remembered as answered; so a captured registry.update (sent over
// plain TCP, its ID header unsigned and removable) could be sent again
// within the window, after a later one, and put the entry back as it was
// (the relay then delivered to the old address). Equal timestamps pass,
// since agents stamp whole seconds, unless the message is one already
// applied at that timestamp: a first update of a second, replayed after a
// second one of the same second, put the old address back (helper-70).
// zone.leave keeps a clock per zone: a leave of one zone is not out of
// order behind a later leave of another.
func (r *Registry) signedOutOfOrder(e *Event) string {
	kr := r.keys[e.From]
	ts, ok := signedTimestamp(e)
	if kr == nil || !ok {
		return ""
	}
	clock := e.Type
	if p, ok := e.Msg.Payload.(*protocol.ZoneLeave); ok {
		clock += " " + p.ZoneID
	}
	name := replayKey(e)
	last, seen := kr.lastSigned[clock]
	switch {
	case seen && ts.Before(last):
		return fmt.Sprintf("this signed %s is stamped %s, before the one from %s already applied (%s): a replay, or sent out of order",
			e.Type, rfc3339(ts), e.From, rfc3339(last))
	case seen && ts.Equal(last) && slices.Contains(kr.sameStamp[clock], name):
		return fmt.Sprintf("this signed %s from %s was applied already (the same signed content): a replay", e.Type, e.From)
	}
	if kr.lastSigned == nil {
		kr.lastSigned, kr.sameStamp = map[string]time.Time{}, map[string][]string{}
	}
	same := kr.sameStamp[clock]
	if !seen || ts.After(last) {
		same = same[:0]
	}
	if len(same) >= sameStampMax {
		same = append(same[:0], same[1:]...)
	}
	kr.lastSigned[clock], kr.sameStamp[clock] = ts, append(same, name)
	return ""
}

// ackBody is the body of an ack, as the bridge writes its own, so that one
// client reads both.
type ackBody struct {
	EventID string `json:"event_id"`
	Seq     uint64 `json:"seq"`
	ZoneID  string `json:"zone_id,omitempty"`
	KeyID   string `json:"key_id,omitempty"`
}

func (r *Registry) ack(e *Event, b ackBody) {
	b.EventID, b.Seq = e.ID, e.Seq
	r.reply(e, protocol.TypeAck, protocol.StatusOK, b)
}

// rfc3339 writes an event time as replies carry it: UTC, with a fraction of
// a second only when there is one.
func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// recentMap is a map bounded by count: when full, the entry put longest ago
// goes. It is for what the registry keeps only as a courtesy (hints,
// sightings, answered requests), never for facts the ledger relies on.
// Eviction depends only on the order of puts, so it is deterministic.
type recentMap[V any] struct {
	max   int
	tick  uint64
	m     map[string]recentItem[V]
	order []recentKey // puts in order; stale ones are skipped
}

type recentItem[V any] struct {
	v    V
	tick uint64
}

type recentKey struct {
	key  string
	tick uint64
}

func newRecentMap[V any](max int) *recentMap[V] {
	return &recentMap[V]{max: max, m: map[string]recentItem[V]{}}
}

func (c *recentMap[V]) get(key string) (V, bool) {
	it, ok := c.m[key]
	return it.v, ok
}

func (c *recentMap[V]) put(key string, v V) {
	c.tick++
	c.m[key] = recentItem[V]{v, c.tick}
	c.order = append(c.order, recentKey{key, c.tick})
	for len(c.m) > c.max {
		c.popFront()
	}
	if len(c.order) > 2*c.max+64 { // re-puts leave stale keys behind
		kept := c.order[:0]
		for _, k := range c.order {
			if c.m[k.key].tick == k.tick {
				kept = append(kept, k)
			}
		}
		c.order = kept
	}
}

// popFront removes the oldest live entry.
func (c *recentMap[V]) popFront() {
	for len(c.order) > 0 {
		k := c.order[0]
		c.order = c.order[1:]
		if it, ok := c.m[k.key]; ok && it.tick == k.tick {
			delete(c.m, k.key)
			return
		}
	}
}

// dropWhile removes entries from the oldest on while old says they are
// too old, and stops at the first that is not.
func (c *recentMap[V]) dropWhile(old func(V) bool) {
	for len(c.order) > 0 {
		k := c.order[0]
		it, ok := c.m[k.key]
		if ok && it.tick == k.tick {
			if !old(it.v) {
				return
			}
			delete(c.m, k.key)
		}
		c.order = c.order[1:]
	}
}

// len is the number of live entries.
func (c *recentMap[V]) len() int { return len(c.m) }

// all returns the live entries by key.
func (c *recentMap[V]) all() map[string]V {
	out := make(map[string]V, len(c.m))
	for k, it := range c.m {
		out[k] = it.v
	}
	return out
}
