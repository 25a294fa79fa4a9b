package projections

import (
	"fmt"
	"maps"
	"slices"

	"github.com/aglx/ledger/ledger/statecodec"
	"github.com/aglx/ledger/protocol"
)

// The Credits fold's saved state (projection snapshots, StateSaver): the
// id of the last event it refused, its memory of refused signed messages
// (refused.go), and the ledger (ledger.Ledger.SaveState).
//
// Not saved, and so left as NewCredits makes them: the authenticator and
// the outbox (wiring to the registry and the replies, each saved, if at
// all, by its owner), Observe (a callback), the signature window (the
// registry's configuration), and warm, Warm's scratch, which holds nothing
// between two stretches.

var _ StateSaver = (*Credits)(nil)

// SaveState implements StateSaver.
func (c *Credits) SaveState(w *statecodec.Writer) error {
	w.String(c.refusedID)
	if err := c.refused.save(w); err != nil {
		return err
	}
	return c.L.SaveState(w)
}

// LoadState implements StateSaver.
func (c *Credits) LoadState(r *statecodec.Reader) error {
	c.refusedID = r.String()
	c.refused = newRefusedCopies()
	c.refused.load(r)
	if err := r.Err(); err != nil {
		return fmt.Errorf("credits: loading the memory of refused messages: %w", err)
	}
	return c.L.LoadState(r)
}

// refusedNameMinBytes is the fewest bytes a name of the memory's order
// takes saved: its length and whether it is remembered.
const refusedNameMinBytes = 2

// save writes the memory. The names are written in their order, each with
// its refusal if it is still remembered, so that byName is written once
// and in a fixed order; the names before head, forgotten and cleared, are
// written as their count. perSender is not written: it counts byName's
// entries by sender, and is counted again on load.
func (m *refusedCopies) save(w *statecodec.Writer) error {
	w.Time(m.now)
	w.Time(m.sweep)
	w.Len(m.head)
	live := m.order[m.head:]
	w.Len(len(live))
	if len(m.order) == 0 {
		// Empty, order is nil until the first refusal and an empty slice
		// once compacted to nothing: the same to every use, but the fold
		// restored is to be the one saved.
		w.Bool(m.order == nil)
	}
	remembered := 0
	for _, name := range live {
		w.String(name)
		c, ok := m.byName[name]
		w.Bool(ok)
		if !ok {
			continue
		}
		remembered++
		w.String(c.from)
		w.Uint(c.seq)
		w.Int(int64(c.status))
		w.Time(c.stamp)
		w.Time(c.expires)
	}
	if remembered != len(m.byName) {
		// Every refusal is appended to order when it is remembered, and
		// leaves byName only from there: a refusal outside it would never
		// be forgotten, and is not written.
		return fmt.Errorf("credits: %d refused messages remembered, %d of them in order", len(m.byName), remembered)
	}
	w.Len(len(m.seals))
	for _, from := range slices.Sorted(maps.Keys(m.seals)) {
		w.String(from)
		w.Time(m.seals[from])
	}
	return nil
}

// load reads what save wrote into m, fresh from newRefusedCopies, and
// checks it: the bounds the memory keeps, each name remembered once, the
// seals in order. A count of cleared names that forgetOldest would have
// compacted away is refused, which also bounds what it allocates.
func (m *refusedCopies) load(r *statecodec.Reader) {
	m.now = r.Time()
	m.sweep = r.Time()
	head := r.Uint()
	n := r.Len(refusedNameMinBytes)
	if r.Err() != nil {
		return
	}
	if total := head + uint64(n); head > 1024 && head > total/2 {
		r.Fail(fmt.Errorf("%d forgotten names before %d others, which the memory compacts", head, n))
		return
	}
	m.head = int(head)
	if head+uint64(n) > 0 || !r.Bool() {
		m.order = make([]string, m.head, m.head+n)
	}
	for range n {
		name := r.String()
		m.order = append(m.order, name)
		if !r.Bool() {
			continue
		}
		c := refusedCopy{from: r.String(), seq: r.Uint()}
		status := r.Int()
		c.stamp = r.Time()
		c.expires = r.Time()
		if r.Err() != nil {
			return
		}
		if _, dup := m.byName[name]; dup || status < 100 || status > 999 {
			r.Fail(fmt.Errorf("the refused message %q is remembered twice, or with status %d", name, status))
			return
		}
		c.status = protocol.Status(status)
		m.byName[name] = c
		if m.perSender[c.from]++; m.perSender[c.from] > RefusedCopiesPerSenderMax {
			r.Fail(fmt.Errorf("more than %d refused messages of %q remembered", RefusedCopiesPerSenderMax, c.from))
			return
		}
	}
	if len(m.byName) > RefusedCopiesMax {
		r.Fail(fmt.Errorf("%d refused messages remembered, more than %d", len(m.byName), RefusedCopiesMax))
		return
	}
	n = r.Len(2)
	prev := ""
	for i := range n {
		from := r.String()
		ts := r.Time()
		if r.Err() != nil {
			return
		}
		if i > 0 && from <= prev {
			r.Fail(fmt.Errorf("the seals are out of order at %q", from))
			return
		}
		prev = from
		m.seals[from] = ts
	}
}
