package bridge

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// Version describes the running binary's build (BuildVersion of its
// debug.ReadBuildInfo): what aglxd --version, aglx version, aglxd's first
// log line and GET /v1/node's "version" say.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	return BuildVersion(bi)
}

// revisionLen is how much of a commit hash a version shows, as Go's
// pseudo-versions do.
const revisionLen = 12 // hex digits

// BuildVersion describes the build bi on one line: the main module's
// version when the build knows one; else the commit it was built from,
// 12 hex digits, with "+dirty" when the tree had changes not committed;
// then the commit's time and the Go version, each when known. A nil bi
// (a binary built without module support) says so.
//
// What Go stamps depends on how the binary was made (OPERATIONS.md,
// "Which build runs"): `go build` and `go install` in a git checkout
// stamp the commit, and since Go 1.24 a pseudo-version made of it
// (v0.0.0-20261201202837-36b772c7ff41+dirty); `go install
// MODULE@v1.2.3` stamps the tag and no commit; `go run`, go test's
// binaries, -buildvcs=false and a linked git worktree stamp neither, and
// the version is then "devel".
func BuildVersion(bi *debug.BuildInfo) string {
	if bi == nil {
		return "unknown (no build information), " + runtime.Version()
	}
	var rev, at string
	var dirty bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	v := bi.Main.Version
	switch {
	case v != "" && v != "(devel)":
	case rev != "":
		v = rev[:min(len(rev), revisionLen)]
	default:
		v = "devel (no commit stamped)"
	}
	if dirty && !strings.HasSuffix(v, "+dirty") {
		// Go adds it to the versions it makes; one made otherwise may lack it.
		v += "+dirty"
	}
	parts := []string{v}
	if at != "" {
		parts = append(parts, "committed "+at)
	}
	goVersion := bi.GoVersion
	if goVersion == "" {
		goVersion = runtime.Version()
	}
	return strings.Join(append(parts, goVersion), ", ")
}
