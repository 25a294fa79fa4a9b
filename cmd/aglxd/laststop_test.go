package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aglx/ledger/protocol"
)

// TestAStartComparesTheLedgerWithTheLastStop: a clean stop records the
// ledger's digest where the folds stood, and the next start, replaying
// the same log, compares its ledger there with it. The same build says
// nothing; a record that does not match (as a build whose rules changed
// would leave) is warned of loudly, naming both digests. Until
// 2026-12-02 an upgrade that moved balances on replay did so without a
// word (helper-106).
func TestAStartComparesTheLedgerWithTheLastStop(t *testing.T) {
	dir := t.TempDir()
	run := func(logs *lockedBuffer) *Main {
		t.Helper()
		cfg := DefaultConfig()
		cfg.Relay = false
		cfg.DataDir = dir
		cfg.Listen, cfg.UDP, cfg.HTTP, cfg.NATSListen, cfg.TLSListen = "127.0.0.1:0", "", "127.0.0.1:0", "", ""
		m := NewMain(cfg, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
		if err := m.Run(context.Background()); err != nil {
			m.Close(context.Background())
			t.Fatal(err)
		}
		return m
	}
	var first lockedBuffer
	m := run(&first)
	node := lfParty{uri: m.cfg.Name, key: m.key}
	c := dial(t, m.TCPAddr())
	for i := range 3 {
		body := fmt.Sprintf(`{"amount":"1.5","currency":"AGLX","reason":"r","timestamp":%q,"transaction_id":"m-%d"}`, lfNow(), i)
		if err := c.WriteFrame(node.signed(t, "agent://bob.local", protocol.TypeCreditTransfer, body)); err != nil {
			t.Fatal(err)
		}
		c.Flush()
		if f, _ := readReply(t, c); f.Type() != "ack" {
			t.Fatalf("mint %d: %s %s", i, f.Type(), f.Body)
		}
	}
	c.Close()
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	path := m.lastStopPath()
	var rec lastStop
	if b, err := os.ReadFile(path); err != nil || json.Unmarshal(b, &rec) != nil || rec.AppliedSeq == 0 || len(rec.Ledger) != 64 {
		t.Fatalf("the stop's record %s: %+v (%v); want the applied position and the ledger's digest", path, rec, err)
	}

	for _, tc := range []struct {
		name   string
		tamper bool
		want   string // in the start's log; "" for nothing about it
	}{
		{"the same build, the same ledger", false, "the ledger is as the last stop left it"},
		{"a ledger that folds differently", true, "THE LEDGER FOLDS DIFFERENTLY"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.tamper {
				b, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				var r lastStop
				json.Unmarshal(b, &r)
				r.Ledger = strings.Repeat("0", 64)
				b, _ = json.Marshal(r)
				if err := os.WriteFile(path, b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			var logs lockedBuffer
			m := run(&logs)
			// The comparison runs as the replay passes the record's
			// position; the record is gone once read.
			<-m.runner.Ready()
			deadline := time.Now().Add(20 * time.Second)
			for tc.want != "" && !strings.Contains(logs.String(), tc.want) && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if err := m.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			out := logs.String()
			switch {
			case !tc.tamper && strings.Contains(out, "FOLDS DIFFERENTLY"):
				t.Fatalf("the same build warned of a different ledger:\n%s", out)
			case tc.want != "" && !strings.Contains(out, tc.want):
				t.Fatalf("the start's log lacks %q:\n%s", tc.want, out)
			case tc.tamper && !strings.Contains(out, "last_ledger_sha256="+strings.Repeat("0", 64)):
				t.Fatalf("the warning does not name the recorded digest:\n%s", out)
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(path), lastStopFile)); err != nil {
				t.Fatalf("the clean stop after this start left no record: %v", err)
			}
		})
	}
}
