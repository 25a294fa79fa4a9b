package projections

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aglx/ledger/ledger/statecodec/statetest"
)

// stateDiffSkip names the fields the folds deliberately do not save, each
// with its reason where the fold saves: scratch of the event being
// applied (Registry.last and answered, Credits.warm, Ledger.warmSink),
// and the ledger's hash indexes' seed and layout, which a load rebuilds
// under a seed of its own (ledger/state.go). Wiring between the folds
// (auth, refusers, registry) is left out too: each fold it points at is
// compared as a fold of its own.
var stateDiffSkip = []string{
	"Registry.last", "Registry.answered",
	"Credits.auth", "Credits.outbox", "Credits.warm",
	"hashIndex.seed", "hashIndex.dir", "hashIndex.depth", "hashIndex.spare", "Ledger.warmSink",
	"Handshakes.refusers", "handshakeBook.auth", "Reputation.registry", "Reputation.handshakes",
}

// freshFolds returns the folds the test harness's node runs, empty, with
// an outbox of their own.
func freshFolds(t *testing.T) (*Folds, *Outbox) {
	h := newHarness(t)
	cfg := h.cfg
	cfg.Outbox = h.out
	return NewFolds(cfg), h.out
}

func applyAll(f *Folds, evs []*Event) {
	for _, ev := range evs {
		for _, p := range f.All() {
			p.Apply(ev)
		}
	}
}

// resumedFolds folds evs up to cut, saves the folds' state, loads it into
// fresh folds, and folds the rest there: a stop and a start from the saved
// state in between. The loaded folds must save to the bytes they were
// loaded from, and with deep, must be the saved ones field for field
// (statetest.Diff, which is slow: the folds' tests of their own save and
// load compare every field at many points, so that equal bytes mean
// equal folds).
func resumedFolds(t *testing.T, evs []*Event, cut int, deep bool) (*Folds, *Outbox) {
	t.Helper()
	before, beforeOut := freshFolds(t)
	applyAll(before, evs[:cut])
	h := StateHeader{Identity: map[string]string{"build": "test"}, Seq: uint64(cut), EventID: "01TEST", SavedAt: time.Unix(1, 0).UTC()}
	b, err := EncodeState(h, before, beforeOut)
	if err != nil {
		t.Fatalf("saving at %d: %v", cut, err)
	}
	after, afterOut := freshFolds(t)
	got, err := LoadState(b, after, afterOut)
	if err != nil {
		t.Fatalf("loading at %d: %v", cut, err)
	}
	if got.Seq != h.Seq || got.EventID != h.EventID || got.Identity["build"] != "test" || !got.SavedAt.Equal(h.SavedAt) {
		t.Fatalf("header read back as %+v, want %+v", got, h)
	}
	if deep {
		if d := statetest.Diff(before, after, stateDiffSkip...); d != "" {
			t.Fatalf("the folds loaded at %d differ from the ones saved (-saved +loaded):\n%s", cut, d)
		}
		if d := statetest.Diff(beforeOut, afterOut, stateDiffSkip...); d != "" {
			t.Fatalf("the outbox loaded at %d differs from the one saved (-saved +loaded):\n%s", cut, d)
		}
	}
	again, err := EncodeState(h, after, afterOut)
	if err != nil || !bytes.Equal(again, b) {
		t.Fatalf("the loaded folds save to other bytes than they were loaded from (err %v)", err)
	}
	applyAll(after, evs[cut:])
	return after, afterOut
}

// referenceTwice is every reference frame, twice over (credit and task
// messages then find accounts), as one stream.
func referenceTwice(t *testing.T) []byte {
	files, err := filepath.Glob("../testdata/reference/*.aglx")
	if err != nil || len(files) == 0 {
		t.Fatalf("reference frames: %v", err)
	}
	var all []byte
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	return append(all, all...)
}

