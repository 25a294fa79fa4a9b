package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFailedStartKeepsTheRecordOfAnUncleanStop: a start after a crash
// that fails before it opens the store (here, a --zones file that is not
// there) has neither recovered the store nor repaired the event stream.
// It used to remove the crashed run's record as it stopped, and the start
// after it showed the recovery's warnings with no word of why.
func TestFailedStartKeepsTheRecordOfAnUncleanStop(t *testing.T) {
	dir := t.TempDir()
	crashed := []byte(`{"pid":999999,"started":"2026-12-01T00:00:00Z","version":"crashed build"}`)
	if err := os.WriteFile(filepath.Join(dir, runningFile), crashed, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.DataDir = dir
	cfg.Listen, cfg.UDP, cfg.HTTP, cfg.NATSListen, cfg.TLSListen = "127.0.0.1:0", "", "", "", ""
	cfg.Zones = filepath.Join(dir, "no-such-zones.json")
	m := NewMain(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	err := m.Run(context.Background())
	if cerr := m.Close(context.Background()); cerr != nil {
		t.Fatal(cerr)
	}
	if err == nil || !strings.Contains(err.Error(), "--zones") {
		t.Fatalf("Run = %v, want the missing --zones file refused", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, runningFile))
	if err != nil {
		t.Fatalf("the record of the run that did not stop cleanly is gone after a start that never opened the store: %v", err)
	}
	if !strings.Contains(string(b), "crashed build") {
		t.Fatalf("the record is %s, want the crashed run's", b)
	}

	// A start that gets through: it says so, and its clean stop removes it.
	var logs strings.Builder
	cfg.Zones = ""
	m = NewMain(cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	if err := m.Run(context.Background()); err != nil {
		m.Close(context.Background())
		t.Fatal(err)
	}
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "the last run here did not stop cleanly") || !strings.Contains(logs.String(), "crashed build") {
		t.Fatalf("the start after does not name the run that did not stop cleanly:\n%s", logs.String())
	}
	if _, err := os.Stat(filepath.Join(dir, runningFile)); !os.IsNotExist(err) {
		t.Fatalf("a clean stop left the record: %v", err)
	}
}
