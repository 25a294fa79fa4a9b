package projections

import (
	"testing"
	"time"
)

// The stats' round trip is TestFoldStateRoundTrip's, with the tracker's
// and the reputation fold's.

// FuzzLoadStateStats: no input panics the stats' LoadState, nor the stats
// it loads when they are read and fold on.
func FuzzLoadStateStats(f *testing.F) {
	pick := func(f *Folds) StateSaver { return f.Stats }
	addStateSeeds(f, pick)
	after := stateFuzzAfter(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzLoadState(t, data, after, pick, func(f *Folds) uint64 { return f.Stats.LastSeq },
			func(f *Folds) time.Time { return f.Stats.Last })
	})
}
