package projections

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/aglx/ledger/ledger/statecodec"
)

// The saved state of the folds: what a clean stop writes so that the next
// start folds only the events after it instead of the whole log
// (docs/DESIGN.md, "Saved fold state").
//
// The file is
//
//	stateMagic
//	header: format, identity (sorted name/value pairs), seq, event id, saved
//	        at, digests (sorted name/value pairs)
//	sections: count, then each fold's name and its SaveState bytes, in the
//	          order the runner applies the folds, and the outbox last
//	SHA-256 of everything before it
//
// all in statecodec's encoding. The checksum catches a file that was cut
// short or damaged on disk; the identity keeps a state from being used by
// anything but the build and configuration that folded it, since a saved
// state is a fold's result under its own rules, and another build's
// rules may fold the same events differently (docs/DESIGN.md, "Changes
// in what an older log replays to").
const stateMagic = "AGLX-FOLD-STATE\n"

// stateFormat is the layout of the file around the sections. The sections'
// own layout needs no version: the identity names the binary that wrote
// them, and only that binary reads them.
const stateFormat = 2 // 2: the header holds the folds' digests

// outboxSection names the outbox's section, after the folds'.
const outboxSection = "outbox"

// StateHeader describes a saved state.
type StateHeader struct {
	// Identity holds what must be the same at the start that loads the
	// state as at the stop that saved it: the build (its version and the
	// SHA-256 of its binary) and the folds' inputs besides the log (the
	// node's name and key, the zones, the peers whose syncs are taken).
	// The caller decides its contents; LoadState leaves comparing them to
	// the caller too, before it loads anything.
	Identity map[string]string
	// Seq is the sequence of the last event the folds had applied, and
	// EventID that event's id: a log whose event there is another is not
	// the one the state was folded from.
	Seq     uint64
	EventID string
	SavedAt time.Time
	// Digests are SHA-256 digests of the saved folds, by fold name, as
	// the saver computed them (the caller decides which, within its
	// bounds): the loader computes them again from what it loaded and
	// refuses a state that differs, so a field a fold saves or loads
	// wrongly shows at the first start that loads it, whoever saved it.
	Digests map[string]string
}

// ErrStateDamaged says a saved state's file is not whole: cut short,
// changed on disk, or not a saved state at all.
var ErrStateDamaged = errors.New("projections: the saved fold state is damaged")

// stateSavers lists what a state file holds, by section name, in order.
func stateSavers(f *Folds, o *Outbox) ([]string, []StateSaver, error) {
	var names []string
	var savers []StateSaver
	for _, p := range f.All() {
		s, ok := p.(StateSaver)
		if !ok {
			return nil, nil, fmt.Errorf("projections: the %s fold cannot save its state", p.Name())
		}
		names, savers = append(names, p.Name()), append(savers, s)
	}
	if o != nil {
		names, savers = append(names, outboxSection), append(savers, outboxState{o, f.Registry})
	}
	return names, savers, nil
}

// outboxState saves and loads the outbox with the folds: a kept reply that
// the node signs as it is taken needs the registry's node key to be signed
// after a load (Outbox.LoadState).
type outboxState struct {
	o   *Outbox
	reg *Registry
}

func (s outboxState) SaveState(w *statecodec.Writer) error { return s.o.SaveState(w) }
func (s outboxState) LoadState(r *statecodec.Reader) error { return s.o.LoadState(r, s.reg) }

// EncodeState writes the state of every fold in f, and of the outbox o if
// not nil, under header h. Call it with the folds locked (Runner.View),
// where h.Seq is the position they stand at.
func EncodeState(h StateHeader, f *Folds, o *Outbox) ([]byte, error) {
	names, savers, err := stateSavers(f, o)
	if err != nil {
		return nil, err
	}
	w := newStateWriter(h)
	w.Len(len(savers))
	var sw statecodec.Writer
	for i, s := range savers {
		sw = *statecodec.NewWriter(sw.Bytes()[:0])
		if err := s.SaveState(&sw); err != nil {
			return nil, fmt.Errorf("projections: saving the %s state: %w", names[i], err)
		}
		w.String(names[i])
		w.Blob(sw.Bytes())
	}
	b := w.Bytes()
	sum := sha256.Sum256(b)
	return append(b, sum[:]...), nil
}

// newStateWriter starts a state's file: the magic and the header.
func newStateWriter(h StateHeader) *statecodec.Writer {
	w := statecodec.NewWriter([]byte(stateMagic))
	w.Uint(stateFormat)
	writePairs(w, h.Identity)
	w.Uint(h.Seq)
	w.String(h.EventID)
	w.Time(h.SavedAt)
	writePairs(w, h.Digests)
	return w
}

// writePairs writes m's names and values in the names' order.
func writePairs(w *statecodec.Writer, m map[string]string) {
	w.Len(len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		w.String(k)
		w.String(m[k])
	}
}

