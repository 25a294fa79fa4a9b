package events

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aglx/ledger/protocol"
)

// mountSmallFS mounts a tmpfs of size bytes at a new directory, or skips
// the test where this process may not mount (it needs root): a full disk
// cannot be had otherwise without filling the machine's own.
func mountSmallFS(t *testing.T, size int) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+strconv.Itoa(size)); err != nil {
		t.Skipf("mounting a %d-byte tmpfs for a full disk needs root: %v", size, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmounting %s: %v", dir, err)
		}
	})
	return dir
}

// TestStoreFullIsReported: on a real file system that fills, the embedded
// server's streams fail their writes and then answer no publish at all,
// on a standalone server without shutting JetStream down. The log must
// say so (Healthy, as /healthz asks) and refuse appends at once with the
// reason, instead of answering ok while every batch waited out its
// timeout (helper-61). This also holds the node to the server's log line
// that reports the failure (noteWriteError).
func TestStoreFullIsReported(t *testing.T) {
	const fsSize = 48 << 20
	dir := mountSmallFS(t, fsSize)
	s, nc := startTestServer(t, ServerConfig{DataDir: dir})
	l, err := Open(context.Background(), nc, Config{WALBytesMax: 4 << 20, AckTimeout: 2 * time.Second, StoreDown: s.JetStreamDown}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(context.Background()) })
	appendAll(t, l, testEnvelope(1, "task.result", "agent://a.local", "agent://b.local"))

	// Leave a little room, then write past it.
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	filler := bytes.Repeat([]byte{'x'}, int(st.Bavail)*int(st.Bsize)-256<<10)
	if err := os.WriteFile(filepath.Join(dir, "filler"), filler, 0o600); err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"task_id":"t","result":"` + strings.Repeat("y", 32<<10) + `"}`)
	var refusal error
	for i := 2; i < 200 && refusal == nil; i++ {
		e := testEnvelope(i, "task.result", "agent://a.local", "agent://b.local")
		e.Body = body
		_, refusal = l.Append(context.Background(), e).Wait(context.Background())
	}
	t.Logf("the append that met the full disk: %v; JetStreamDown: %v", refusal, s.JetStreamDown())
	if refusal == nil {
		t.Fatal("200 appends of 32 KiB fitted in 256 KiB of free space")
	}
	if err := s.JetStreamDown(); err == nil || !strings.Contains(err.Error(), "could not write stream") {
		t.Fatalf("JetStreamDown with the disk full = %v; want the stream's write error", err)
	}
	if err := l.Healthy(); err == nil || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("Healthy with the disk full = %v; want the stream's write error", err)
	}
	// Every append from now on is refused at once, not after a timeout for
	// want of an answer, saying why without the store's paths, which are
	// the operator's, not the agents' (helper-104).
	_, err = l.Append(context.Background(), testEnvelope(500, "task.result", "agent://a.local", "agent://b.local")).Wait(context.Background())
	if protocol.StatusOf(err) != protocol.StatusUnavailable || !strings.Contains(err.Error(), "store takes no writes") || strings.Contains(err.Error(), dir) {
		t.Fatalf("an append with the disk full = %v; want 503 saying the store takes no writes, without its paths", err)
	}
}

// TestAStartWithTooLittleDiskSaysSo: JetStream refuses to open the
// streams when the free space cannot hold the write-ahead stream's
// reservation; Open says so with ErrTooLittleDisk, which the node
// completes with what is free (helper-109: the operator had to run df).
func TestAStartWithTooLittleDiskSaysSo(t *testing.T) {
	dir := mountSmallFS(t, 64<<20)
	s, nc := startTestServer(t, ServerConfig{DataDir: dir})
	l, err := Open(context.Background(), nc, Config{}, nil) // the default reservation, a GiB
	if err == nil {
		l.Close(context.Background())
		t.Fatal("the log opened with a GiB to reserve on a 64 MiB file system")
	}
	if !errors.Is(err, ErrTooLittleDisk) || !strings.Contains(err.Error(), "a start needs about") {
		t.Fatalf("Open on a 64 MiB file system: %v; want ErrTooLittleDisk with what a start needs", err)
	}
	if free, ferr := s.StoreFree(); ferr != nil || free == 0 || free > 64<<20 {
		t.Fatalf("StoreFree = %d, %v; want what the small file system has free", free, ferr)
	}
}
