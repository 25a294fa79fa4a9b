package events

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestDamagedEventStreamStopsStart: the start's repair looks only at the
// event stream's end. With a block file overwritten in the middle, the
// server dropped the events it could not read, and the node served the
// stream with a hole: acknowledged events gone, balances changed, /healthz
// and the audit content (helper-53). The start now refuses a stream with
// a hole, and says how to rebuild it; moving the stream aside rebuilds it
// from the write-ahead stream, whole.
func TestDamagedEventStreamStopsStart(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	// Blocks of JetStream's smallest size (a quarter of the stream's
	// limit, at least 32 kB), so that the damage is in a block before the
	// last: in the last block it only shortens the stream.
	const n = 200
	cfg := Config{BytesMax: 127_000}
	func() {
		s, err := StartServer(ServerConfig{DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Shutdown()
		nc, err := s.Connect("test")
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		l, err := Open(ctx, nc, cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		envs := make([]*Envelope, n)
		for i := range envs {
			envs[i] = testEnvelope(i+1, "credit.transfer", "agent://a.local", "agent://b.local")
		}
		appendAll(t, l, envs...)
		if err := l.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}()
	streamDirs, err := filepath.Glob(filepath.Join(dir, "jetstream", "jetstream", "*", "streams", "AGLX"))
	if err != nil || len(streamDirs) != 1 {
		t.Fatalf("the event stream's directory: %v %v", streamDirs, err)
	}
	blocks, err := filepath.Glob(filepath.Join(streamDirs[0], "msgs", "1.blk"))
	if more, _ := filepath.Glob(filepath.Join(streamDirs[0], "msgs", "2.blk")); err != nil || len(blocks) == 0 || len(more) == 0 {
		t.Fatalf("the event stream's blocks: %v %v", blocks, err)
	}
	fi, err := os.Stat(blocks[0])
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(blocks[0], os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	garbage := make([]byte, 4<<10)
	for i := range garbage {
		garbage[i] = 0xA5
	}
	if _, err := f.WriteAt(garbage, fi.Size()/3); err != nil {
		t.Fatal(err)
	}
	f.Close()
	os.Remove(filepath.Join(streamDirs[0], "msgs", "index.db")) // as a lost or stale index leaves it

	open := func() (*Log, uint64, error) {
		l, err := Open(ctx, connectTest(t, dir), cfg, nil)
		if err != nil {
			return nil, 0, err
		}
		t.Cleanup(func() { l.Close(context.Background()) })
		info, err := l.stream.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return l, info.State.Msgs, nil
	}
	if _, msgs, err := open(); !errors.Is(err, ErrDamaged) {
		t.Fatalf("Open on an event stream with a hole: %v (%d events); want ErrDamaged", err, msgs)
	}
	// The documented way back: move the stream aside and start again.
	if err := os.Rename(streamDirs[0], filepath.Join(t.TempDir(), "AGLX.damaged")); err != nil {
		t.Fatal(err)
	}
	if _, msgs, err := open(); err != nil || msgs != n {
		t.Fatalf("Open after moving the damaged stream aside: %v, %d events; want all %d rebuilt from the write-ahead stream", err, msgs, n)
	}
}
