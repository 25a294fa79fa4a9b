//go:build !race

package projections

// raceEnabled: see race_on_test.go.
const raceEnabled = false
