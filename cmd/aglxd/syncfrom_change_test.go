package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestSyncFromChangeIsSaid: a start whose --sync-from names other peers
// than the data dir last ran with says which were added and which
// removed, once; the same peers again, in any order, say nothing. A peer
// added has its past syncs merged on replay without any other word: the
// warning of refused syncs cannot see it, since none is refused any more.
func TestSyncFromChangeIsSaid(t *testing.T) {
	var logged bytes.Buffer
	cfg := DefaultConfig()
	cfg.DataDir = t.TempDir()
	m := &Main{cfg: cfg, lg: slog.New(slog.NewTextHandler(&logged, nil))}
	const a, b, c = "registry://a.example", "registry://b.example", "registry://c.example"
	for i, step := range []struct {
		peers          []string
		added, removed string // "" for no warning
	}{
		{[]string{a, b}, "", ""}, // the first start records them
		{[]string{b, a, a}, "", ""},
		{[]string{a, b, c}, c, "-"},
		{[]string{c}, "-", a + " " + b},
		{nil, "-", c},
		{nil, "", ""},
	} {
		logged.Reset()
		if err := m.noteSyncFromChange(step.peers); err != nil {
			t.Fatal(err)
		}
		out := logged.String()
		warned := strings.Contains(out, "--sync-from names other peers")
		if want := step.added != "" || step.removed != ""; warned != want {
			t.Fatalf("start %d: warned %v, want %v: %s", i, warned, want, out)
		}
		if !warned {
			continue
		}
		for key, want := range map[string]string{"added": step.added, "removed": step.removed} {
			if want == "-" {
				want = ""
			}
			if !strings.Contains(out, key+"=\""+want+"\"") && !strings.Contains(out, key+"="+want+" ") {
				t.Errorf("start %d: %s should be %q: %s", i, key, want, out)
			}
		}
	}
}
