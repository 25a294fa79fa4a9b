package projections

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/aglx/ledger/ledger/statecodec"
	"github.com/aglx/ledger/protocol"
)

// The registry's saved state (StateSaver): everything it folded, so that
// a start can take it up where a stop left it. Its files:
//
//	registry_state.go          the order of the parts; agents, the change log, the paged sets
//	registry_state_keys.go     key rings: agents', and the node's own after the first
//	registry_state_zones.go    zone members, remembered joins, zones refused for a full memory
//	registry_state_mentors.go  the mentor directory
//	registry_state_recent.go   the bounded memories (hints, sightings, answered messages)
//
// What is configuration is not saved (RegistryConfig and what NewRegistry
// makes of it: the node's URI and keys, the zones' settings, the peers
// synced from, the window, the bounds of the memories), since LoadState
// runs on a registry built from the same configuration. Neither is the
// scratch of the event being applied: last (the verdict memoised for
// Authenticate) and answered (whether a reply was put) are set at the
// start of every Apply before anything reads them, and a state is saved
// between events, never inside one. refusedID is saved although it names
// an event already applied: it is not reset per event, and RefusedEvent
// compares it with a later event's id, which a log may repeat.
//
// Maps are written in key order, and every slice that may be nil says so,
// so that the same state gives the same bytes and a restored registry is
// the saved one field for field (statetest.Diff).

var _ StateSaver = (*Registry)(nil)

// SaveState writes the registry's state. It changes nothing, and must be
// called with the folds locked (Runner.View). It takes the lock of a
// reply's signature (lazySignature), which a connection may be making.
func (r *Registry) SaveState(w *statecodec.Writer) error {
	w.Time(r.now)
	w.Int(int64(r.synced))
	w.String(r.refusedID)
	w.Len(len(r.unnamedSyncs))
	for _, peer := range sortedKeys(r.unnamedSyncs) {
		w.String(peer)
		w.Int(int64(r.unnamedSyncs[peer]))
	}
	saveListed(w, &r.sorted, func(uri string) { writeAgent(w, r.agents[uri]) })
	r.saveChanges(w)
	if err := r.saveKeys(w); err != nil {
		return err
	}
	r.saveZones(w)
	r.saveMentors(w)
	r.saveRecent(w)
	return nil
}

// LoadState restores what SaveState wrote, into a registry fresh from
// NewRegistry with the configuration the state was saved under. It
// checks what the registry's code relies on (entries behind every listed
// URI, keys that parse to their fingerprints, zones that are configured,
// counts within their bounds), so that a damaged or crafted state is
// refused here rather than taking the node down later.
func (r *Registry) LoadState(rd *statecodec.Reader) error {
	if !r.now.IsZero() || len(r.agents) > 0 || len(r.keys) > 0 || len(r.nodeKeys.keys) != 1 || r.seen.len() > 0 {
		return errors.New("registry: a saved state is loaded into a fresh registry only")
	}
	r.now = rd.Time()
	synced := rd.Int()
	r.refusedID = rd.String()
	n := rd.Len(2)
	if n > UnnamedSyncPeersMax {
		rd.Failf("registry: %d senders of unnamed syncs, more than the %d remembered", n, UnnamedSyncPeersMax)
	}
	prev := ""
	for i := 0; i < n && rd.Err() == nil; i++ {
		peer, count := rd.String(), rd.Int()
		if i > 0 && peer <= prev {
			rd.Failf("registry: the senders of unnamed syncs are not in order at %q", peer)
		}
		if count < 1 || count > math.MaxInt {
			rd.Failf("registry: %d unnamed syncs from %q", count, peer)
		}
		r.unnamedSyncs[peer], prev = int(count), peer
	}
	r.sorted = loadListed(rd, "agent", func(uri string) {
		if rd.Err() == nil {
			checkStoredURI(rd, uri)
		}
		r.agents[uri] = readAgent(rd)
	})
	if len(r.agents) > RegistryAgentsMax {
		rd.Failf("registry: %d agents, more than its bound of %d", len(r.agents), RegistryAgentsMax)
	}
	var fromSync int64
	for _, a := range r.agents {
		if a.Source == SourceSync {
			fromSync++
		}
	}
	if rd.Err() == nil && synced != fromSync {
		// merge and update keep the count of entries known only from
		// peers in step with their Source.
		rd.Failf("registry: %d agents counted as synced, and %d are", synced, fromSync)
	}
	r.synced = int(fromSync)
	r.loadChanges(rd)
	r.loadKeys(rd)
	r.loadZones(rd)
	r.loadMentors(rd)
	r.loadRecent(rd)
	if err := rd.Err(); err != nil {
		return fmt.Errorf("registry: loading its saved state: %w", err)
	}
	return nil
}