// TestSavedStateFoldsOnAsTheLiveFolds: folds stopped anywhere in a log,
// saved, loaded by a start and fed the rest of the log end where folds that
// never stopped end, field for field and in every snapshot: a start from
// a saved state is a replay, only shorter.
func TestSavedStateFoldsOnAsTheLiveFolds(t *testing.T) {
	// Each case gives the log afresh for every fold that reads it (a fold
	// must not depend on another's changes to an event), decoded from the
	// same frames; the handshake traffic, whose keys are drawn anew at
	// every call, is made once.
	fromFrames := func(frames func(t *testing.T) []byte) func(t *testing.T) func() []*Event {
		return func(t *testing.T) func() []*Event {
			data := frames(t)
			return func() []*Event { return fuzzEvents(data) }
		}
	}
	cases := []struct {
		name   string
		events func(t *testing.T) func() []*Event
		cuts   int // how many cuts; 0: at every event
	}{
		{"signed messages (keys, mints, transfers, a rotation, a zone, a peer's sync)", fromFrames(func(t *testing.T) []byte { return signedSeed(t) }), 0},
		{"the reference frames", fromFrames(referenceTwice), 0},
		{"signed messages, then the reference frames", fromFrames(func(t *testing.T) []byte { return append(signedSeed(t), referenceTwice(t)...) }), 0},
		// Mentors' ratings that move scores, handshakes of every kind and
		// end, copies of signed requests, requests overdue at once.
		{"handshake traffic", func(t *testing.T) func() []*Event {
			evs, _ := handshakeTraffic(t)
			return func() []*Event { return evs }
		}, 24},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			events := c.events(t)
			straight, straightOut := freshFolds(t)
			applyAll(straight, events())
			whole, err := EncodeState(StateHeader{}, straight, straightOut)
			if err != nil {
				t.Fatal(err)
			}
			n := len(events())
			step := 1
			if c.cuts > 0 {
				step = max(1, n/c.cuts)
			}
			if raceEnabled {
				step *= 5 // about a minute at every cut under the race detector
			}
			for cut := 0; cut <= n; cut += step {
				deep := cut == 0 || cut == n/2 || cut+step > n
				resumed, resumedOut := resumedFolds(t, events(), cut, deep)
				if deep {
					if d := statetest.Diff(straight, resumed, stateDiffSkip...); d != "" {
						t.Fatalf("cut at %d of %d: the folds differ from those that never stopped (-straight +resumed):\n%s", cut, n, d)
					}
					if d := statetest.Diff(straightOut, resumedOut, stateDiffSkip...); d != "" {
						t.Fatalf("cut at %d of %d: the outbox differs (-straight +resumed):\n%s", cut, n, d)
					}
				}
				if got, err := EncodeState(StateHeader{}, resumed, resumedOut); err != nil || !bytes.Equal(got, whole) {
					t.Fatalf("cut at %d of %d: the folds save to other bytes than those that never stopped (err %v)", cut, n, err)
				}
				for i, p := range straight.All() {
					want, _ := p.(Snapshotter).Snapshot()
					got, _ := resumed.All()[i].(Snapshotter).Snapshot()
					if !bytes.Equal(want, got) {
						t.Fatalf("cut at %d: the %s snapshot differs:\n%s\n%s", cut, p.Name(), want, got)
					}
				}
			}
		})
	}
}

// TestDamagedStateIsRefused: a saved state that is cut short, changed, or
// not one at all is refused whole, before any fold is touched.
func TestDamagedStateIsRefused(t *testing.T) {
	folds, out := freshFolds(t)
	applyAll(folds, fuzzEvents(signedSeed(t)))
	good, err := EncodeState(StateHeader{Seq: 15, EventID: "x"}, folds, out)
	if err != nil {
		t.Fatal(err)
	}
	flipped := bytes.Clone(good)
	flipped[len(flipped)/2] ^= 1
	// Whole and well formed, but its folds stand past its own position:
	// the runner would hand them events they had seen, and the ledger
	// panics on one (helper-126).
	behind, err := EncodeState(StateHeader{Seq: 3, EventID: "x"}, folds, out)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		b     []byte
		whole bool // its header reads: only the load refuses it
	}{
		{"empty", nil, false},
		{"cut short", good[:len(good)-1], false},
		{"a byte changed", flipped, false},
		{"another file", []byte("-----BEGIN PRIVATE KEY-----\n"), false},
		{"folds past its position", behind, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := ReadStateHeader(c.b); !c.whole && !errors.Is(err, ErrStateDamaged) {
				t.Fatalf("ReadStateHeader: %v, want ErrStateDamaged", err)
			}
			f, o := freshFolds(t)
			if _, err := LoadState(c.b, f, o); !errors.Is(err, ErrStateDamaged) {
				t.Fatalf("LoadState: %v, want ErrStateDamaged", err)
			}
		})
	}
}

