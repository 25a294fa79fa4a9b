package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aglx/ledger/ledger/statecodec"
	"github.com/aglx/ledger/projections"
)

// statecodecMagic is the saved state's first bytes (projections.stateMagic).
func statecodecMagic() string { return "AGLX-FOLD-STATE\n" }

// savedInBackground is the sequence of the last state p logged as saved in
// the background, or 0.
func savedInBackground(p *nodeProcess) uint64 {
	var seq uint64
	for _, l := range p.log() {
		var rec struct {
			Msg string `json:"msg"`
			Seq uint64 `json:"seq"`
		}
		if json.Unmarshal([]byte(l), &rec) == nil && rec.Msg == "fold state saved in the background" {
			seq = rec.Seq
		}
	}
	return seq
}

// TestAStartAfterACrashTakesUpTheBackgroundSave: a node that is never
// stopped cleanly still leaves a saved state, by the background rounds of
// --save-state-every, and a start after SIGKILL takes up the last of
// them and folds only the events after it, to the state a full replay
// gives. The real binary; no clean stop before the crash, so the state
// can only be a round's.
func TestAStartAfterACrashTakesUpTheBackgroundSave(t *testing.T) {
	dir := t.TempDir()
	p := startProcess(t, dir, "--save-state-every", "100ms")
	sendTasks(t, p.tcp, "first", 300)
	for deadline := time.Now().Add(60 * time.Second); savedInBackground(p) < 300; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no background save reached seq 300:\n%v", p.log())
		}
	}
	// An operator sees it too: the gauge stands at a background save.
	var gauge uint64
	for _, l := range strings.Split(string(httpGet(t, p.http, "/metrics")), "\n") {
		if v, ok := strings.CutPrefix(l, "aglx_fold_state_saved_seq "); ok {
			fmt.Sscan(v, &gauge)
		}
	}
	if gauge < 300 {
		t.Fatalf("aglx_fold_state_saved_seq is %d after a background save at 300 or later", gauge)
	}
	sendTasks(t, p.tcp, "second", 200)
	p.cmd.Process.Kill()
	if err := <-p.exited; err == nil {
		t.Fatal("aglxd exited cleanly after SIGKILL?")
	}
	p.exited <- errors.New("killed")
	saved := savedInBackground(p)
	t.Logf("the last background save before the crash: seq %d of 500", saved)
	if h, err := projections.ReadStateHeader(mustRead(t, filepath.Join(dir, "keys", foldStateFile))); err != nil || h.Seq != saved {
		t.Fatalf("the state on disk: %+v %v; want the last background save's, at seq %d", h, err, saved)
	}

	resumed := startProcess(t, dir)
	waitReady(t, resumed)
	if !resumed.logged(fmt.Sprintf(`"msg":"folds loaded from the saved state; the log is replayed from the event after it","path":%q,"seq":%d`, filepath.Join(dir, "keys", foldStateFile), saved)) {
		t.Fatalf("the start after the crash did not take up the background save at %d:\n%v", saved, resumed.log())
	}
	if saved < 500 && !resumed.logged(fmt.Sprintf(`"from_seq":%d,"to_seq":500`, saved+1)) {
		t.Fatalf("the start after the crash did not fold the events after the save at %d:\n%v", saved, resumed.log())
	}
	foldsAsAFullReplay(t, dir, resumed, 500)
}

