package projections

import (
	"time"

	"github.com/aglx/ledger/ledger/statecodec"
)

// The zones' saved state: each configured zone's members (its settings
// and secret are configuration, never saved), each zone's memory of
// answered joins, and the zones that refused joins for a full memory
// (zones.go). Only configured zones have any: zoneJoin looks the zone up
// before it remembers or refuses anything.

// saveZones writes the members of each zone, in the order of zoneIDs, then
// the memories of joins and the full zones, by zone.
func (r *Registry) saveZones(w *statecodec.Writer) {
	w.Len(len(r.zoneIDs))
	for _, id := range r.zoneIDs {
		z := r.zones[id]
		w.String(id)
		saveListed(w, &z.listed, func(uri string) { writeZoneMember(w, z.members[uri]) })
	}
	// A zone's memory is made by its first join that passes the checks
	// before it (zoneJoinsOf), and kept when it empties: which zones have
	// one is state too.
	w.Len(len(r.joins))
	for _, id := range sortedKeys(r.joins) {
		w.String(id)
		saveRecent(w, r.joins[id], writeSeenOutcome)
	}
	w.Bool(r.joinsFull != nil)
	w.Len(len(r.joinsFull))
	for _, id := range sortedKeys(r.joinsFull) {
		w.String(id)
		w.Time(r.joinsFull[id])
	}
}

// loadZones reads what saveZones wrote. The zones must be the configured
// ones.
func (r *Registry) loadZones(rd *statecodec.Reader) {
	n := rd.Len(2)
	if rd.Err() == nil && n != len(r.zoneIDs) {
		rd.Failf("registry: %d zones saved, and %d configured: saved under another configuration", n, len(r.zoneIDs))
		return
	}
	for i := 0; i < n && rd.Err() == nil; i++ {
		id := rd.String()
		if rd.Err() != nil {
			return
		}
		if id != r.zoneIDs[i] {
			rd.Failf("registry: zone %q saved where the configuration has %q: saved under another configuration", id, r.zoneIDs[i])
			return
		}
		z := r.zones[id]
		z.listed = loadListed(rd, "zone member", func(uri string) { z.members[uri] = readZoneMember(rd) })
	}
	nj := rd.Len(2)
	prev := ""
	for i := 0; i < nj && rd.Err() == nil; i++ {
		id := rd.String()
		switch {
		case rd.Err() != nil:
			return
		case r.zones[id] == nil:
			rd.Failf("registry: joins remembered for zone %q, which is not configured", id)
			return
		case i > 0 && id <= prev:
			rd.Failf("registry: the zones' joins are not in order at %q", id)
			return
		}
		// zoneJoinsOf makes the memory with the bound every zone's has.
		loadRecent(rd, r.zoneJoinsOf(id), readSeenOutcome(nil))
		prev = id
	}
	hasFull := rd.Bool()
	nf := rd.Len(2)
	if !hasFull && nf > 0 {
		rd.Failf("registry: %d full zones in a nil map", nf)
	}
	if !hasFull || rd.Err() != nil {
		return
	}
	r.joinsFull, prev = make(map[string]time.Time, nf), ""
	for i := 0; i < nf && rd.Err() == nil; i++ {
		id, at := rd.String(), rd.Time()
		switch {
		case rd.Err() != nil:
		case r.zones[id] == nil:
			rd.Failf("registry: zone %q, which is not configured, refused joins for a full memory", id)
		case i > 0 && id <= prev:
			rd.Failf("registry: the full zones are not in order at %q", id)
		}
		r.joinsFull[id], prev = at, id
	}
}

// writeZoneMember writes one member of a zone.
func writeZoneMember(w *statecodec.Writer, m *zoneMember) {
	w.String(m.Role)
	w.Time(m.JoinedAt)
	w.Uint(m.JoinSeq)
	w.String(m.JoinEvent)
	w.Time(m.Expires)
	writeStrings(w, m.Capabilities)
	w.Time(m.JoinStamp)
}

// readZoneMember reads what writeZoneMember wrote.
func readZoneMember(rd *statecodec.Reader) *zoneMember {
	return &zoneMember{Role: rd.String(), JoinedAt: rd.Time(), JoinSeq: rd.Uint(), JoinEvent: rd.String(),
		Expires: rd.Time(), Capabilities: readStrings(rd), JoinStamp: rd.Time()}
}