// checkStoredURI fails rd unless uri parses as a URI: syncEntry parses the
// URIs of the change log again, and panics on one that does not. It does
// not ask for the canonical form, which the URIs the bridge logs have:
// an entry is keyed by its event's FROM as the log's envelope holds it,
// which nothing checks against the message's own FROM, and a state the
// fold reached is not refused for less than what would take it down.
func checkStoredURI(rd *statecodec.Reader, uri string) {
	if _, err := protocol.ParseURI(uri); err != nil {
		rd.Failf("registry: the agent %q: %v", uri, err)
	}
}

// writeAgent writes one agent's entry.
func writeAgent(w *statecodec.Writer, a *agentEntry) {
	w.String(a.AgentID)
	w.String(a.Name)
	w.String(a.Type)
	writeStrings(w, a.Capabilities)
	w.String(a.Address)
	w.Int(a.Port)
	w.String(a.Status)
	w.Int(a.TTL)
	w.Time(a.LastSeen)
	writeOptInt(w, a.Uptime)
	w.String(a.Source)
	w.String(a.Via)
	w.Time(a.RegisteredAt)
	w.Time(a.ChangedAt)
	w.Uint(a.ChangedSeq)
	w.Bool(a.History != nil)
	if a.History != nil {
		w.Len(len(a.History))
		for _, c := range a.History {
			w.Time(c.At)
			w.String(c.Status)
			w.String(c.Cause)
			w.Uint(c.Seq)
		}
	}
}

// readAgent reads what writeAgent wrote.
func readAgent(rd *statecodec.Reader) *agentEntry {
	a := &agentEntry{AgentID: rd.String(), Name: rd.String(), Type: rd.String(), Capabilities: readStrings(rd),
		Address: rd.String(), Port: rd.Int(), Status: rd.String(), TTL: rd.Int(), LastSeen: rd.Time(), Uptime: readOptInt(rd),
		Source: rd.String(), Via: rd.String(), RegisteredAt: rd.Time(), ChangedAt: rd.Time(), ChangedSeq: rd.Uint()}
	if a.Source != SourceSelf && a.Source != SourceSync && rd.Err() == nil {
		rd.Failf("registry: an entry from %q, neither %q nor %q", a.Source, SourceSelf, SourceSync)
	}
	if rd.Bool() {
		n := rd.Len(4)
		if n > StatusHistoryMax {
			rd.Failf("registry: a status history of %d changes, more than its bound of %d", n, StatusHistoryMax)
			return a
		}
		a.History = make([]StatusChange, 0, n)
		for range n {
			a.History = append(a.History, StatusChange{At: rd.Time(), Status: rd.String(), Cause: rd.String(), Seq: rd.Uint()})
		}
	}
	return a
}

// saveChanges writes the change log (registry_changes.go), in its order.
func (r *Registry) saveChanges(w *statecodec.Writer) {
	es := r.changes.entries
	w.Bool(es != nil)
	w.Len(len(es))
	for _, c := range es {
		w.Time(c.at)
		w.Uint(c.seq)
		w.String(c.uri)
	}
}

// loadChanges reads what saveChanges wrote, after the agents: every entry
// names an agent (fetchChanged reads the entry of each), and the log is
// in the order of the fold's clock and of the events (since and
// ChangedPage search it).
func (r *Registry) loadChanges(rd *statecodec.Reader) {
	isNil := !rd.Bool()
	n := rd.Len(3)
	if isNil && n > 0 {
		rd.Failf("registry: a nil change log with %d entries", n)
	}
	if isNil || rd.Err() != nil {
		return
	}
	es := make([]changeEntry, 0, n)
	for i := 0; i < n && rd.Err() == nil; i++ {
		c := changeEntry{at: rd.Time(), seq: rd.Uint(), uri: rd.String()}
		switch {
		case rd.Err() != nil:
		case r.agents[c.uri] == nil:
			rd.Failf("registry: the change log names %q, which has no entry", c.uri)
		case i > 0 && (c.at.Before(es[i-1].at) || c.seq < es[i-1].seq):
			rd.Failf("registry: the change log goes back at entry %d", i)
		}
		es = append(es, c)
	}
	r.changes.entries = es
}

