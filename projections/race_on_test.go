//go:build race

package projections

// raceEnabled: the tests run under the race detector, which makes the
// folds' single-goroutine code some ten times slower and finds nothing in
// it; the longest walks over saved states take fewer points then.
const raceEnabled = true
