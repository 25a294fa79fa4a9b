package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aglx/ledger/projections"
)

// buildConfig is a node on dir, on loopback ports, serving HTTP and NATS
// (which a preparation reads), as the given build (Config.build).
func buildConfig(dir, build string) Config {
	cfg := DefaultConfig()
	cfg.Relay = false
	cfg.DataDir = dir
	cfg.Listen, cfg.UDP, cfg.HTTP, cfg.NATSListen, cfg.TLSListen = "127.0.0.1:0", "", "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.build = build
	return cfg
}

// TestAnUpgradeStartsFromThePreparedState: a new build folds the log of the
// running old one ahead of its start (--prepare-state-from, over the old
// node's NATS as a reader), and again later from where it stopped; the
// old node stops and saves a state the new build cannot use; the new
// build's start takes up the prepared state instead, folds only what
// came after it, serves what a full replay serves, and removes the
// prepared state once it has saved one of its own. One test binary plays
// both builds (Config.build).
func TestAnUpgradeStartsFromThePreparedState(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	config := func(build string) Config { return buildConfig(dir, build) }
	start := func(t *testing.T, cfg Config, logs *lockedBuffer) *Main {
		t.Helper()
		m := NewMain(cfg, slog.New(slog.NewTextHandler(logs, nil)))
		if err := m.Run(ctx); err != nil {
			m.Close(ctx)
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close(context.Background()) })
		<-m.runner.Ready()
		return m
	}
	prepare := func(t *testing.T, cfg Config, logs *lockedBuffer, old *Main) error {
		t.Helper()
		// An ack means durable in the write-ahead stream; the event stream,
		// which a preparation reads, has it moments later.
		if err := old.log.WaitPublished(ctx, old.log.Durable()); err != nil {
			t.Fatal(err)
		}
		return NewMain(cfg, slog.New(slog.NewTextHandler(logs, nil))).prepareState(ctx)
	}
	preparedPath := filepath.Join(dir, "keys", preparedStateFile)
	preparedAt := func(t *testing.T) uint64 {
		t.Helper()
		h, err := projections.ReadStateHeader(mustRead(t, preparedPath))
		if err != nil || h.Identity["binary_sha256"] != "new" {
			t.Fatalf("the prepared state: %+v %v; want one of the new build", h, err)
		}
		return h.Seq
	}

	var oldLogs lockedBuffer
	old := start(t, config("old"), &oldLogs)
	s := lfNewSession(t, old)
	node := lfParty{uri: old.cfg.Name, key: old.key}
	owner, worker := s.boundPair(t, "agent://owner.local", "agent://worker.local")
	lfExpect(t, s.transfer(t, node, owner.uri, "100", "mint-1"), "ack", 200)
	lfExpect(t, s.transfer(t, owner, worker.uri, "2.5", "p-1"), "ack", 200)
	sendTasks(t, old.TCPAddr(), "a", 40)

	newCfg := config("new")
	newCfg.PrepareStateFrom = old.NATSURL()
	var prepLogs lockedBuffer
	if err := prepare(t, newCfg, &prepLogs, old); err != nil {
		t.Fatalf("%v\n%s", err, prepLogs.String())
	}
	first := preparedAt(t)
	if end := old.log.Durable(); first != end {
		t.Fatalf("the preparation stands at %d; the log ended at %d", first, end)
	}
	// Run again later, it takes up its own earlier work.
	lfExpect(t, s.transfer(t, owner, worker.uri, "1", "p-2"), "ack", 200)
	sendTasks(t, old.TCPAddr(), "b", 20)
	prepLogs = lockedBuffer{}
	if err := prepare(t, newCfg, &prepLogs, old); err != nil {
		t.Fatalf("%v\n%s", err, prepLogs.String())
	}
	second := preparedAt(t)
	if want := fmt.Sprintf("from_seq=%d to_seq=%d", first+1, second); second <= first || !strings.Contains(prepLogs.String(), want) {
		t.Fatalf("the second preparation did not fold on from the first (%d to %d, want %q):\n%s", first, second, want, prepLogs.String())
	}

	// The old node takes more, then stops: its state is the old build's.
	lfExpect(t, s.transfer(t, owner, worker.uri, "0.5", "p-3"), "ack", 200)
	sendTasks(t, old.TCPAddr(), "c", 10)
	paths := []string{"/v1/ledger/digest", "/v1/agents", "/v1/handshakes", "/v1/reputation", "/v1/stats",
		"/v1/accounts/" + lfAPIPath(owner.uri), "/v1/accounts/" + lfAPIPath(worker.uri) + "/entries"}
	served := func(t *testing.T, m *Main) map[string][]byte {
		t.Helper()
		out := map[string][]byte{}
		for _, p := range paths {
			out[p] = lfGet(t, m, p, m.log.Durable())
		}
		return out
	}
	end := old.log.Durable()
	if err := old.Close(ctx); err != nil {
		t.Fatal(err)
	}

	var newLogs lockedBuffer
	upgraded := start(t, config("new"), &newLogs)
	if out := newLogs.String(); !strings.Contains(out, "the state prepared for this build is") ||
		!strings.Contains(out, fmt.Sprintf(`"projections: replaying the log" from_seq=%d to_seq=%d`, second+1, end)) {
		t.Fatalf("the new build's start did not take up the prepared state at %d and fold to %d:\n%s", second, end, out)
	}
	got := served(t, upgraded)
	if err := upgraded.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(preparedPath); !os.IsNotExist(err) {
		t.Fatalf("the prepared state is still there after the new build saved its own: %v", err)
	}
	// The next upgrade, prepared for while the node runs on a prepared
	// state of its own, before it saved one: the file it loaded is gone
	// (prepared again), and its stop leaves the next build's.
	current := start(t, config("new"), &newLogs)
	next := config("newer")
	next.PrepareStateFrom = current.NATSURL()
	if err := prepare(t, next, &prepLogs, current); err != nil {
		t.Fatal(err)
	}
	if err := current.Close(ctx); err != nil {
		t.Fatal(err)
	}
	current = start(t, config("newer"), &newLogs)
	if current.stateLoadedFrom != preparedPath {
		t.Fatalf("the next build's start loaded %q, not the state prepared for it", current.stateLoadedFrom)
	}
	after := config("newest")
	after.PrepareStateFrom = current.NATSURL()
	if err := prepare(t, after, &prepLogs, current); err != nil {
		t.Fatal(err)
	}
	if err := current.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if h, err := projections.ReadStateHeader(mustRead(t, preparedPath)); err != nil || h.Identity["binary_sha256"] != "newest" {
		t.Fatalf("the state prepared for the build after, once the one that ran on a prepared state stopped: %+v %v", h, err)
	}
	full := config("new")
	full.FullReplay = true
	var fullLogs lockedBuffer
	want := served(t, start(t, full, &fullLogs))
	for _, p := range paths {
		if !bytes.Equal(got[p], want[p]) {
			t.Errorf("GET %s after the upgrade serves\n%s\nwhere a full replay serves\n%s", p, got[p], want[p])
		}
	}
}

