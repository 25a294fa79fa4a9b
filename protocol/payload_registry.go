package protocol

import (
	"math"
	"strconv"
)

// Registry payloads: how agents become visible to each other (reference
// chapter "Registry-Nachrichten"). The registry itself is an address,
// registry://NAME; the ledger node is one.

// ttlMax bounds a registration's time to live: a year, so that an entry
// cannot outlive every operator who could remove it.
const ttlMax = 366 * 24 * 3600 // seconds

// RegistryUpdate is registry.update: an agent registers itself or refreshes
// its entry.
type RegistryUpdate struct {
	AgentName    string   `json:"agent_name"`
	AgentType    string   `json:"agent_type,omitempty"`
	Capabilities []string `json:"capabilities,omitempty"`
	Address      string   `json:"address,omitempty"`
	Port         *int64   `json:"port,omitempty"`
	// Status is the agent's state as it words it: "READY", "IDLE", "BUSY".
	Status string `json:"status,omitempty"`
	TTL    *int64 `json:"ttl,omitempty"` // seconds
	// Signature is checked for form only; see fieldCheck.signature.
	Signature string `json:"signature,omitempty"`
}

// Validate requires agent_name; port, ttl and signature must be well formed
// when given.
func (p *RegistryUpdate) Validate() error {
	var c fieldCheck
	c.label("agent_name", p.AgentName, true)
	c.label("agent_type", p.AgentType, false)
	c.words("capabilities", p.Capabilities, false)
	c.sized("address", p.Address, false, AddressSizeMax)
	c.label("status", p.Status, false)
	c.integer("port", p.Port, false, 1, 65535)
	c.integer("ttl", p.TTL, false, 1, ttlMax)
	c.signature("signature", p.Signature, false, sigAlgsKey)
	return c.result()
}

// RegistryAck is registry.ack: the registry confirms an update, a sync or an
// exchange. What it confirms varies, so no field is required.
type RegistryAck struct {
	AgentID   string    `json:"agent_id,omitempty"`
	TTL       *int64    `json:"ttl,omitempty"` // seconds
	Timestamp Timestamp `json:"timestamp,omitzero"`
}

// Validate checks the form of the fields that are present.
func (p *RegistryAck) Validate() error {
	var c fieldCheck
	c.id("agent_id", p.AgentID, false)
	c.integer("ttl", p.TTL, false, 0, ttlMax)
	return c.result()
}

// FetchModeUpdate is the registry.fetch mode the reference defines: entries
// new or changed since a point in time.
const FetchModeUpdate = "update"

// RegistryFetch is registry.fetch: an agent asks for the entries changed
// since a point in time; the answer is a registry.list.
type RegistryFetch struct {
	Mode  string    `json:"mode"`
	Since Timestamp `json:"since,omitzero"`
	// After continues a paged list: the `next` of the previous answer.
	After string `json:"after,omitempty"`
}

// FetchModeFull asks for every live entry, page by page.
const FetchModeFull = "full"

// Validate requires mode "update" with since (the reference's form), or
// mode "full" (every live entry). A mode the node does not know is refused
// rather than answered with a guess.
func (p *RegistryFetch) Validate() error {
	var c fieldCheck
	c.text("mode", p.Mode)
	switch p.Mode {
	case "", FetchModeUpdate:
		c.timestamp("since", p.Since, true)
	case FetchModeFull:
		c.timestamp("since", p.Since, false)
	default:
		c.failf("field %q holds %s; the modes are %q and %q", "mode", quoteValue(p.Mode), FetchModeUpdate, FetchModeFull)
	}
	return c.result()
}

// RegistryEntry is one agent in a registry.list or registry.sync.
type RegistryEntry struct {
	AgentID  string    `json:"agent_id"`
	AgentURI URI       `json:"agent_uri"`
	Status   string    `json:"status,omitempty"`
	LastSeen Timestamp `json:"last_seen,omitzero"` // in registry.list
	TTL      *int64    `json:"ttl,omitempty"`      // seconds, in registry.sync
}

func (e *RegistryEntry) check(c *fieldCheck, path string) {
	c.id(path+".agent_id", e.AgentID, true)
	c.address(path+".agent_uri", e.AgentURI)
	c.label(path+".status", e.Status, false)
	c.integer(path+".ttl", e.TTL, false, 0, ttlMax)
}

// RegistryList is registry.list: the registry's answer to a registry.fetch.
type RegistryList struct {
	// Entries is required but may be empty: nothing changed.
	Entries []RegistryEntry `json:"entries"`
}

// Validate requires entries, each with agent_id and agent_uri.
func (p *RegistryList) Validate() error { return checkEntries(p.Entries) }

// RegistrySync is registry.sync: one registry copies its entries to another.
type RegistrySync struct {
	Entries []RegistryEntry `json:"entries"`
}

// Validate requires entries, each with agent_id and agent_uri.
func (p *RegistrySync) Validate() error { return checkEntries(p.Entries) }

func checkEntries(entries []RegistryEntry) error {
	var c fieldCheck
	if entries == nil {
		c.missing("entries")
	}
	for i := range entries {
		entries[i].check(&c, "entries["+strconv.Itoa(i)+"]")
	}
	return c.result()
}

// KnownAgent is one agent in a registry.exchange.
type KnownAgent struct {
	AgentURI URI    `json:"agent_uri"`
	Status   string `json:"status,omitempty"`
}

// RegistryExchange is registry.exchange: two agents swap what they know of
// others, without a registry.
type RegistryExchange struct {
	KnownAgents []KnownAgent `json:"known_agents"`
}

// Validate requires known_agents (possibly empty), each with agent_uri.
func (p *RegistryExchange) Validate() error {
	var c fieldCheck
	if p.KnownAgents == nil {
		c.missing("known_agents")
	}
	for i, a := range p.KnownAgents {
		c.address("known_agents["+strconv.Itoa(i)+"].agent_uri", a.AgentURI)
		c.label("known_agents["+strconv.Itoa(i)+"].status", a.Status, false)
	}
	return c.result()
}

// AgentAnnounce is agent.announce: a UDP broadcast by which an agent makes
// itself known on the local network. It has no TO.
type AgentAnnounce struct {
	AgentName string `json:"agent_name"`
	AgentType string `json:"agent_type,omitempty"`
	Uptime    *int64 `json:"uptime,omitempty"` // seconds
}

// Validate requires agent_name; uptime, if given, is not negative.
func (p *AgentAnnounce) Validate() error {
	var c fieldCheck
	c.label("agent_name", p.AgentName, true)
	c.label("agent_type", p.AgentType, false)
	c.integer("uptime", p.Uptime, false, 0, math.MaxInt64)
	return c.result()
}
