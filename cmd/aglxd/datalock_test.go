//go:build unix

package main

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
)

// TestOneNodePerDataDir: a second node on a data dir in use refuses to
// start, naming the dir; it starts once the first has stopped. Two nodes
// on one store each handed out the same sequences, and one lost events it
// had acknowledged.
func TestOneNodePerDataDir(t *testing.T) {
	dir := t.TempDir()
	first := startNode(t, dir)

	cfg := first.cfg
	cfg.Listen, cfg.UDP, cfg.HTTP, cfg.NATSListen, cfg.TLSListen = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	second := NewMain(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	err := second.Run(context.Background())
	second.Close(context.Background())
	if err == nil || !strings.Contains(err.Error(), "in use by another aglxd") || !strings.Contains(err.Error(), dir) {
		t.Fatalf("a second node on %s: %v; want a refusal naming the dir", dir, err)
	}

	if err := first.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	startNode(t, dir) // fails the test if it cannot start
}
