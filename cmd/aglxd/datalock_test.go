//go:build unix

package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
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
	if err == nil || !strings.Contains(err.Error(), "is in use: another aglxd holds it (pid "+strconv.Itoa(os.Getpid())+")") || !strings.Contains(err.Error(), dir) {
		t.Fatalf("a second node on %s: %v; want a refusal naming the dir", dir, err)
	}

	if err := first.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	startNode(t, dir) // fails the test if it cannot start
}

// TestDataDirInUseNamesItsHolder: the refusal says who holds the lock as
// far as it can tell, instead of naming the pid in the file as an aglxd's:
// that pid is the last node's to start there, which may have ended, or be
// another program now, while a backup holds the lock (helper-93).
func TestDataDirInUseNamesItsHolder(t *testing.T) {
	if !procMounted() {
		t.Skip("no /proc to tell processes by")
	}
	for _, tc := range []struct {
		name, pid, want string
	}{
		{"the pid of no process", "4194311", "pid 4194311, the last aglxd to start there, has ended"},
		{"the pid of another program", "1", "pid 1, the last aglxd to start there, is now another program"},
		{"no pid", "", "another process holds its lock;"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, dataLockName)
			if err := os.WriteFile(path, []byte(tc.pid+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
				t.Fatal(err) // as flock(1) holds it during a backup
			}
			_, err = lockDataDir(dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("lockDataDir with the lock held elsewhere: %v; want it to say %q", err, tc.want)
			}
		})
	}
}
