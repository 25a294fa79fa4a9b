package projections

import "github.com/aglx/ledger/ledger/statecodec"

// StateSaver is a fold whose whole state can be saved and restored
// exactly, so that a start can take up the folds where a stop left them
// instead of replaying the log from its first event.
//
// Exactly means: a fold fresh from its constructor, under the same
// configuration, that loads what SaveState wrote is the same fold as the
// one saved, field for field, including what no query shows (memories of
// recent messages, indexes, counters that decide a later outcome), so that
// it folds every later event as the saved one would have. The tests
// compare the two with statetest.Diff, not only by their snapshots.
//
// SaveState is called with the folds locked (Runner.View), and must not
// change the fold. LoadState is called on a fold fresh from its
// constructor (NewFolds with the same RegistryConfig), before any event;
// on an error the fold is discarded, so it may be left half loaded. It must
// not panic on any input: a damaged file is refused, never folded.
type StateSaver interface {
	SaveState(w *statecodec.Writer) error
	LoadState(r *statecodec.Reader) error
}