// withSection is the saved state b with the section name changed by edit,
// checksum and all: a crafted state, whole and well formed.
func withSection(t *testing.T, b []byte, name string, edit func([]byte) []byte) []byte {
	t.Helper()
	sf, err := ReadState(b)
	if err != nil {
		t.Fatal(err)
	}
	w := newStateWriter(sf.Header)
	w.Len(len(sf.names))
	found := false
	for i, n := range sf.names {
		sec := sf.sections[i]
		if n == name {
			sec, found = edit(sec), true
		}
		w.String(n)
		w.Blob(sec)
	}
	if !found {
		t.Fatalf("no section %q in %q", name, sf.names)
	}
	sum := sha256.Sum256(w.Bytes())
	return append(w.Bytes(), sum[:]...)
}

// TestLoadRefusesALedgerPastTheState: a state whose ledger says it applied
// an event past the state's own position loaded, and the first credit
// event after it panicked the ledger, at every start (helper-126). Each
// fold's own load cannot know the state's position; the file's load
// compares them.
func TestLoadRefusesALedgerPastTheState(t *testing.T) {
	evs := fuzzEvents(signedSeed(t))
	const cut = 5 // the mint: transfers follow
	save := func(n int) []byte {
		folds, out := freshFolds(t)
		applyAll(folds, evs[:n])
		b, err := EncodeState(StateHeader{Seq: uint64(cut), EventID: "x"}, folds, out)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	sectionOf := func(b []byte, name string) []byte {
		sf, err := ReadState(b)
		if err != nil {
			t.Fatal(err)
		}
		return sf.sections[slices.Index(sf.names, name)]
	}
	// The state at the cut, with the ledger of the whole log in it.
	later := sectionOf(save(len(evs)), "ledger")
	crafted := withSection(t, save(cut), "ledger", func([]byte) []byte { return later })
	f, o := freshFolds(t)
	if _, err := LoadState(crafted, f, o); !errors.Is(err, ErrStateDamaged) || !strings.Contains(err.Error(), "its ledger stands at event") {
		t.Fatalf("LoadState of a ledger past the state's position: %v; want it refused", err)
	}
}

// FuzzReadState: any file whose checksum holds (the fuzzer's bytes after
// the magic, with their SHA-256 appended) is read without a panic, and a
// header that reads loads into fresh folds without one, or is refused.
func FuzzReadState(f *testing.F) {
	fresh := func() (*Folds, *Outbox) {
		cfg := stateCfg()
		cfg.Outbox = NewOutbox()
		return NewFolds(cfg), cfg.Outbox
	}
	folds, out := fresh()
	applyAll(folds, fuzzEvents(signedSeed(f)))
	seed, err := EncodeState(StateHeader{Identity: map[string]string{"version": "v"}, Seq: 9, EventID: "x",
		SavedAt: time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC), Digests: map[string]string{"ledger": "00"}}, folds, out)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed[len(stateMagic) : len(seed)-sha256.Size])
	f.Add([]byte{2, 0, 0, 0})
	f.Fuzz(func(t *testing.T, body []byte) {
		b := append([]byte(stateMagic), body...)
		sum := sha256.Sum256(b)
		sf, err := ReadState(append(b, sum[:]...))
		if err != nil {
			if !errors.Is(err, ErrStateDamaged) {
				t.Fatalf("ReadState: %v; want ErrStateDamaged", err)
			}
			return
		}
		folds, out := fresh()
		sf.Load(folds, out) // refused or loaded, never a panic
	})
}
