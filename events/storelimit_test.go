package events

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aglx/ledger/protocol"
)

// TestStoreLimitIsSaid: JetStream refuses every write once its streams
// hold its limit on the store, which it sets from the disk at each start
// and which comes while the disk still has a quarter of its space free
// (helper-106). StoreUsage reports the streams' bytes against that limit;
// the frames refused at it hear 503 without the server's internals; and
// the log's health says what was reached and what to do.
func TestStoreLimitIsSaid(t *testing.T) {
	const limit = 3 << 20
	s, nc := startTestServer(t, ServerConfig{DataDir: t.TempDir(), maxStore: limit})
	ctx := context.Background()
	l, err := Open(ctx, nc, Config{WALBytesMax: 1 << 20, StoreDown: s.JetStreamDown}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx)
	if used, max := s.StoreUsage(); max != limit || used < 0 {
		t.Fatalf("StoreUsage = %d of %d; want a limit of %d", used, max, limit)
	}
	body := []byte(`{"task_id":"t","result":"` + strings.Repeat("y", 16<<10) + `"}`)
	var refusal error
	for i := 1; i < 1000 && refusal == nil; i++ {
		e := testEnvelope(i, "task.result", "agent://a.local", "agent://b.local")
		e.Body = body
		_, refusal = l.Append(ctx, e).Wait(ctx)
	}
	if refusal == nil {
		t.Fatal("16 MB of appends fitted in a 3 MiB store")
	}
	if used, max := s.StoreUsage(); used == 0 || float64(used) < StoreUsedWarn*float64(max) {
		t.Fatalf("at the refusal StoreUsage = %d of %d; want it past the warning's share", used, max)
	}
	if protocol.StatusOf(refusal) != protocol.StatusUnavailable || strings.Contains(refusal.Error(), "err_code") {
		t.Fatalf("the append refused at the limit: %v; want 503 without the server's internals", refusal)
	}
	var pe *protocol.Error
	if !errors.As(refusal, &pe) || !strings.Contains(pe.Reason, "store takes no writes") {
		t.Fatalf("the append refused at the limit: %v; want the store's refusal", refusal)
	}
	// And every append after it, whichever of the log's checks refuses it.
	e := testEnvelope(5000, "task.result", "agent://a.local", "agent://b.local")
	if _, err := l.Append(ctx, e).Wait(ctx); !errors.As(err, &pe) || !strings.Contains(pe.Reason, "store takes no writes") {
		t.Fatalf("an append after the limit: %v; want the store's refusal", err)
	}
	if err := l.Healthy(); err == nil || !strings.Contains(err.Error(), "reached JetStream's limit") {
		t.Fatalf("Healthy at the store's limit = %v; want it to say the limit was reached and what to do", err)
	}
}
