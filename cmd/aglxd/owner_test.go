package main

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"testing"
)

// TestNodeRefusesAnotherNameOnItsLog: the README once suggested starting
// the node as registry://global.aglx.net to see the reference examples
// answered, which on an existing --data replayed every mint of the node
// under registry://localhost as refused: every balance was gone and the
// audit said all was well. The start now refuses, naming both names,
// unless the operator takes the store over (--take-over-store).
func TestNodeRefusesAnotherNameOnItsLog(t *testing.T) {
	dir := t.TempDir()
	m := startNode(t, dir)
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Relay, cfg.DataDir, cfg.Name = false, dir, "registry://global.aglx.net"
	cfg.Listen, cfg.UDP, cfg.HTTP, cfg.NATSListen, cfg.TLSListen = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	other := NewMain(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	err := other.Run(context.Background())
	other.Close(context.Background())
	if err == nil || !strings.Contains(err.Error(), "--name registry://global.aglx.net") || !strings.Contains(err.Error(), "registry://localhost") {
		t.Fatalf("a start under another name on the node's store: %v; want a refusal naming both names", err)
	}
	startNode(t, dir).Close(context.Background()) // and under its own name it starts

	// An operator who means it takes the store over.
	cfg.TakeOverStore = true
	taken := NewMain(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := taken.Run(context.Background()); err != nil {
		taken.Close(context.Background())
		t.Fatalf("--take-over-store: %v", err)
	}
	taken.Close(context.Background())
}

// TestLostKeyFileLeavesNoNewKey: a start on the node's store without its
// key file used to write a new key before the store refused it, so an
// operator restoring the old key from a backup found a file in the way (or,
// worse, kept the new one). The refusal now names the missing file and
// writes nothing; the restored key starts the node again.
func TestLostKeyFileLeavesNoNewKey(t *testing.T) {
	dir := t.TempDir()
	m := startNode(t, dir)
	keyPath := m.cfg.NodeKeyPath()
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	old, err := os.ReadFile(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(keyPath); err != nil {
		t.Fatal(err)
	}
	cfg := m.cfg
	lost := NewMain(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	err = lost.Run(context.Background())
	lost.Close(context.Background())
	if err == nil || !strings.Contains(err.Error(), "key file is missing") || !strings.Contains(err.Error(), keyPath) {
		t.Fatalf("a start on the node's store without its key file: %v; want a refusal naming the missing file", err)
	}
	if _, err := os.Stat(keyPath); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the refused start left a key file behind: %v", err)
	}
	if err := os.WriteFile(keyPath, old, 0o600); err != nil {
		t.Fatal(err)
	}
	startNode(t, dir).Close(context.Background()) // the restored key starts it
}
