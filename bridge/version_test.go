package bridge

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// TestBuildVersion: the version says what Go stamped into the binary, in
// each of the forms the ways of building it leave (OPERATIONS.md, "Which
// build runs"; the stamps as go1.26's `go version -m` shows them).
func TestBuildVersion(t *testing.T) {
	const (
		rev    = "36b772c7ff414dda7ed48d29fdf8816db79c0cac"
		pseudo = "v0.0.0-20261201202837-36b772c7ff41"
		at     = "2026-12-01T20:28:37Z"
	)
	vcs := func(modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "-buildmode", Value: "exe"}, {Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: rev}, {Key: "vcs.time", Value: at}, {Key: "vcs.modified", Value: modified}}
	}
	build := func(version string, settings []debug.BuildSetting) *debug.BuildInfo {
		return &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/aglx/ledger", Version: version}, Settings: settings}
	}
	for _, tc := range []struct {
		name string
		bi   *debug.BuildInfo
		want string
	}{
		{"go build, clean tree", build(pseudo, vcs("false")), pseudo + ", committed " + at + ", go1.26.8"},
		{"go build, changes not committed", build(pseudo+"+dirty", vcs("true")), pseudo + "+dirty, committed " + at + ", go1.26.8"},
		{"go install at a tag", build("v1.2.3", nil), "v1.2.3, go1.26.8"},
		{"a version without the +dirty Go adds", build("v1.2.3", vcs("true")), "v1.2.3+dirty, committed " + at + ", go1.26.8"},
		{"commit stamped, no version", build("(devel)", vcs("false")), "36b772c7ff41, committed " + at + ", go1.26.8"},
		{"commit stamped, no version, changes not committed", build("(devel)", vcs("true")), "36b772c7ff41+dirty, committed " + at + ", go1.26.8"},
		{"a revision shorter than 12", build("(devel)", []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}}), "abc123, go1.26.8"},
		{"go run, go test, -buildvcs=false, a git worktree", build("(devel)", []debug.BuildSetting{{Key: "-buildmode", Value: "exe"}}), "devel (no commit stamped), go1.26.8"},
		{"no main module version at all", build("", nil), "devel (no commit stamped), go1.26.8"},
		{"no Go version", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, "v1.2.3, " + runtime.Version()},
		{"no build information", nil, "unknown (no build information), " + runtime.Version()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := BuildVersion(tc.bi); got != tc.want {
				t.Errorf("BuildVersion(%+v) = %q, want %q", tc.bi, got, tc.want)
			}
		})
	}
}

// TestVersionOfThisBinary: the running binary's description ends with the
// Go version it runs on, whatever was stamped.
func TestVersionOfThisBinary(t *testing.T) {
	if v := Version(); !strings.HasSuffix(v, ", "+runtime.Version()) {
		t.Errorf("Version() = %q, want it to end with %q", v, runtime.Version())
	}
}
