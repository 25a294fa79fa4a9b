package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestRotationFilesAreFoundByName: a rotation's files beside the node key
// were found by a glob, which a key path holding '[' or '*' broke (frames
// left by one rotation did not stop the next, which overwrote them), and
// whose pattern took any file or directory named like an old key for one
// (helper-119). They are now listed by name, an old key only with a key
// id's hex, and only the key file's own.
func TestRotationFilesAreFoundByName(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "k[1]*")
	if err := os.MkdirAll(filepath.Join(dir, "node.key.retired-dir"), 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "node.key")
	const hexA, hexB = "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"
	files := []string{
		"node.key",
		"node.key.retired-" + hexA,
		"node.key.retired-notes.txt",
		"other.key.retired-" + hexB,
		"node.key.rotation-" + hexA + "-to-registry---a.aglx",
		"node.key.rotation-" + hexB + "-to-registry---b.aglx",
		"other.key.rotation-" + hexA + "-to-registry---a.aglx",
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	names := func(paths []string) []string {
		var out []string
		for _, p := range paths {
			out = append(out, filepath.Base(p))
		}
		slices.Sort(out)
		return out
	}
	tests := []struct {
		name string
		got  []string
		want []string
	}{
		{"old keys", names(retiredKeys(path)), []string{"node.key.retired-" + hexA}},
		{"every frame", names(framesBefore(path, "")), []string{files[4], files[5]}},
		{"frames of other rotations than the one to A", names(framesBefore(path, "sha256:"+hexA)), []string{files[5]}},
	}
	for _, tt := range tests {
		if !slices.Equal(tt.got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, tt.got, tt.want)
		}
	}
}
