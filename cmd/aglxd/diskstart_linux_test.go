package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"syscall"
	"testing"

	"github.com/aglx/ledger/events"
)

// TestAStartWithTooLittleDiskSaysWhatIsFree: a start on a data dir with
// less free space than the write-ahead stream's reservation fails, saying
// what a start needs and, since 2026-12-02, what is free there: the
// operator had to run df to compare (helper-109). A tmpfs stands in for a
// small disk; mounting one needs root, so elsewhere the test skips.
func TestAStartWithTooLittleDiskSaysWhatIsFree(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=64m"); err != nil {
		t.Skipf("mounting a tmpfs for a small disk needs root: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	cfg := DefaultConfig()
	cfg.Relay = false
	cfg.DataDir = dir
	cfg.Listen, cfg.UDP, cfg.HTTP, cfg.NATSListen, cfg.TLSListen = "127.0.0.1:0", "", "127.0.0.1:0", "", ""
	m := NewMain(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	err := m.Run(context.Background())
	m.Close(context.Background())
	if err == nil {
		t.Fatal("the node started with a GiB to reserve on a 64 MiB file system")
	}
	if !errors.Is(err, events.ErrTooLittleDisk) || !strings.Contains(err.Error(), "a start needs about") || !strings.Contains(err.Error(), "MiB are free under "+dir) {
		t.Fatalf("the start's error: %v; want what a start needs and what is free under the data dir", err)
	}
}
