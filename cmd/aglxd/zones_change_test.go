package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/aglx/ledger/projections"
)

// TestZoneChangeIsSaid: a start under a zone configuration other than the
// one the data dir last ran with says so, once; the same one again, or the
// same zones in another order, says nothing. A restart without --zones
// emptied every zone without a word (helper-81).
func TestZoneChangeIsSaid(t *testing.T) {
	var logged bytes.Buffer
	cfg := DefaultConfig()
	cfg.DataDir = t.TempDir()
	m := &Main{cfg: cfg, lg: slog.New(slog.NewTextHandler(&logged, nil))}
	secret := []byte("a zone secret of enough bytes!!")
	a := projections.Zone{ID: "a", Secret: secret, MinReputation: 0.5, Role: "member"}
	b := projections.Zone{ID: "b", Secret: secret, MinReputation: 0.6, Role: "member"}
	stricter := a
	stricter.MinReputation = 0.6
	for i, step := range []struct {
		zones []projections.Zone
		warn  bool
	}{
		{[]projections.Zone{a, b}, false}, // the first start records it
		{[]projections.Zone{b, a}, false}, // the same zones
		{[]projections.Zone{stricter, b}, true},
		{nil, true}, // no --zones at all
		{nil, false},
	} {
		logged.Reset()
		if err := m.noteZoneChange(step.zones); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(logged.String(), "zone configuration differs"); got != step.warn {
			t.Fatalf("start %d: warned %v, want %v: %s", i, got, step.warn, logged.String())
		}
	}
}
