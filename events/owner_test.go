package events

import (
	"context"
	"crypto/ed25519"
	"errors"
	"testing"

	"github.com/aglx/ledger/protocol"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const (
	ownerOld   = "registry://localhost ed25519:aa"
	ownerNew   = "registry://localhost ed25519:bb"
	ownerOther = "registry://localhost ed25519:cc"
)

// testPublicKey is a fresh Ed25519 public key as MetaNodeFirstKey holds it.
func testPublicKey(t *testing.T) string {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := protocol.MarshalPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// wantStreamMeta checks key's value in the metadata of both the event
// stream and the write-ahead stream, read from JetStream, not the log.
func wantStreamMeta(t *testing.T, js jetstream.JetStream, key, want string) {
	t.Helper()
	cfg := Config{}.withDefaults()
	for _, name := range []string{cfg.Stream, cfg.walStream()} {
		s, err := js.Stream(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.CachedInfo().Config.Metadata[key]; got != want {
			t.Errorf("stream %s: metadata %s = %q, want %q", name, key, got, want)
		}
	}
}

// wantLogMeta checks l.Meta for the owner and the first key.
func wantLogMeta(t *testing.T, l *Log, owner, firstKey string) {
	t.Helper()
	if got := l.Meta(MetaOwner); got != owner {
		t.Errorf("Meta(%s) = %q, want %q", MetaOwner, got, owner)
	}
	if got := l.Meta(MetaNodeFirstKey); got != firstKey {
		t.Errorf("Meta(%s) = %q, want %q", MetaNodeFirstKey, got, firstKey)
	}
}

// rotatedLog opens a log as ownerOld, appends one event, and moves it to
// ownerNew with SetOwner, as the end of a key rotation does; it returns
// the open log and the first key it recorded.
func rotatedLog(t *testing.T) (*nats.Conn, jetstream.JetStream, *Log, string) {
	t.Helper()
	ctx := context.Background()
	nc := connectTest(t, t.TempDir())
	js := testJetStream(t, nc)
	l, err := Open(ctx, nc, Config{Owner: ownerOld}, nil)
	if err != nil {
		t.Fatal(err)
	}
	appendAll(t, l, testEnvelope(1, "task.assign", "agent://a.local", "agent://b.local"))
	first := testPublicKey(t)
	if err := l.SetOwner(ctx, ownerNew, first); err != nil {
		l.Close(ctx)
		t.Fatal(err)
	}
	return nc, js, l, first
}

// TestSetOwnerRecordsOnBothStreams: SetOwner moves the owner on the event
// stream and its write-ahead copy, records the first key on both where
// none was, and never replaces a recorded first key.
func TestSetOwnerRecordsOnBothStreams(t *testing.T) {
	ctx := context.Background()
	nc := connectTest(t, t.TempDir())
	js := testJetStream(t, nc)
	l, err := Open(ctx, nc, Config{Owner: ownerOld}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx)
	wantLogMeta(t, l, ownerOld, "")
	wantStreamMeta(t, js, MetaOwner, ownerOld)
	wantStreamMeta(t, js, MetaNodeFirstKey, "")

	first, second := testPublicKey(t), testPublicKey(t)
	if err := l.SetOwner(ctx, ownerNew, first); err != nil {
		t.Fatal(err)
	}
	wantLogMeta(t, l, ownerNew, first)
	wantStreamMeta(t, js, MetaOwner, ownerNew)
	wantStreamMeta(t, js, MetaNodeFirstKey, first)

	// A second rotation: the owner moves on, the first key stands.
	if err := l.SetOwner(ctx, ownerOther, second); err != nil {
		t.Fatal(err)
	}
	wantLogMeta(t, l, ownerOther, first)
	wantStreamMeta(t, js, MetaOwner, ownerOther)
	wantStreamMeta(t, js, MetaNodeFirstKey, first)

	// Nor does an empty one clear it.
	if err := l.SetOwner(ctx, ownerOther, ""); err != nil {
		t.Fatal(err)
	}
	wantLogMeta(t, l, ownerOther, first)
	wantStreamMeta(t, js, MetaNodeFirstKey, first)
}

// TestSetOwnerSurvivesReopen: Open's CreateOrUpdateStream keeps what
// SetOwner recorded on both streams, the new owner opens the log, and the
// old one is refused.
func TestSetOwnerSurvivesReopen(t *testing.T) {
	ctx := context.Background()
	nc, js, l, first := rotatedLog(t)
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, owner := range []string{ownerNew, "", ownerNew} { // "" checks nothing, changes nothing
		l, err := Open(ctx, nc, Config{Owner: owner}, nil)
		if err != nil {
			t.Fatalf("Open as %q: %v", owner, err)
		}
		wantLogMeta(t, l, ownerNew, first)
		if err := l.Close(ctx); err != nil {
			t.Fatal(err)
		}
		wantStreamMeta(t, js, MetaOwner, ownerNew)
		wantStreamMeta(t, js, MetaNodeFirstKey, first)
	}
	wantOwnerRefused(t, nc, ownerOld, "Open as the owner before the rotation")
	wantStreamMeta(t, js, MetaOwner, ownerNew)
	wantStreamMeta(t, js, MetaNodeFirstKey, first)
}

// TestOwnerTakeOverDropsFirstKey: after a take-over the new owner's key is
// the first that counts, so the recorded first key goes, from the event
// stream and from the write-ahead copy a rebuild would take it from.
func TestOwnerTakeOverDropsFirstKey(t *testing.T) {
	ctx := context.Background()
	nc, js, l, _ := rotatedLog(t)
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := Open(ctx, nc, Config{Owner: ownerOther, TakeOver: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Open records nothing yet: the caller checks its key first.
	if l.TakeOverPending() != ownerNew {
		t.Fatalf("TakeOverPending() = %q, want the owner replaced", l.TakeOverPending())
	}
	wantStreamMeta(t, js, MetaOwner, ownerNew)
	wantStreamMeta(t, js, MetaNodeFirstKey, l.Meta(MetaNodeFirstKey))
	if l.Meta(MetaNodeFirstKey) == "" {
		t.Fatal("Open dropped the first key before the take-over was recorded")
	}
	if err := l.RecordTakeOver(ctx); err != nil {
		t.Fatal(err)
	}
	wantLogMeta(t, l, ownerOther, "")
	// Whom it replaced, on both streams: a rebuilt event stream keeps it.
	wantStreamMeta(t, js, MetaTakenFrom, ownerNew)
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	wantStreamMeta(t, js, MetaOwner, ownerOther)
	wantStreamMeta(t, js, MetaNodeFirstKey, "")

	// Nor does it come back from the write-ahead stream in a rebuild.
	if err := js.DeleteStream(ctx, Config{}.withDefaults().Stream); err != nil {
		t.Fatal(err)
	}
	if l, err = Open(ctx, nc, Config{Owner: ownerOther}, nil); err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx)
	wantLogMeta(t, l, ownerOther, "")
}

// TestFirstKeyRebuiltFromWAL: an event stream moved aside to be rebuilt
// from the write-ahead stream gets both the owner and the first key back
// from the write-ahead stream's copy.
func TestFirstKeyRebuiltFromWAL(t *testing.T) {
	ctx := context.Background()
	nc, js, l, first := rotatedLog(t)
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteStream(ctx, Config{}.withDefaults().Stream); err != nil {
		t.Fatal(err)
	}
	wantOwnerRefused(t, nc, ownerOld, "a rebuild as the owner before the rotation")
	l, err := Open(ctx, nc, Config{Owner: ownerNew}, nil)
	if err != nil {
		t.Fatalf("a rebuild as the owner: %v", err)
	}
	defer l.Close(ctx)
	if last, err := l.LastSeq(ctx); err != nil || last != 1 {
		t.Fatalf("the rebuilt event stream ends at %d (%v), want its one event", last, err)
	}
	wantLogMeta(t, l, ownerNew, first)
	wantStreamMeta(t, js, MetaOwner, ownerNew)
	wantStreamMeta(t, js, MetaNodeFirstKey, first)
}

// TestSetOwnerOnAttachedLogIsRefused: a log attached for reading writes
// nothing, its streams' metadata included.
func TestSetOwnerOnAttachedLogIsRefused(t *testing.T) {
	ctx := context.Background()
	nc := connectTest(t, t.TempDir())
	js := testJetStream(t, nc)
	l, err := Open(ctx, nc, Config{Owner: ownerOld}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx)
	a, err := Attach(ctx, nc, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetOwner(ctx, ownerNew, testPublicKey(t)); err == nil {
		t.Fatal("SetOwner on an attached log succeeded")
	}
	wantLogMeta(t, a, ownerOld, "")
	wantStreamMeta(t, js, MetaOwner, ownerOld)
	wantStreamMeta(t, js, MetaNodeFirstKey, "")
}

// wantOwnerRefused checks that Open as owner is refused with ErrOtherOwner.
func wantOwnerRefused(t *testing.T, nc *nats.Conn, owner, what string) {
	t.Helper()
	ctx := context.Background()
	if l, err := Open(ctx, nc, Config{Owner: owner}, nil); !errors.Is(err, ErrOtherOwner) {
		if err == nil {
			l.Close(ctx)
		}
		t.Fatalf("%s: %v; want ErrOtherOwner", what, err)
	}
}