// resaveState loads m's saved state into fresh folds and saves it again
// over itself with its header edited: a state whose sections are whole
// and whose header says something else of them.
func resaveState(t *testing.T, m *Main, edit func(*projections.StateHeader)) {
	t.Helper()
	cfg := m.foldConfig
	cfg.Verdicts = nil
	f, out := newFolds(cfg)
	h, err := projections.LoadState(mustRead(t, m.foldStatePath()), f, out)
	if err != nil {
		t.Fatal(err)
	}
	edit(&h)
	b, err := projections.EncodeState(h, f, out)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(m.foldStatePath(), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestBackgroundRoundsBuildOnEachOther: each round of the background save
// starts from the state on disk and folds only what came after it, up to
// the event the live folds last applied; a round with nothing new writes
// nothing; a state on disk that cannot be built on (damaged, or distrusted
// under --full-replay) is folded around, from the log's first event. The
// rounds are run by hand here, with the timer far off.
func TestBackgroundRoundsBuildOnEachOther(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := func(t *testing.T, dir string, logs *lockedBuffer, fullReplay bool) *Main {
		t.Helper()
		cfg := DefaultConfig()
		cfg.Relay = false
		cfg.DataDir = dir
		cfg.Listen, cfg.UDP, cfg.HTTP, cfg.NATSListen, cfg.TLSListen = "127.0.0.1:0", "", "", "", ""
		cfg.SaveStateEvery, cfg.FullReplay = durationFlagMax, fullReplay
		m := NewMain(cfg, slog.New(slog.NewTextHandler(logs, nil)))
		if err := m.Run(ctx); err != nil {
			m.Close(ctx)
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close(context.Background()) })
		return m
	}
	send := func(t *testing.T, m *Main, prefix string, n int) uint64 {
		t.Helper()
		sendTasks(t, m.TCPAddr(), prefix, n)
		end := m.log.Durable()
		if err := m.runner.WaitFor(ctx, end); err != nil {
			t.Fatal(err)
		}
		return end
	}
	// round runs one round and returns the sequence of the state on disk
	// after it, checking the log line a saving round writes.
	round := func(t *testing.T, m *Main, logs *lockedBuffer, wantFrom, wantSeq uint64) {
		t.Helper()
		before := m.checkpoints.rounds.Load()
		if err := m.checkpoints.round(ctx); err != nil {
			t.Fatal(err)
		}
		h, err := projections.ReadStateHeader(mustRead(t, m.foldStatePath()))
		if err != nil || h.Seq != wantSeq {
			t.Fatalf("after the round the state on disk is %+v %v; want it at %d", h, err, wantSeq)
		}
		if wantFrom == wantSeq {
			if m.checkpoints.rounds.Load() != before {
				t.Fatalf("a round with nothing new saved a state")
			}
			return
		}
		want := fmt.Sprintf(`msg="fold state saved in the background" path=%s seq=%d from_seq=%d events=%d`, m.foldStatePath(), wantSeq, wantFrom, wantSeq-wantFrom)
		if !strings.Contains(logs.String(), want) {
			t.Fatalf("no log line %q:\n%s", want, logs.String())
		}
		// The state saved is the live folds' there, byte for byte (no
		// reply here is signed as it is taken), under the same header.
		var live []byte
		m.runner.View(func(applied uint64) {
			if applied != wantSeq {
				t.Fatalf("the live folds moved to %d", applied)
			}
			live, err = projections.EncodeState(h, m.folds, m.outbox)
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := mustRead(t, m.foldStatePath()); string(got) != string(live) {
			t.Fatalf("the round's state at %d (%d bytes) is not the live folds' there (%d bytes)", wantSeq, len(got), len(live))
		}
	}

	t.Run("rounds", func(t *testing.T) {
		var logs lockedBuffer
		m := start(t, t.TempDir(), &logs, false)
		a := send(t, m, "a", 50)
		round(t, m, &logs, 0, a)
		round(t, m, &logs, a, a) // nothing new
		b := send(t, m, "b", 30)
		round(t, m, &logs, a, b)
		// A damaged state is not built on.
		raw := mustRead(t, m.foldStatePath())
		raw[len(raw)/2] ^= 0xff
		if err := os.WriteFile(m.foldStatePath(), raw, 0o600); err != nil {
			t.Fatal(err)
		}
		c := send(t, m, "c", 10)
		round(t, m, &logs, 0, c)
		if !strings.Contains(logs.String(), `msg="the saved fold state cannot be built on; the background save folds the whole log"`) {
			t.Fatalf("the round did not say why it folded the whole log:\n%s", logs.String())
		}
		// Nor is one whose folds, loaded, are not what its saver says they
		// were (a field saved or loaded wrongly): the header's digests.
		var seq uint64
		resaveState(t, m, func(h *projections.StateHeader) {
			if h.Digests["ledger"] == "" || h.Digests["registry"] == "" {
				t.Fatalf("the round's state: %+v; want the ledger's and the registry's digests in its header", h)
			}
			h.Digests["registry"] = strings.Repeat("0", 64)
		})
		d := send(t, m, "d", 10)
		round(t, m, &logs, 0, d)
		if !strings.Contains(logs.String(), "the loaded registry fold's digest is") {
			t.Fatalf("the round built on a state whose digests its folds do not match:\n%s", logs.String())
		}
		// Nor one whose event at its position is not this log's: another
		// log as long as this one, or longer.
		resaveState(t, m, func(h *projections.StateHeader) { h.EventID, seq = "01ANOTHERLOGSEVENT000000000", h.Seq })
		e := send(t, m, "e", 10)
		round(t, m, &logs, 0, e)
		if want := fmt.Sprintf("why=\"this log's event %d is ", seq); !strings.Contains(logs.String(), want) {
			t.Fatalf("the round built on another log's state (%q):\n%s", want, logs.String())
		}
	})

	t.Run("full replay", func(t *testing.T) {
		dir := t.TempDir()
		var logs lockedBuffer
		m := start(t, dir, &logs, false)
		a := send(t, m, "a", 40)
		if err := m.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if h, err := projections.ReadStateHeader(mustRead(t, m.foldStatePath())); err != nil || h.Seq != a {
			t.Fatalf("the stop's state: %+v %v; want it at %d", h, err, a)
		}
		// The operator distrusts the saved state: the first round does too,
		// and folds the whole log; the next builds on the first.
		m = start(t, dir, &logs, true)
		b := send(t, m, "b", 20)
		round(t, m, &logs, 0, b)
		c := send(t, m, "c", 5)
		round(t, m, &logs, b, c)
	})

	// A state whose checksum holds but whose load fails part way (the
	// folds are loaded, the outbox, last, is not) is folded around from
	// fresh folds: the half-loaded ones, folded again from the first
	// event, would count every event before it twice.
	t.Run("a state that fails to load part way", func(t *testing.T) {
		var logs lockedBuffer
		m := start(t, t.TempDir(), &logs, false)
		a := send(t, m, "a", 50)
		round(t, m, &logs, 0, a)
		raw := mustRead(t, m.foldStatePath())
		body := raw[len(statecodecMagic()) : len(raw)-sha256.Size]
		r := statecodec.NewReader(body)
		w := statecodec.NewWriter([]byte(statecodecMagic()))
		w.Uint(r.Uint())
		n := r.Len(2)
		w.Len(n)
		for range 2 * n {
			w.String(r.String())
		}
		w.Uint(r.Uint())
		w.String(r.String())
		w.Time(r.Time())
		n = r.Len(2) // the digests
		w.Len(n)
		for range 2 * n {
			w.String(r.String())
		}
		n = r.Len(2)
		w.Len(n)
		for range n {
			name, blob := r.String(), r.Blob()
			if name == "outbox" {
				blob = []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}
			}
			w.String(name)
			w.Blob(blob)
		}
		if err := r.Done(); err != nil {
			t.Fatal(err)
		}
		crafted := w.Bytes()
		sum := sha256.Sum256(crafted)
		crafted = append(crafted, sum[:]...)
		if err := os.WriteFile(m.foldStatePath(), crafted, 0o600); err != nil {
			t.Fatal(err)
		}
		c := send(t, m, "c", 10)
		round(t, m, &logs, 0, c)
		var live []byte
		var err error
		m.runner.View(func(uint64) { live, err = m.stats.Snapshot() })
		if err != nil {
			t.Fatal(err)
		}
		cfg := m.foldConfig
		cfg.Verdicts = nil
		f, out := newFolds(cfg)
		if _, err := projections.LoadState(mustRead(t, m.foldStatePath()), f, out); err != nil {
			t.Fatal(err)
		}
		saved, err := f.Stats.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		if string(saved) != string(live) {
			t.Fatalf("the round's state counts\n%s\nwhere the live folds count\n%s", saved, live)
		}
	})

	// A state the start refused (it loads, but its own stop's record
	// disowns it) is not built on by a round either: the round's result
	// is at another sequence than the record's, so the next start, after
	// a crash, would load it unchecked and carry whatever was wrong in it.
	t.Run("a state the start refused", func(t *testing.T) {
		dir := t.TempDir()
		var logs lockedBuffer
		m := start(t, dir, &logs, false)
		a := send(t, m, "a", 40)
		if err := m.Close(ctx); err != nil {
			t.Fatal(err)
		}
		rp := filepath.Join(dir, "keys", lastStopFile)
		var rec lastStop
		if err := json.Unmarshal(mustRead(t, rp), &rec); err != nil || rec.Ledger == "" || rec.AppliedSeq != a {
			t.Fatalf("the last stop's record: %+v %v", rec, err)
		}
		rec.Ledger = strings.Repeat("0", 64)
		b, _ := json.Marshal(rec)
		if err := os.WriteFile(rp, b, 0o600); err != nil {
			t.Fatal(err)
		}
		var logs2 lockedBuffer
		m = start(t, dir, &logs2, false)
		<-m.runner.Ready()
		if !strings.Contains(logs2.String(), "the saved state's ledger digest is") {
			t.Fatalf("the start did not refuse the state:\n%s", logs2.String())
		}
		c := send(t, m, "c", 5)
		round(t, m, &logs2, 0, c)
	})
}

// TestAPanickingRoundLeavesTheNodeServing: a panic in a background save
// (a bug in loading or folding its copy) is a failed round, counted and
// logged with its stack; the rounds stop for this run, and the node goes
// on answering and saves its state at the stop as ever. Unrecovered, the
// panic stopped the node every --save-state-every.
func TestAPanickingRoundLeavesTheNodeServing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var logs lockedBuffer
	var calls atomic.Int32
	cfg := DefaultConfig()
	cfg.Relay = false
	cfg.DataDir = t.TempDir()
	cfg.Listen, cfg.UDP, cfg.HTTP, cfg.NATSListen, cfg.TLSListen = "127.0.0.1:0", "", "", "", ""
	cfg.SaveStateEvery = 20 * time.Millisecond
	cfg.afterRoundLoad = func() {
		calls.Add(1)
		panic("a bug in the copy")
	}
	m := NewMain(cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	if err := m.Run(ctx); err != nil {
		m.Close(ctx)
		t.Fatal(err)
	}
	defer m.Close(context.Background())

	sendTasks(t, m.TCPAddr(), "a", 20)
	select {
	case <-m.checkpoints.done:
	case <-ctx.Done():
		t.Fatalf("the rounds did not stop after a panic (%d rounds reached the load):\n%s", calls.Load(), logs.String())
	}
	if n, f := calls.Load(), m.checkpoints.failures.Load(); n != 1 || f != 1 {
		t.Fatalf("%d rounds reached the load and %d failed; want the one that panicked, and no more", n, f)
	}
	for _, want := range []string{`level=ERROR msg="the fold state was not saved in the background, and will not be until the next start`, "a bug in the copy", "goroutine "} {
		if !strings.Contains(logs.String(), want) {
			t.Fatalf("the log does not say %q:\n%s", want, logs.String())
		}
	}
	sendTasks(t, m.TCPAddr(), "b", 20) // still answering
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), `msg="fold state saved for the next start"`) {
		t.Fatalf("the stop did not save the state:\n%s", logs.String())
	}
}
