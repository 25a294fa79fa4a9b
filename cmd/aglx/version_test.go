package main

import (
	"strings"
	"testing"

	"github.com/aglx/ledger/bridge"
)

// TestVersion: aglx had no version, and `aglx version` was an unknown
// command (exit 2), so nobody could tell which build a client was. It
// prints the build's description, as --version does too.
func TestVersion(t *testing.T) {
	line := "aglx " + bridge.Version() + "\n"
	for _, tc := range []struct {
		name     string
		args     []string
		wantCode int
		want     string // the whole output, or with wantCode != 0 a part of it
	}{
		{"command", []string{"version"}, 0, line},
		{"double-dash flag", []string{"--version"}, 0, line},
		{"single-dash flag", []string{"-version"}, 0, line},
		{"argument", []string{"version", "aglxd"}, 1, `takes no argument, got "aglxd"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, code := runAglx(t, tc.args...)
			if code != tc.wantCode || (code == 0 && out != tc.want) || (code != 0 && !strings.Contains(out, tc.want)) {
				t.Fatalf("aglx %s = exit %d, %q; want exit %d, %q", strings.Join(tc.args, " "), code, out, tc.wantCode, tc.want)
			}
		})
	}
}