// saveListed writes a uriSet in its chunks (their sizes, which its
// history made and its later inserts and removals depend on), then each
// of its keys in order, followed by what put writes of it: the map the
// set lists, so that each key is written once.
func saveListed(w *statecodec.Writer, s *uriSet, put func(key string)) {
	w.Bool(s.chunks != nil)
	w.Len(len(s.chunks))
	for _, c := range s.chunks {
		w.Len(len(c))
	}
	for _, c := range s.chunks {
		for _, k := range c {
			w.String(k)
			put(k)
		}
	}
}

// loadListed reads what saveListed wrote, calling get to read what put
// wrote of each key. The keys must ascend strictly, and each chunk hold
// from one to sortedChunkMax of them, so the set is one uriSet's code
// can work on; a key is listed if and only if get put it in the map.
func loadListed(rd *statecodec.Reader, what string, get func(key string)) uriSet {
	isNil := !rd.Bool()
	n := rd.Len(1)
	if isNil && n > 0 {
		rd.Failf("registry: a nil set of %ss with %d chunks", what, n)
	}
	if isNil || rd.Err() != nil {
		return uriSet{}
	}
	sizes := make([]int, n)
	total := 0
	for i := range sizes {
		sizes[i] = rd.Len(1)
		if rd.Err() == nil && (sizes[i] < 1 || sizes[i] > sortedChunkMax) {
			rd.Failf("registry: a chunk of %d %ss", sizes[i], what)
		}
		total += sizes[i]
	}
	if rd.Err() == nil && total > rd.Remaining() {
		rd.Failf("registry: %d %ss, more than the %d bytes left can hold", total, what, rd.Remaining())
	}
	if rd.Err() != nil {
		return uriSet{}
	}
	s := uriSet{chunks: make([][]string, 0, n)}
	prev, first := "", true
	for _, size := range sizes {
		c := make([]string, 0, size)
		for range size {
			k := rd.String()
			if rd.Err() != nil {
				return uriSet{}
			}
			if !first && k <= prev {
				rd.Failf("registry: the %ss are not in order at %q", what, k)
				return uriSet{}
			}
			prev, first = k, false
			get(k)
			c = append(c, k)
		}
		s.chunks = append(s.chunks, c)
	}
	return s
}

// writeStrings writes a slice of strings that may be nil, telling nil
// from empty.
func writeStrings(w *statecodec.Writer, s []string) {
	w.Bool(s != nil)
	if s != nil {
		w.Len(len(s))
		for _, v := range s {
			w.String(v)
		}
	}
}

// readStrings reads what writeStrings wrote.
func readStrings(rd *statecodec.Reader) []string {
	if !rd.Bool() {
		return nil
	}
	n := rd.Len(1)
	out := make([]string, 0, n)
	for range n {
		out = append(out, rd.String())
	}
	return out
}

// writeOptInt writes an optional integer.
func writeOptInt(w *statecodec.Writer, v *int64) {
	w.Bool(v != nil)
	if v != nil {
		w.Int(*v)
	}
}

func readOptInt(rd *statecodec.Reader) *int64 {
	if !rd.Bool() {
		return nil
	}
	v := rd.Int()
	return &v
}

// writeOptFloat writes an optional float.
func writeOptFloat(w *statecodec.Writer, v *float64) {
	w.Bool(v != nil)
	if v != nil {
		w.Float(*v)
	}
}

// readOptFloat reads what writeOptFloat wrote. The floats the registry
// keeps came from JSON, which has no NaN or infinity, and one would fail
// the snapshot's encoding.
func readOptFloat(rd *statecodec.Reader) *float64 {
	if !rd.Bool() {
		return nil
	}
	v := rd.Float()
	if math.IsNaN(v) || math.IsInf(v, 0) {
		rd.Failf("registry: a figure of %v", v)
	}
	return &v
}

// sortedKeys returns m's keys in order, for writing a map the same way
// every time.
func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
