package events

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aglx/ledger/protocol"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// connectTest starts an embedded server on dir and connects as the node.
func connectTest(t *testing.T, dir string) *nats.Conn {
	t.Helper()
	return connectTestServer(t, ServerConfig{DataDir: dir})
}

// connectTestServer starts an embedded server as cfg says and connects as
// the node; both end with the test.
func connectTestServer(t *testing.T, cfg ServerConfig) *nats.Conn {
	t.Helper()
	_, nc := startTestServer(t, cfg)
	return nc
}

// startTestServer is connectTestServer that also gives the server.
func startTestServer(t *testing.T, cfg ServerConfig) (*Server, *nats.Conn) {
	t.Helper()
	s, err := StartServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	nc, err := s.Connect("test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return s, nc
}

// stopWorkers stops l's committer and publisher, so that a test can write
// to the write-ahead stream alone, as a crash between the streams leaves it.
func stopWorkers(l *Log) {
	close(l.stop)
	l.wg.Wait()
}

// writeWALOnly commits a batch of n events (test envelopes from first on)
// to the write-ahead stream without publishing them to the event stream.
func writeWALOnly(t *testing.T, l *Log, first, n int) {
	t.Helper()
	b := &batch{firstSeq: l.nextSeq}
	for j := range n {
		e := testEnvelope(first+j, "credit.transfer", "agent://a.local", "agent://b.local")
		e.Seq = b.firstSeq + uint64(j)
		b.events = append(b.events, e)
	}
	walSeq, err := l.writeBatch(b, encodeBatch(nil, b))
	if err != nil {
		t.Fatal(err)
	}
	l.walLast = walSeq
	l.nextSeq += uint64(n)
}

// appendAndClose opens the log on nc, appends one event all the way to the
// event stream, and closes the log.
func appendAndClose(t *testing.T, nc *nats.Conn) {
	t.Helper()
	ctx := context.Background()
	l, err := Open(ctx, nc, Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	appendAll(t, l, testEnvelope(1, "task.assign", "agent://a.local", "agent://b.local"))
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestRecoverCopiesWhatTheEventStreamLacks writes batches to the
// write-ahead stream that never reach the event stream (what a crash
// between the two leaves behind) and checks that opening the log again
// copies them over, at the sequences they were promised, and that appends
// then continue after them.
func TestRecoverCopiesWhatTheEventStreamLacks(t *testing.T) {
	dir := t.TempDir()
	nc := connectTest(t, dir)
	ctx := context.Background()

	// A first event goes all the way.
	appendAndClose(t, nc)

	// Two more batches reach only the write-ahead stream.
	l, err := Open(ctx, nc, Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	stopWorkers(l) // no committer, no publisher: we play the committer
	for i, n := range []int{3, 2} {
		writeWALOnly(t, l, 10*(i+1), n)
	}
	if last, _ := l.LastSeq(ctx); last != 1 {
		t.Fatalf("before recovery the event stream ends at %d, want 1", last)
	}

	// Opening the log again repairs the event stream.
	l, err = Open(ctx, nc, Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx)
	if last, _ := l.LastSeq(ctx); last != 6 {
		t.Fatalf("after recovery the event stream ends at %d, want 6", last)
	}
	for seq, id := range map[uint64]string{2: testEnvelope(10, "", "", "").ID, 4: testEnvelope(12, "", "", "").ID, 6: testEnvelope(21, "", "", "").ID} {
		e, err := l.Get(ctx, seq)
		if err != nil || e.ID != id {
			t.Fatalf("Get(%d) = %v, %v; want event %s", seq, e, err, id)
		}
	}
	a := appendAll(t, l, testEnvelope(99, "ack", "agent://a.local", "agent://b.local"))[0]
	if a.Seq != 7 {
		t.Fatalf("the first append after recovery got seq %d, want 7", a.Seq)
	}
}

// TestRecoverRefusesAGap: when the write-ahead stream no longer holds a
// batch the event stream lacks, Open fails and says so; it never goes on
// as if the events had not been acknowledged.
func TestRecoverRefusesAGap(t *testing.T) {
	nc := connectTest(t, t.TempDir())
	ctx := context.Background()
	// A write-ahead stream so small it keeps only the newest batch.
	cfg := Config{WALBytesMax: 2048}
	l, err := Open(ctx, nc, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	stopWorkers(l)
	for i := range 20 {
		writeWALOnly(t, l, i, 1)
	}
	if _, err := Open(ctx, nc, cfg, nil); !errors.Is(err, errGap) {
		t.Fatalf("Open over a write-ahead stream missing batches = %v, want the gap reported", err)
	}
}

// TestDuplicateWindowSurvivesRestart: a resend with the same client ID
// after the node restarted is still recognised within the window.
func TestDuplicateWindowSurvivesRestart(t *testing.T) {
	nc := connectTest(t, t.TempDir())
	ctx := context.Background()
	envelope := func() *Envelope {
		e := testEnvelope(1, "credit.transfer", "agent://a.local", "agent://b.local")
		e.ID = "01RESEND" + e.ID[8:]
		e.MsgID = "id:agent://a.local:resend-1"
		e.ReceivedAt = time.Now().UTC()
		return e
	}
	send := func(e *Envelope) (Appended, error) {
		l, err := Open(ctx, nc, Config{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close(ctx)
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return l.Append(wctx, e).Wait(wctx)
	}
	first, err := send(envelope())
	if err != nil {
		t.Fatal(err)
	}
	again, err := send(envelope())
	if err != nil || !again.Duplicate || again.Seq != first.Seq || again.EventID != first.EventID {
		t.Fatalf("resend after a restart = %+v, %v; want the first event %+v", again, err, first)
	}
	// The index rebuilt at start knows what the first message said, too.
	other := envelope()
	other.Body = []byte(`{"amount": 999}`)
	if a, err := send(other); protocol.StatusOf(err) != protocol.StatusConflict {
		t.Fatalf("another message under the ID after a restart = %+v, %v; want 409", a, err)
	}
}

// TestOpenAfterAQuietSpell: a node whose last event is older than the
// duplicate window starts. Rebuilding the duplicate index reads the events
// of the last window, and there are none: that read must end, not wait for
// an event. (It waited, so every restart after two quiet minutes hung.)
// The wait is wall time passing, which nothing can poll for.
func TestOpenAfterAQuietSpell(t *testing.T) {
	nc := connectTest(t, t.TempDir())
	cfg := Config{DuplicateWindow: 100 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := Open(ctx, nc, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	appendAll(t, l, testEnvelope(1, "task.assign", "agent://a.local", "agent://b.local"))
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * cfg.DuplicateWindow)
	l, err = Open(ctx, nc, cfg, nil)
	if err != nil {
		t.Fatalf("open after %v without events: %v", 3*cfg.DuplicateWindow, err)
	}
	defer l.Close(context.Background())
	if got := appendAll(t, l, testEnvelope(2, "task.assign", "agent://a.local", "agent://b.local")); got[0].Seq != 2 {
		t.Fatalf("append after the restart landed at %d, want 2", got[0].Seq)
	}
}

// TestRecoverAfterTheWALWasRecreated: the write-ahead stream is deleted
// while the node is stopped (the event stream holds everything, so it
// looks disposable) and created anew by the next start, whose numbering
// starts again at 1. If that node then crashes before the event stream has
// its first batches, the next start must copy them back: the event stream
// names batches of the old numbering, beyond the new stream's end (two new
// batches) or at a batch of the new numbering that holds other events
// (six).
func TestRecoverAfterTheWALWasRecreated(t *testing.T) {
	for _, batches := range []int{2, 6} {
		t.Run(fmt.Sprintf("%d new batches", batches), func(t *testing.T) { recoverAfterTheWALWasRecreated(t, batches) })
	}
}

func recoverAfterTheWALWasRecreated(t *testing.T, batches int) {
	nc := connectTest(t, t.TempDir())
	ctx := context.Background()
	l, err := Open(ctx, nc, Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 { // five batches: the last event names write-ahead batch 5
		appendAll(t, l, testEnvelope(i, "task.assign", "agent://a.local", "agent://b.local"))
	}
	l.Close(ctx)
	if err := testJetStream(t, nc).DeleteStream(ctx, "AGLX_WAL"); err != nil {
		t.Fatal(err)
	}
	l, err = Open(ctx, nc, Config{}, nil) // creates the write-ahead stream anew
	if err != nil {
		t.Fatal(err)
	}
	stopWorkers(l)
	for i := range batches { // acknowledged, not yet in the event stream: a crash now
		writeWALOnly(t, l, 100*(i+1), 2)
	}
	l, err = Open(ctx, nc, Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx)
	want := uint64(5 + 2*batches)
	if last, _ := l.LastSeq(ctx); last != want {
		t.Fatalf("after recovery the event stream ends at %d; events 6 to %d were acknowledged", last, want)
	}
	if a := appendAll(t, l, testEnvelope(999, "task.assign", "agent://a.local", "agent://b.local"))[0]; a.Seq != want+1 {
		t.Fatalf("a new append got seq %d, want %d", a.Seq, want+1)
	}
}

// TestWALRefusesPurge: a purge of the write-ahead stream would drop
// batches the event stream may still lack, so the stream refuses it, also
// when it was created before the setting existed (Open updates it).
func TestWALRefusesPurge(t *testing.T) {
	nc := connectTest(t, t.TempDir())
	ctx := context.Background()
	js := testJetStream(t, nc)
	old := Config{}.WALConfig()
	old.DenyPurge = false
	if _, err := js.CreateStream(ctx, old); err != nil {
		t.Fatal(err)
	}
	appendAndClose(t, nc)
	wal, err := js.Stream(ctx, "AGLX_WAL")
	if err != nil {
		t.Fatal(err)
	}
	if err := wal.Purge(ctx); err == nil {
		t.Fatal("the write-ahead stream was purged")
	}
	if info, err := wal.Info(ctx); err != nil || info.State.Msgs == 0 {
		t.Fatalf("write-ahead stream after the refused purge: %+v, %v", info, err)
	}
}

// TestStartServerOnATakenPort: a NATS port in use is reported at once,
// naming it; the server used to say only that it was not ready, 30 s on.
func TestStartServerOnATakenPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	start := time.Now()
	s, err := StartServer(ServerConfig{DataDir: t.TempDir(), Listen: ln.Addr().String()})
	if err == nil {
		s.Shutdown()
		t.Fatalf("a server started on %s, which is taken", ln.Addr())
	}
	if !strings.Contains(err.Error(), ln.Addr().String()) || time.Since(start) >= serverReadyTimeout {
		t.Fatalf("StartServer on a taken port: %v after %s; want an error naming %s at once", err, time.Since(start), ln.Addr())
	}
}

// TestStartServerOnAStoreItCannotWrite: a store that cannot be written is
// reported at once, naming it; the server used to say only that it was
// not ready, 30 s on, and blame the port.
func TestStartServerOnAStoreItCannotWrite(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "jetstream"), []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	s, err := StartServer(ServerConfig{DataDir: dir, Listen: "127.0.0.1:0"})
	if err == nil {
		s.Shutdown()
		t.Fatal("a server started on a store that is a plain file")
	}
	if !strings.Contains(err.Error(), "jetstream") || time.Since(start) >= serverReadyTimeout {
		t.Fatalf("StartServer on an unwritable store: %v after %s; want an error naming the store at once", err, time.Since(start))
	}
}

// TestStoreFromBeforeReadersHadAnAccount: a store written when every client
// shared the server's global account (before 2026-11-30, when readers got
// ReadersAccount) is the node's still: its streams are found where they
// were, not left behind for an empty log.
func TestStoreFromBeforeReadersHadAnAccount(t *testing.T) {
	dir := t.TempDir()
	old, err := server.NewServer(&server.Options{ServerName: "aglxd", JetStream: true, StoreDir: filepath.Join(dir, "jetstream"), DontListen: true, NoSigs: true, MaxPayload: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	go old.Start()
	if !old.ReadyForConnections(10 * time.Second) {
		t.Fatal("the old-style server did not start")
	}
	onc, err := nats.Connect("", nats.InProcessServer(old))
	if err != nil {
		t.Fatal(err)
	}
	l, err := Open(context.Background(), onc, Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	appendAll(t, l, testEnvelope(1, "task.assign", "agent://a.local", "agent://b.local"))
	l.Close(context.Background())
	onc.Close()
	old.Shutdown()
	old.WaitForShutdown()

	nc := connectTest(t, dir)
	l, err = Open(context.Background(), nc, Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(context.Background())
	if last, err := l.LastSeq(context.Background()); err != nil || last != 1 {
		t.Fatalf("the event stream written before ends at %d (%v); want 1", last, err)
	}
}

// TestRecoverAfterTheBodyLimitWasLowered: an event taken under a larger
// --body-max and still only in the write-ahead stream cannot be copied to
// an event stream whose limit was lowered; the start says so, naming the
// flag, instead of passing on JetStream's "message size exceeds maximum".
func TestRecoverAfterTheBodyLimitWasLowered(t *testing.T) {
	nc := connectTest(t, t.TempDir())
	ctx := context.Background()
	l, err := Open(ctx, nc, Config{BodySizeMax: 512 << 10}, nil)
	if err != nil {
		t.Fatal(err)
	}
	stopWorkers(l)
	b := &batch{firstSeq: l.nextSeq}
	e := testEnvelope(1, "task.assign", "agent://a.local", "agent://b.local")
	e.Body = bytes.Repeat([]byte("x"), 400<<10)
	e.Seq = b.firstSeq
	b.events = append(b.events, e)
	if _, err := l.writeBatch(b, encodeBatch(nil, b)); err != nil {
		t.Fatal(err)
	}
	if l, err = Open(ctx, nc, Config{BodySizeMax: 64 << 10}, nil); err == nil {
		l.Close(ctx)
		t.Fatal("Open copied an event larger than the event stream takes")
	} else if !strings.Contains(err.Error(), "--body-max") {
		t.Fatalf("Open: %v; want --body-max named", err)
	}
}

// TestOpenRefusesAnotherOwnersLog: a node's own mints and registry entries
// are made under its name and key and checked against them on replay. A
// node started again under another name on the same store replayed every
// mint as refused and showed empty balances, with nothing said. The log
// keeps its owner in the stream's metadata; Open refuses another, takes
// an owner where the log has none, and checks nothing for "".
func TestOpenRefusesAnotherOwnersLog(t *testing.T) {
	nc := connectTest(t, t.TempDir())
	ctx := context.Background()
	appendAndClose(t, nc) // a log from before owners: none recorded
	for _, tc := range []struct {
		owner    string
		takeOver bool
		ok       bool
	}{
		{"registry://localhost ed25519:aa", false, true}, // takes it
		{"registry://localhost ed25519:aa", false, true},
		{"registry://global.aglx.net ed25519:aa", false, false},
		{"registry://localhost ed25519:bb", false, false},
		{"", false, true},
		{"registry://localhost ed25519:aa", false, true}, // still the owner
		// An operator who lost the key takes the store over, knowingly;
		// from then on the new key is the owner.
		{"registry://localhost ed25519:bb", true, true},
		{"registry://localhost ed25519:aa", false, false},
		{"registry://localhost ed25519:bb", false, true},
	} {
		l, err := Open(ctx, nc, Config{Owner: tc.owner, TakeOver: tc.takeOver}, nil)
		if err == nil {
			err = l.RecordTakeOver(ctx) // as the node does once its key fits the log
			l.Close(ctx)
		}
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrOtherOwner)) {
			t.Fatalf("Open as %q: %v; want ok=%v", tc.owner, err, tc.ok)
		}
	}
	// The stream keeps whom the take-over replaced, for an auditor.
	js, _ := jetstream.New(nc)
	s, err := js.Stream(ctx, "AGLX")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.CachedInfo().Config.Metadata[MetaTakenFrom]; got != "registry://localhost ed25519:aa" {
		t.Errorf("metadata %s = %q, want the owner taken over", MetaTakenFrom, got)
	}
	// The event stream moved aside to be rebuilt (ErrDamaged's advice):
	// the write-ahead stream keeps the owner, and the guard holds.
	if err := js.DeleteStream(ctx, "AGLX"); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, nc, Config{Owner: "registry://localhost ed25519:aa"}, nil); !errors.Is(err, ErrOtherOwner) {
		t.Fatalf("a rebuild under another owner: %v; want ErrOtherOwner", err)
	}
	l, err := Open(ctx, nc, Config{Owner: "registry://localhost ed25519:bb"}, nil)
	if err != nil {
		t.Fatalf("a rebuild under the owner: %v", err)
	}
	defer l.Close(ctx)
	if last, err := l.LastSeq(ctx); err != nil || last != 1 {
		t.Fatalf("the rebuilt event stream ends at %d (%v), want its one event", last, err)
	}
}
