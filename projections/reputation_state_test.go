package projections

import (
	"testing"
	"time"
)

// The reputation fold's round trip is TestFoldStateRoundTrip's, with the
// tracker's and the stats'.

// FuzzLoadStateReputation: no input panics the reputation fold's
// LoadState, nor the fold it loads when it is read and folds on.
func FuzzLoadStateReputation(f *testing.F) {
	pick := func(f *Folds) StateSaver { return f.Reputation }
	addStateSeeds(f, pick)
	after := stateFuzzAfter(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzLoadState(t, data, after, pick, func(f *Folds) uint64 { return f.Reputation.lastSeq },
			func(*Folds) time.Time { return regT0 })
	})
}
