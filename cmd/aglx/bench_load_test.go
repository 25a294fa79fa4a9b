package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aglx/ledger/bridge"
)

// TestBenchIngestRefusesARunWithRefusals: a refused frame is answered
// fast and would count as throughput, so a run with any measures nothing
// and fails, as the signed run always did (helper-91). A paced run says
// how late the generator wrote its frames; a run as fast as the node
// answers has no due times to be late for.
func TestBenchIngestRefusesARunWithRefusals(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bad := func(int) []byte {
		return []byte("AGLX/1.0 TCP\nFROM: agent://a.local\nTO: agent://b.local\nTYPE: task.explode\n\n{}\n")
	}
	_, _, err := benchIngest(ctx, t.TempDir()+"/node", 0, bridge.Load{Conns: 2, Frames: 20, Frame: bad})
	if err == nil || !strings.Contains(err.Error(), "20 of 20 frames were refused") {
		t.Fatalf("a run of refused frames: %v; want it failed", err)
	}
	r, _, err := benchIngest(ctx, t.TempDir()+"/node", 0, bridge.Load{Conns: 2, Frames: 200, Rate: 2000, Frame: benchFrame})
	if err != nil || r.LateP99 <= 0 || r.LateP50 > r.LateP99 {
		t.Fatalf("a paced run: %v, generator late p50 %s p99 %s; want them measured", err, r.LateP50, r.LateP99)
	}
	r, _, err = benchIngest(ctx, t.TempDir()+"/node", 0, bridge.Load{Conns: 2, Frames: 200, Frame: benchFrame})
	if err != nil || r.LateP99 != 0 {
		t.Fatalf("an unpaced run: %v, generator late p99 %s; want none", err, r.LateP99)
	}
}