// SavedState is a saved state's file, checked whole (ReadState) and split
// into its header and sections, which alias the file's bytes.
type SavedState struct {
	Header   StateHeader
	names    []string
	sections [][]byte
}

// ReadState checks a saved state's file whole (its checksum) and reads its
// header, without loading anything: the caller compares the identity and
// the event before it lets Load touch the folds. b must not change while
// the SavedState is used.
func ReadState(b []byte) (*SavedState, error) {
	if len(b) < len(stateMagic)+sha256.Size || !bytes.HasPrefix(b, []byte(stateMagic)) {
		return nil, fmt.Errorf("%w: not a saved fold state", ErrStateDamaged)
	}
	body, sum := b[:len(b)-sha256.Size], b[len(b)-sha256.Size:]
	if got := sha256.Sum256(body); !bytes.Equal(got[:], sum) {
		return nil, fmt.Errorf("%w: its checksum does not match (cut short, or changed)", ErrStateDamaged)
	}
	r := statecodec.NewReader(body[len(stateMagic):])
	if v := r.Uint(); r.Err() == nil && v != stateFormat {
		return nil, fmt.Errorf("%w: format %d, where this build reads %d", ErrStateDamaged, v, stateFormat)
	}
	sf := &SavedState{}
	sf.Header.Identity = readPairs(r)
	sf.Header.Seq = r.Uint()
	sf.Header.EventID = r.String()
	sf.Header.SavedAt = r.Time()
	if d := readPairs(r); len(d) > 0 {
		sf.Header.Digests = d
	}
	n := r.Len(2)
	for range n {
		sf.names = append(sf.names, r.String())
		sf.sections = append(sf.sections, r.BlobView())
	}
	if err := r.Done(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStateDamaged, err)
	}
	return sf, nil
}

// readPairs reads what writePairs wrote.
func readPairs(r *statecodec.Reader) map[string]string {
	n := r.Len(2)
	m := make(map[string]string, n)
	for range n {
		k := r.String()
		m[k] = r.String()
	}
	return m
}

// ReadStateHeader is ReadState's header alone.
func ReadStateHeader(b []byte) (StateHeader, error) {
	sf, err := ReadState(b)
	if err != nil {
		return StateHeader{}, err
	}
	return sf.Header, nil
}

// LoadState is ReadState, then Load: it returns the header.
func LoadState(b []byte, f *Folds, o *Outbox) (StateHeader, error) {
	sf, err := ReadState(b)
	if err != nil {
		return StateHeader{}, err
	}
	return sf.Header, sf.Load(f, o)
}

// Load loads the saved state into f and o, which must be fresh from
// NewFolds and NewOutbox under the configuration the state was saved with
// (the header's identity, which the caller has compared). On an error f
// and o are half loaded and must be discarded.
func (sf *SavedState) Load(f *Folds, o *Outbox) error {
	names, savers, err := stateSavers(f, o)
	if err != nil {
		return err
	}
	if !slices.Equal(names, sf.names) {
		return fmt.Errorf("%w: it holds %q, where this build keeps %q", ErrStateDamaged, sf.names, names)
	}
	for i, s := range savers {
		r := statecodec.NewReader(sf.sections[i])
		if err := s.LoadState(r); err != nil {
			return fmt.Errorf("projections: loading the %s state: %w", names[i], err)
		}
		if err := r.Done(); err != nil {
			return fmt.Errorf("projections: loading the %s state: %w", names[i], err)
		}
	}
	for _, p := range loadedPositions(f, o) {
		if p.seq > sf.Header.Seq {
			return fmt.Errorf("%w: its %s stands at event %d, past the state's own position, %d", ErrStateDamaged, p.name, p.seq, sf.Header.Seq)
		}
	}
	return nil
}

// position is the last event a loaded fold (or the outbox) says it saw.
type position struct {
	name string
	seq  uint64
}

// loadedPositions lists where the loaded folds stand. None may stand past
// the state's own position, where the runner takes up the log: the folds
// would meet the events after it as events they had seen, and the ledger
// panics on one (an event applied twice is a fault of the runner), while
// the others would skip it. Each fold's own load cannot know the state's
// position, so a state crafted with a ledger ahead of it loaded, and
// crashed the node at every start (helper-126).
func loadedPositions(f *Folds, o *Outbox) []position {
	ps := []position{
		{"ledger", f.Credits.L.Seq()},
		{"handshakes", f.Handshakes.book.lastSeq},
		{"reputation", f.Reputation.lastSeq},
		{"stats", f.Stats.LastSeq},
	}
	if es := f.Registry.changes.entries; len(es) > 0 {
		ps = append(ps, position{"registry's change log", es[len(es)-1].seq})
	}
	if o != nil {
		// Both in log order: the last of each is the highest.
		if n := len(o.order); n > 0 {
			ps = append(ps, position{"outbox", o.order[n-1]})
		}
		if n := len(o.refusals); n > 0 {
			ps = append(ps, position{"outbox's refusals", o.refusals[n-1]})
		}
	}
	return ps
}
