package projections

import "github.com/aglx/ledger/ledger/statecodec"

// The bounded memories' saved state (recentMap, registry.go): hints,
// sightings, answered auth.requests and key.rotates, and each zone's
// answered joins (registry_state_zones.go). What a memory forgets next
// depends on the order of its puts, so it is saved as it stands: its tick,
// and its order with the stale puts that re-puts left behind (they count
// towards when the order is compacted), each live one with its value. Its
// bound is configuration (the memory NewRegistry made), not saved.

// saveRecent writes the registry's own memories; the zones' are written
// with the zones.
func (r *Registry) saveRecent(w *statecodec.Writer) {
	saveRecent(w, r.hints, writeHint)
	saveRecent(w, r.sightings, writeSighting)
	saveRecent(w, r.seen, writeSeenOutcome)
}

// loadRecent reads what saveRecent wrote into the registry's memories,
// with the bounds they were made with. An answered auth.request's reply
// waits for the node's signature: it is made again with the node's key,
// or shared with the same reply's in the outbox if that was loaded first
// (restoredSignatures).
func (r *Registry) loadRecent(rd *statecodec.Reader) {
	loadRecent(rd, r.hints, readHint)
	loadRecent(rd, r.sightings, readSighting)
	sigs := newRestoredSignatures(r)
	if o := r.cfg.Outbox; o != nil { // loaded already, or fresh and empty
		o.mu.Lock()
		for _, rep := range o.bySeq {
			sigs.add(rep)
		}
		o.mu.Unlock()
	}
	loadRecent(rd, r.seen, readSeenOutcome(sigs))
}

// saveRecent writes a memory: its tick, then its order, each put with
// whether it is live (the key's entry is that put) and, if so, its value.
// Every live entry has its put in the order (put, popFront, dropWhile and
// the compaction keep it so), so the map is made again from the order.
func saveRecent[V any](w *statecodec.Writer, c *recentMap[V], put func(*statecodec.Writer, V)) {
	w.Uint(c.tick)
	w.Bool(c.order != nil)
	w.Len(len(c.order))
	for _, k := range c.order {
		w.String(k.key)
		w.Uint(k.tick)
		it, ok := c.m[k.key]
		live := ok && it.tick == k.tick
		w.Bool(live)
		if live {
			put(w, it.v)
		}
	}
}

// loadRecent reads what saveRecent wrote into c, a memory fresh from
// newRecentMap with the bound it was saved with. The puts' ticks ascend
// strictly up to the tick, a key has one live put, and the live entries
// and the order are within what the bound lets them hold.
func loadRecent[V any](rd *statecodec.Reader, c *recentMap[V], get func(*statecodec.Reader) V) {
	tick := rd.Uint()
	hasOrder := rd.Bool()
	n := rd.Len(3)
	switch {
	case rd.Err() != nil:
		return
	case !hasOrder && n > 0:
		rd.Failf("registry: a nil memory order with %d puts", n)
		return
	case n > 2*c.max+64: // compacted past that (recentMap.put)
		rd.Failf("registry: a memory order of %d puts, more than its bound of %d allows", n, c.max)
		return
	}
	if !hasOrder {
		c.tick = tick
		return
	}
	order := make([]recentKey, 0, n)
	m := map[string]recentItem[V]{}
	for i := 0; i < n && rd.Err() == nil; i++ {
		k := recentKey{key: rd.String(), tick: rd.Uint()}
		live := rd.Bool()
		var v V
		if live {
			v = get(rd)
		}
		switch {
		case rd.Err() != nil:
			return
		case k.tick == 0 || k.tick > tick || (i > 0 && k.tick <= order[i-1].tick):
			rd.Failf("registry: a memory's put %d has tick %d, out of order", i, k.tick)
			return
		}
		if live {
			if _, dup := m[k.key]; dup {
				rd.Failf("registry: a memory holds %q twice", k.key)
				return
			}
			m[k.key] = recentItem[V]{v: v, tick: k.tick}
		}
		order = append(order, k)
	}
	if len(m) > c.max {
		rd.Failf("registry: a memory of %d entries, more than its bound of %d", len(m), c.max)
		return
	}
	c.tick, c.order, c.m = tick, order, m
}

func writeHint(w *statecodec.Writer, h Hint) {
	w.String(h.Status)
	w.String(h.ReportedBy)
	w.Time(h.At)
	w.Uint(h.Seq)
}

func readHint(rd *statecodec.Reader) Hint {
	return Hint{Status: rd.String(), ReportedBy: rd.String(), At: rd.Time(), Seq: rd.Uint()}
}

func writeSighting(w *statecodec.Writer, s Sighting) {
	w.String(s.Name)
	w.String(s.Type)
	writeOptInt(w, s.Uptime)
	w.String(s.Peer)
	w.String(s.Transport)
	w.Time(s.At)
	w.Uint(s.Seq)
}

func readSighting(rd *statecodec.Reader) Sighting {
	return Sighting{Name: rd.String(), Type: rd.String(), Uptime: readOptInt(rd), Peer: rd.String(),
		Transport: rd.String(), At: rd.Time(), Seq: rd.Uint()}
}

// writeSeenOutcome writes an answered message with its first answer.
func writeSeenOutcome(w *statecodec.Writer, o seenOutcome) {
	w.String(o.Type)
	w.Uint(o.Seq)
	w.Time(o.At)
	w.Int(int64(o.Status))
	writeReply(w, o.reply)
}

// readSeenOutcome reads what writeSeenOutcome wrote; sigs makes its
// reply's signature again (nil: the memory holds none).
func readSeenOutcome(sigs *restoredSignatures) func(*statecodec.Reader) seenOutcome {
	return func(rd *statecodec.Reader) seenOutcome {
		o := seenOutcome{Type: rd.String(), Seq: rd.Uint(), At: rd.Time()}
		status := rd.Int()
		if status < -1<<31 || status >= 1<<31 {
			rd.Failf("registry: an answer's status %d", status)
		}
		o.Status = int(status)
		o.reply = readReply(rd, sigs)
		return o
	}
}
