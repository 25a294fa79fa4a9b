package main

import (
	"github.com/aglx/ledger/bridge"
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
	// Two peers never share a frame (helper-121: one's was removed when
	// the other took the rotation).
	if a, b := framePath(path, "sha256:"+hexA, "registry://backup_x.local"), framePath(path, "sha256:"+hexA, "registry://backup-x.local"); a == b {
		t.Errorf("two peers share the frame %s", a)
	}
}

// TestPrintedSendCommandQuotes: the aglx send command a rotation prints
// for a peer that did not take it is pasted into a shell, so the peer's
// trust is given as --sync-to parsed it and quoted where a shell needs it
// (helper-121: a CA path with '+' or ';' came out wrong or not at all).
func TestPrintedSendCommandQuotes(t *testing.T) {
	tests := []struct {
		peer bridge.Peer
		want string
	}{
		{bridge.Peer{Addr: "10.0.0.2:2596", CA: "/etc/aglx/peer+b.pem"}, "--addr 10.0.0.2:2596 --ca /etc/aglx/peer+b.pem"},
		{bridge.Peer{Addr: "10.0.0.2:2596", CA: "/etc/my certs/a;b.pem"}, "--addr 10.0.0.2:2596 --ca '/etc/my certs/a;b.pem'"},
		{bridge.Peer{Addr: "10.0.0.2:2596", Pin: "ab01", CA: "/x/it's.pem"}, `--addr 10.0.0.2:2596 --ca '/x/it'\''s.pem' --pin ab01`},
		{bridge.Peer{Addr: "10.0.0.2:2594", Plain: true}, "--addr PEER-HOST:PEER-TLS-PORT --ca PEER-DATA/tls/cert.pem"},
	}
	for _, tt := range tests {
		if got := sendTrust(tt.peer); got != tt.want {
			t.Errorf("sendTrust(%+v) = %s, want %s", tt.peer, got, tt.want)
		}
	}
}