// TestPrepareStateFromTheCommandLine: aglxd --prepare-state-from, the real
// binary beside a running node, writes the prepared state and exits 0,
// and leaves the running node and its data dir's records alone; with
// another node's name it refuses, and writes nothing.
func TestPrepareStateFromTheCommandLine(t *testing.T) {
	dir := t.TempDir()
	p := startProcess(t, dir)
	sendTasks(t, p.tcp, "a", 50)
	run := func(t *testing.T, args ...string) (string, error) {
		t.Helper()
		cmd := exec.Command(aglxdBinary(t), append([]string{"--data", dir, "--log-format", "json", "--prepare-state-from", p.natsURL}, args...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	path := filepath.Join(dir, "keys", preparedStateFile)
	if out, err := run(t, "--name", "registry://other.local"); err == nil || !strings.Contains(out, "not this node's") {
		t.Fatalf("a preparation under another name: %v\n%s", err, out)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("a refused preparation left %s: %v", path, err)
	}
	// The acks came after the write-ahead stream; the event stream the
	// preparation reads has the events moments later.
	var h projections.StateHeader
	for deadline := time.Now().Add(30 * time.Second); h.Seq < 50; time.Sleep(50 * time.Millisecond) {
		out, err := run(t)
		if err != nil || !strings.Contains(out, "fold state prepared") {
			t.Fatalf("the preparation: %v\n%s", err, out)
		}
		if h, err = projections.ReadStateHeader(mustRead(t, path)); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the preparation stands at %d of 50", h.Seq)
		}
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the prepared state: %v %v; want a file only the node reads", fi, err)
	}
	if _, err := os.Stat(filepath.Join(dir, runningFile)); err != nil {
		t.Fatalf("the running node's record is gone after the preparation: %v", err)
	}
	sendTasks(t, p.tcp, "b", 5) // the node still serves
}

// TestAPreparedStateAtTheOldStopIsComparedNotRefused: prepared after the
// old build's last event, the state stands where the old build's stop
// recorded its digests. The record cannot vouch for another build's
// state, so the start takes the state up and compares the two builds
// there, as a replay passing the event would, instead of refusing it and
// replaying the whole log.
func TestAPreparedStateAtTheOldStopIsComparedNotRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	config := func(build string) Config { return buildConfig(dir, build) }
	var oldLogs lockedBuffer
	old := NewMain(config("old"), slog.New(slog.NewTextHandler(&oldLogs, nil)))
	if err := old.Run(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { old.Close(context.Background()) })
	sendTasks(t, old.TCPAddr(), "a", 30)
	end := old.log.Durable()
	if err := old.log.WaitPublished(ctx, end); err != nil {
		t.Fatal(err)
	}
	if err := old.runner.WaitFor(ctx, end); err != nil {
		t.Fatal(err)
	}
	prep := config("new")
	prep.PrepareStateFrom = old.NATSURL()
	var prepLogs lockedBuffer
	if err := NewMain(prep, slog.New(slog.NewTextHandler(&prepLogs, nil))).prepareState(ctx); err != nil {
		t.Fatalf("%v\n%s", err, prepLogs.String())
	}
	if err := old.Close(ctx); err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	m := NewMain(config("new"), slog.New(slog.NewTextHandler(&logs, nil)))
	if err := m.Run(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	<-m.runner.Ready()
	out := logs.String()
	if !strings.Contains(out, "the state prepared for this build is") || strings.Contains(out, "projections: replaying the log") {
		t.Fatalf("the start did not take up the state prepared at the old stop's event %d:\n%s", end, out)
	}
	if want := fmt.Sprintf(`msg="the log folds as at the last stop, though these changed" seq=%d last_version=old version=`, end); !strings.Contains(out, want) {
		t.Fatalf("the start did not compare the two builds at the old stop's event (%q):\n%s", want, out)
	}
}
