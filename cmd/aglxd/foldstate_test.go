package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aglx/ledger/projections"
	"github.com/aglx/ledger/protocol"
)

// TestAStartTakesUpTheSavedFolds: a clean stop saves the folds, and the
// next start loads them and folds only the events after them, to the same
// state a full replay gives; a start whose state is damaged, of other
// inputs or of another log replays the whole log instead, and says why.
// Every start here must serve the same ledger, accounts and registry as
// the node that stopped.
func TestAStartTakesUpTheSavedFolds(t *testing.T) {
	dir := t.TempDir()
	run := func(t *testing.T, dir string, logs *lockedBuffer, edit func(*Config)) *Main {
		t.Helper()
		cfg := DefaultConfig()
		cfg.Relay = false
		cfg.DataDir = dir
		cfg.Listen, cfg.UDP, cfg.HTTP, cfg.NATSListen, cfg.TLSListen = "127.0.0.1:0", "", "127.0.0.1:0", "", "127.0.0.1:0"
		if edit != nil {
			edit(&cfg)
		}
		m := NewMain(cfg, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
		if err := m.Run(context.Background()); err != nil {
			m.Close(context.Background())
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close(context.Background()) })
		return m
	}
	stop := func(t *testing.T, m *Main) {
		t.Helper()
		if err := m.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	var logs lockedBuffer
	m := run(t, dir, &logs, nil)
	s := lfNewSession(t, m)
	node := lfParty{uri: m.cfg.Name, key: m.key}
	owner, worker := s.boundPair(t, "agent://owner.local", "agent://worker.local")
	lfExpect(t, s.transfer(t, node, owner.uri, "100.50", "mint-1"), "ack", 200)
	lfExpect(t, s.transfer(t, owner, worker.uri, "0.1", "p-1"), "ack", 200)
	appr := `{"approved_amount":12.5,"transaction_id":"appr-1","expires":"` + time.Now().UTC().Add(time.Hour).Format(time.RFC3339) + `","timestamp":"` + lfNow() + `"}`
	lfExpect(t, s.send(t, owner.signed(t, worker.uri, protocol.TypeCreditApprove, appr)), "ack", 200)
	lfExpect(t, s.transfer(t, owner, worker.uri, "500", "too-much"), "error", 402)
	last := s.last

	paths := []string{"/v1/ledger/digest", "/v1/ledger/mismatches", "/v1/agents", "/v1/handshakes", "/v1/reputation"}
	for _, uri := range []string{node.uri, owner.uri, worker.uri} {
		paths = append(paths, "/v1/accounts/"+lfAPIPath(uri), "/v1/accounts/"+lfAPIPath(uri)+"/entries", "/v1/agents/"+lfAPIPath(uri))
	}
	served := func(t *testing.T, m *Main, seq uint64) map[string][]byte {
		t.Helper()
		out := map[string][]byte{}
		for _, p := range paths {
			out[p] = lfGet(t, m, p, seq)
		}
		return out
	}
	same := func(t *testing.T, what string, got, want map[string][]byte) {
		t.Helper()
		for _, p := range paths {
			if !bytes.Equal(got[p], want[p]) {
				t.Errorf("%s: GET %s serves\n%s\nwhere the node that stopped served\n%s", what, p, got[p], want[p])
			}
		}
	}
	want := served(t, m, last)
	stop(t, m)
	path := filepath.Join(dir, "keys", foldStateFile)
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the saved state %s: %v %v; want a file only the node reads", path, fi, err)
	}

	t.Run("taken up", func(t *testing.T) {
		var logs lockedBuffer
		m := run(t, dir, &logs, nil)
		<-m.runner.Ready()
		if !strings.Contains(logs.String(), "folds loaded from the saved state") || strings.Contains(logs.String(), "projections: replaying the log") {
			t.Fatalf("the start did not take up the saved folds:\n%s", logs.String())
		}
		same(t, "the start from the saved folds", served(t, m, last), want)
		// The folds go on from there as if they had never stopped: a
		// resend of a booked transfer is its first outcome again and
		// moves nothing, a new one books.
		s := lfNewSession(t, m)
		lfExpect(t, s.transfer(t, owner, worker.uri, "0.1", "p-1"), "ack", 200)
		lfExpect(t, s.transfer(t, owner, worker.uri, "0.4", "p-2"), "ack", 200)
		lfExpectAccount(t, m, worker.uri, s.last, "0.5", "0.5", "0")
		last = s.last
		want = served(t, m, last)
		stop(t, m)
	})

	for _, tc := range []struct {
		name    string
		prepare func(t *testing.T) // before the start
		edit    func(*Config)
		say     string // in the start's log
	}{
		{"--full-replay", nil, func(c *Config) { c.FullReplay = true }, "--full-replay: the folds replay the whole log"},
		{"a damaged state", func(t *testing.T) {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 0x40
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}, nil, "the saved fold state cannot be used; the folds replay the whole log"},
		// A state that loads but does not match what the stop that saved
		// it recorded (lastStop's digests) is not used.
		{"a state its own stop's record disowns", func(t *testing.T) {
			rp := filepath.Join(dir, "keys", lastStopFile)
			b, err := os.ReadFile(rp)
			var rec lastStop
			if err != nil || json.Unmarshal(b, &rec) != nil || rec.Ledger == "" {
				t.Fatalf("the last stop's record: %s %v", b, err)
			}
			rec.Ledger = strings.Repeat("0", 64)
			b, _ = json.Marshal(rec)
			if err := os.WriteFile(rp, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}, nil, "the saved state's ledger digest is"},
		{"other inputs", nil, func(c *Config) { c.SyncFrom = []string{"registry://peer.local"} }, "why=\"saved under another sync_from\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.prepare != nil {
				tc.prepare(t)
			}
			var logs lockedBuffer
			m := run(t, dir, &logs, tc.edit)
			<-m.runner.Ready()
			out := logs.String()
			if !strings.Contains(out, tc.say) || !strings.Contains(out, "projections: replaying the log\" from_seq=1 ") {
				t.Fatalf("the start's log lacks %q and a replay from the first event:\n%s", tc.say, out)
			}
			same(t, tc.name, served(t, m, last), want)
			stop(t, m)
		})
	}

	t.Run("another log", func(t *testing.T) {
		// The key directory, saved state and all, beside a new store.
		other := t.TempDir()
		if err := os.CopyFS(filepath.Join(other, "keys"), os.DirFS(filepath.Join(dir, "keys"))); err != nil {
			t.Fatal(err)
		}
		var logs lockedBuffer
		m := run(t, other, &logs, nil)
		<-m.runner.Ready()
		if out := logs.String(); !strings.Contains(out, "another log") || strings.Contains(out, "folds loaded") {
			t.Fatalf("a start on another log took up the saved folds:\n%s", out)
		}
		resp, err := http.Get("http://" + m.HTTPAddr() + "/v1/accounts/" + lfAPIPath(owner.uri))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("a start on a new log serves the old log's account: %d", resp.StatusCode)
		}
		stop(t, m)
	})
}

