package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aglx/ledger/protocol"
)

// TestAStartComparesTheLedgerWithTheLastStop: a clean stop records the
// digests of the ledger and the other folds where they stood, and the
// next start, replaying the same log, compares its own there with them.
// The same build finds every fold as it was (the log touches the
// registry, the handshakes and reputation too); a record that does not
// match (as a build whose rules changed would leave) is warned of loudly,
// naming the fold and both digests. Until 2026-12-02 an upgrade that
// moved balances on replay did so without a word (helper-106).
func TestAStartComparesTheLedgerWithTheLastStop(t *testing.T) {
	dir := t.TempDir()
	run := func(logs *lockedBuffer) *Main {
		t.Helper()
		cfg := DefaultConfig()
		cfg.Relay = false
		cfg.DataDir = dir
		cfg.Listen, cfg.UDP, cfg.HTTP, cfg.NATSListen, cfg.TLSListen = "127.0.0.1:0", "", "127.0.0.1:0", "", "127.0.0.1:0"
		// The comparison is the replay's: a start from the saved folds
		// checks them against the record instead (TestAStartTakesUpTheSavedFolds).
		cfg.FullReplay = true
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
	// The registry (two keys bound, a mentor), the handshakes (a task
	// assigned and answered) and reputation (a mentor's feedback).
	s := lfNewSession(t, m)
	mentor, mentee := s.boundPair(t, "agent://mentor.local", "agent://mentee.local")
	lfExpect(t, s.send(t, mentor.signed(t, m.cfg.Name, protocol.TypeMentorRegister,
		fmt.Sprintf(`{"agent_name":"Mentor","expertise":["nlp"],"available":true,"timestamp":%q}`, lfNow()))), "ack", 200)
	lfExpect(t, s.send(t, mentor.signed(t, mentee.uri, protocol.TypeMentorFeedback,
		fmt.Sprintf(`{"score":0.9,"comment":"c","reputation_delta":0.25,"timestamp":%q}`, lfNow()))), "ack", 202)
	lfExpect(t, s.send(t, mentor.signed(t, mentee.uri, protocol.TypeTaskAssign,
		fmt.Sprintf(`{"task":"data.analyze","task_id":"t-1","timestamp":%q}`, lfNow()))), "ack", 202)
	lfExpect(t, s.send(t, mentee.signed(t, mentor.uri, protocol.TypeTaskResult,
		fmt.Sprintf(`{"task_id":"t-1","status":"SUCCESS","timestamp":%q}`, lfNow()))), "ack", 202)
	c.Close()
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	path := m.lastStopPath()
	var rec lastStop
	if b, err := os.ReadFile(path); err != nil || json.Unmarshal(b, &rec) != nil || rec.AppliedSeq == 0 || len(rec.Ledger) != 64 || len(rec.Folds) != len(foldNames) {
		t.Fatalf("the stop's record %s: %+v (%v); want the applied position and the digests of the ledger and of %v", path, rec, err, foldNames)
	}

	for _, tc := range []struct {
		name    string
		edit    func(*lastStop) // nil: the record as the stop wrote it
		frames  int             // sent after the start, with later IDs
		want    string          // in the start's log
		notWant string
	}{
		{"the same build, the same state", nil, 0, "the log folds as at the last stop", "FOLDS DIFFERENTLY"},
		{"a ledger that folds differently", func(r *lastStop) { r.Ledger = strings.Repeat("0", 64) }, 0,
			"last_ledger_sha256=" + strings.Repeat("0", 64), ""},
		{"an input changed", func(r *lastStop) { r.Ledger, r.Zones = strings.Repeat("0", 64), "other" }, 0, `--zones" differs=ledger last_ledger_sha256=`, ""},
		{"a registry that folds differently", func(r *lastStop) { r.Folds["registry"] = strings.Repeat("0", 64) }, 0,
			"differs=registry last_registry_sha256=" + strings.Repeat("0", 64), ""},
		{"reputation folds differently", func(r *lastStop) { r.Folds["reputation"] = strings.Repeat("0", 64) }, 0,
			"differs=reputation last_reputation_sha256=" + strings.Repeat("0", 64), ""},
		{"a record from before the folds' digests", func(r *lastStop) { r.Folds = nil }, 0, "the log folds as at the last stop", "FOLDS DIFFERENTLY"},
		// Another log (a store replaced, the key dir kept): not compared,
		// neither at start nor when new events reach the position later
		// (helper-107).
		{"a position past this log's end", func(r *lastStop) { r.AppliedSeq += 2; r.Ledger = strings.Repeat("0", 64) }, 3,
			"past this log's end", "FOLDS DIFFERENTLY"},
		{"another event at the position", func(r *lastStop) { r.EventID = "01OTHER"; r.Ledger = strings.Repeat("0", 64) }, 0,
			"names another event", "FOLDS DIFFERENTLY"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var r lastStop
			json.Unmarshal(b, &r)
			orig := r
			if tc.edit != nil {
				tc.edit(&r)
				b, _ = json.Marshal(r)
				if err := os.WriteFile(path, b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			var logs lockedBuffer
			m := run(&logs)
			node := lfParty{uri: m.cfg.Name, key: m.key}
			c := dial(t, m.TCPAddr())
			for i := range tc.frames {
				body := fmt.Sprintf(`{"amount":"1","currency":"AGLX","reason":"r","timestamp":%q,"transaction_id":"later-%s-%d"}`, lfNow(), strings.ReplaceAll(tc.name, " ", "-"), i)
				if err := c.WriteFrame(node.signed(t, "agent://bob.local", protocol.TypeCreditTransfer, body)); err != nil {
					t.Fatal(err)
				}
				c.Flush()
				readReply(t, c)
			}
			c.Close()
			<-m.runner.Ready()
			deadline := time.Now().Add(20 * time.Second)
			for !strings.Contains(logs.String(), tc.want) && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if err := m.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			out := logs.String()
			if !strings.Contains(out, tc.want) {
				t.Fatalf("the start's log lacks %q:\n%s", tc.want, out)
			}
			if tc.notWant != "" && strings.Contains(out, tc.notWant) {
				t.Fatalf("the start's log has %q:\n%s", tc.notWant, out)
			}
			// The stop after it recorded afresh: the next case starts from
			// a true record again.
			b, err = os.ReadFile(path)
			if err != nil || json.Unmarshal(b, &r) != nil || r.Ledger == strings.Repeat("0", 64) || r.Folds["registry"] == strings.Repeat("0", 64) || r.Folds["reputation"] == strings.Repeat("0", 64) || len(r.Folds) != len(foldNames) || r.AppliedSeq < orig.AppliedSeq {
				t.Fatalf("the record after this start's stop: %+v (%v)", r, err)
			}
		})
	}
}
