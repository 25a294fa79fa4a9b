package projections

import (
	"fmt"
	"maps"
	"slices"

	"github.com/aglx/ledger/ledger/statecodec"
)

var _ StateSaver = (*Stats)(nil)

// SaveState implements StateSaver: every count, the maps by key, and the
// span of receive times. It does not change s.
func (s *Stats) SaveState(w *statecodec.Writer) error {
	w.Uint(s.Events)
	writeUintsByName(w, s.ByType)
	writeUintsByName(w, s.BySender)
	w.Uint(s.BySenderOther)
	writeUintsByName(w, s.ByTransport)
	w.Time(s.First)
	w.Time(s.Last)
	w.Uint(s.LastSeq)
	return nil
}

// LoadState implements StateSaver. More senders by name than
// StatsSendersMax is refused: Apply never counts that many, and the bound
// is what keeps /v1/stats small.
func (s *Stats) LoadState(r *statecodec.Reader) error {
	events := r.Uint()
	byType := readUintsByName(r, "the counts by type")
	bySender := readUintsByName(r, "the counts by sender")
	other := r.Uint()
	byTransport := readUintsByName(r, "the counts by transport")
	first, last, lastSeq := r.Time(), r.Time(), r.Uint()
	if r.Err() == nil && len(bySender) > StatsSendersMax {
		stateFailf(r, "%d senders counted by name, more than %d", len(bySender), StatsSendersMax)
	}
	if err := r.Err(); err != nil {
		return fmt.Errorf("stats: loading the saved state: %w", err)
	}
	s.Events, s.ByType, s.BySender, s.BySenderOther, s.ByTransport = events, byType, bySender, other, byTransport
	s.First, s.Last, s.LastSeq = first, last, lastSeq
	return nil
}

// writeUintsByName writes a map of figures by name in the order of its
// names, so that the same map always gives the same bytes: the stats'
// counts, and the handshake tracker's totals and indexes (a name to a
// seq).
func writeUintsByName(w *statecodec.Writer, m map[string]uint64) {
	names := slices.Sorted(maps.Keys(m))
	w.Len(len(names))
	for _, name := range names {
		w.String(name)
		w.Uint(m[name])
	}
}

// readUintsByName reads what writeUintsByName wrote, always into a map
// (the folds make theirs in their constructors and never drop them).
// Names out of order or repeated are refused: writeUintsByName never
// writes them, and a repeated name would silently lose a figure.
func readUintsByName(r *statecodec.Reader, what string) map[string]uint64 {
	n := r.Len(2) // a name's length and a count: 2 bytes
	m := make(map[string]uint64, n)
	prev := ""
	for i := 0; i < n && r.Err() == nil; i++ {
		name, v := r.String(), r.Uint()
		if r.Err() == nil && i > 0 && name <= prev {
			stateFailf(r, "%s: %q is out of order", what, name)
		}
		m[name] = v
		prev = name
	}
	return m
}

// stateFailf fails r with a fold's own reason for refusing a saved state;
// LoadState wraps it with the fold's name, so it carries no prefix.
func stateFailf(r *statecodec.Reader, format string, args ...any) {
	r.Fail(fmt.Errorf(format, args...))
}