// sendTasks sends n task.result frames with IDs prefix-0 and on, pipelined
// on one connection, and waits for every ack.
func sendTasks(t *testing.T, addr, prefix string, n int) {
	t.Helper()
	c := dial(t, addr)
	defer c.Close()
	for i := range n {
		f := lfFrame("agent://load.local", "agent://sink.local", protocol.TypeTaskResult, fmt.Sprintf(`{"task_id":"%s-%d","status":"SUCCESS"}`, prefix, i))
		f.Headers = append(f.Headers, protocol.Header{Name: "ID", Value: fmt.Sprintf("%s-%d", prefix, i)})
		if err := c.WriteFrame(f); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if f, err := c.ReadReply(); err != nil || f.Type() != "ack" {
			t.Fatalf("reply %d: %v %v", i, f, err)
		}
	}
}

// TestAStartAfterACrashTakesUpTheLastCleanStop: the state a clean stop
// saved stays good for its log, which only grows, so a start after a
// crash (SIGKILL) takes it up and folds everything since, to the state a
// full replay gives. The real binary, stopped by signals.
func TestAStartAfterACrashTakesUpTheLastCleanStop(t *testing.T) {
	dir := t.TempDir()
	p := startProcess(t, dir)
	sendTasks(t, p.tcp, "before", 300)
	p.cmd.Process.Signal(syscall.SIGTERM)
	if err := <-p.exited; err != nil {
		t.Fatalf("aglxd exited with %v after SIGTERM\n%v", err, p.log())
	}
	p.exited <- nil
	var saved uint64
	if h, err := projections.ReadStateHeader(mustRead(t, filepath.Join(dir, "keys", foldStateFile))); err != nil || h.Seq != 300 {
		t.Fatalf("the clean stop's saved state: %+v %v; want it at seq 300", h, err)
	} else {
		saved = h.Seq
	}

	p = startProcess(t, dir)
	sendTasks(t, p.tcp, "after", 200)
	p.cmd.Process.Kill()
	if err := <-p.exited; err == nil {
		t.Fatal("aglxd exited cleanly after SIGKILL?")
	}
	p.exited <- errors.New("killed")

	resumed := startProcess(t, dir)
	waitReady(t, resumed)
	if !resumed.logged(`"msg":"folds loaded from the saved state`) || !resumed.logged(fmt.Sprintf(`"from_seq":%d,"to_seq":500`, saved+1)) {
		t.Fatalf("the start after the crash did not take up the saved state and fold the rest:\n%v", resumed.log())
	}
	foldsAsAFullReplay(t, dir, resumed, 500)
}

// foldsAsAFullReplay checks that resumed, a node that took up a saved state
// after a crash, counts events in all and folded what a full replay of
// its log folds; it stops resumed and starts the replay in dir.
func foldsAsAFullReplay(t *testing.T, dir string, resumed *nodeProcess, events uint64) {
	t.Helper()
	got := foldedStats(t, resumed)
	var counted struct {
		Events uint64 `json:"events"`
	}
	if json.Unmarshal([]byte(got), &counted); counted.Events != events {
		t.Fatalf("the folds after the crash count %s; want %d events", got, events)
	}
	resumed.cmd.Process.Signal(syscall.SIGTERM)
	<-resumed.exited
	resumed.exited <- nil

	full := startProcess(t, dir, "--full-replay")
	waitReady(t, full)
	if want := foldedStats(t, full); got != want {
		t.Errorf("the folds after the crash, from the saved state:\n%s\nfrom a full replay:\n%s", got, want)
	}
}

// foldedStats is what p's stats fold counted of the log. It counts every
// event, by type, sender and transport, with the first and last: an
// event skipped or folded twice shows.
func foldedStats(t *testing.T, p *nodeProcess) string {
	t.Helper()
	var v struct {
		Log json.RawMessage `json:"log"`
	}
	if err := json.Unmarshal(httpGet(t, p.http, "/v1/stats"), &v); err != nil || len(v.Log) == 0 {
		t.Fatalf("/v1/stats: %v", err)
	}
	return string(v.Log)
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// waitReady polls the node's /readyz until its folds hold the log.
func waitReady(t *testing.T, p *nodeProcess) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		resp, err := http.Get("http://" + p.http + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("never ready: %v\n%v", err, p.log())
		}
	}
}

func httpGet(t *testing.T, addr, path string) []byte {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s %v", path, resp.StatusCode, b, err)
	}
	return b
}
