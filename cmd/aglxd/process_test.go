package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aglx/ledger/bridge"
	"github.com/aglx/ledger/events"
	"github.com/nats-io/nats.go"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// aglxdBinary builds the real command once per test run.
func aglxdBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "aglxd-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "aglxd")
		out, err := exec.Command("go", "build", "-race", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			// The race detector is not available everywhere; build without.
			out, err = exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		}
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// nodeProcess is aglxd running as its own process.
type nodeProcess struct {
	cmd      *exec.Cmd
	tcp      string
	http     string
	natsURL  string
	exited   chan error
	stderrMu sync.Mutex
	stderr   []string
}

// startProcess starts aglxd on random loopback ports and waits until it
// logs where it serves. The process is killed, by its PID, when the test ends.
func startProcess(t *testing.T, dataDir string, flags ...string) *nodeProcess {
	t.Helper()
	cmd := exec.Command(aglxdBinary(t), append([]string{"--data", dataDir, "--listen", "127.0.0.1:0", "--tls-listen", "127.0.0.1:0", "--udp", "127.0.0.1:0",
		"--http", "127.0.0.1:0", "--nats-listen", "127.0.0.1:0", "--log-format", "json", "--relay=false"}, flags...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &nodeProcess{cmd: cmd, exited: make(chan error, 1)}
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.exited
	})
	serving := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.stderrMu.Lock()
			p.stderr = append(p.stderr, sc.Text())
			p.stderrMu.Unlock()
			var rec map[string]any
			if json.Unmarshal(sc.Bytes(), &rec) != nil {
				continue
			}
			if url, ok := rec["client_url"].(string); ok {
				p.natsURL = url
			}
			if rec["msg"] == "aglxd serving" {
				p.tcp, _ = rec["tcp"].(string)
				p.http, _ = rec["http"].(string)
				close(serving)
			}
		}
		p.exited <- cmd.Wait()
	}()
	select {
	case <-serving:
	case err := <-p.exited:
		p.exited <- err
		t.Fatalf("aglxd exited at start: %v\n%v", err, p.log())
	case <-time.After(60 * time.Second):
		t.Fatalf("aglxd did not start:\n%v", p.log())
	}
	return p
}

// logged reports whether a line of the node's log so far contains s.
func (p *nodeProcess) logged(s string) bool {
	for _, l := range p.log() {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

func (p *nodeProcess) log() []string {
	p.stderrMu.Lock()
	defer p.stderrMu.Unlock()
	return append([]string(nil), p.stderr...)
}

// pipelineUntil streams frames with ID headers on one connection and calls
// stop once `after` acks have come back. It returns the acks it read, by ID.
func pipelineUntil(t *testing.T, addr string, total, after int, stop func()) map[string]ackBody {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	c, err := bridge.Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Conn().SetDeadline(time.Now().Add(120 * time.Second))
	go func() {
		for i := 0; i < total; i++ {
			if c.Write([]byte(fmt.Sprintf("AGLX/1.0 TCP\nFROM: agent://load.local\nTO: agent://sink.local\nTYPE: task.result\nID: f-%d\n\n{\"task_id\":\"t%d\",\"status\":\"SUCCESS\"}\n", i, i))) != nil {
				return
			}
			if i%64 == 63 && c.Flush() != nil {
				return
			}
		}
		c.CloseWrite()
	}()
	acks := map[string]ackBody{}
	for {
		f, err := c.ReadReply()
		if err != nil {
			return acks // EOF, reset: the node is gone or done
		}
		if f.Type() != "ack" {
			t.Errorf("reply %s: %s", f.Type(), f.Body)
			continue
		}
		var a ackBody
		json.Unmarshal(f.Body, &a)
		acks[f.Value("IN-REPLY-TO")] = a
		if len(acks) == after {
			stop()
		}
	}
}

// storedByID reads the whole log of a node and returns its events by the
// frame's ID header, failing on any ID stored twice.
func storedByID(t *testing.T, natsURL string) map[string]*events.Envelope {
	t.Helper()
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l, err := events.Attach(ctx, nc, events.StreamNameDefault)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*events.Envelope{}
	err = l.Read(ctx, events.ReadOptions{}, func(e *events.Envelope) error {
		id := e.Header("ID")
		if prev, dup := out[id]; dup {
			return fmt.Errorf("frame %s stored twice: seq %d and %d", id, prev.Seq, e.Seq)
		}
		out[id] = e
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSIGTERMAnswersWhatWasRead stops the node in the middle of a pipelined
// load: it exits 0, every reply it sent is an ack, and every acked frame is
// in the log after a restart, which does not say the last run did not
// stop cleanly.
func TestSIGTERMAnswersWhatWasRead(t *testing.T) {
	dir := t.TempDir()
	p := startProcess(t, dir)
	acks := pipelineUntil(t, p.tcp, 5000, 200, func() { p.cmd.Process.Signal(syscall.SIGTERM) })
	select {
	case err := <-p.exited:
		p.exited <- err
		if err != nil {
			t.Fatalf("aglxd exited with %v after SIGTERM\n%v", err, p.log())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("aglxd did not exit after SIGTERM")
	}
	again := startProcess(t, dir)
	checkAcksStored(t, again, acks)
	if again.logged("did not stop cleanly") {
		t.Fatalf("the start after a clean stop says the last run did not stop cleanly:\n%v", again.log())
	}
}

// TestSecondSIGTERMSaysItStopsAtOnce sends a second SIGTERM while the node
// is stopping: the process ends by the signal, as the signal's default
// would, after a log line that says so (it used to end without a word), or,
// when the stop was done first, exits 0. Either way every acked frame is in
// the log after a restart.
func TestSecondSIGTERMSaysItStopsAtOnce(t *testing.T) {
	dir := t.TempDir()
	p := startProcess(t, dir)
	acks := pipelineUntil(t, p.tcp, 5000, 200, func() {
		p.cmd.Process.Signal(syscall.SIGTERM)
		deadline := time.Now().Add(30 * time.Second)
		for !p.logged("shutting down") && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond) // a poll: the line comes from another process
		}
		p.cmd.Process.Signal(syscall.SIGTERM)
	})
	var err error
	select {
	case err = <-p.exited:
		p.exited <- err
	case <-time.After(60 * time.Second):
		t.Fatal("aglxd did not exit after two SIGTERMs")
	}
	var exit *exec.ExitError
	switch {
	case err == nil:
		if !p.logged(`"msg":"stopped"`) {
			t.Fatalf("exit 0 without the stopped line:\n%v", p.log())
		}
		t.Log("the stop was done before the second signal")
	case errors.As(err, &exit) && exit.ProcessState.Sys().(syscall.WaitStatus).Signal() == syscall.SIGTERM:
		if !p.logged("a second signal: stopping at once") {
			t.Fatalf("ended by the second SIGTERM without saying so:\n%v", p.log())
		}
	default:
		t.Fatalf("aglxd ended with %v after two SIGTERMs, not by the signal or with 0\n%v", err, p.log())
	}
	checkAcksStored(t, startProcess(t, dir), acks)
}

// TestSIGKILLLosesNoAckedFrame kills the node without warning in the middle
// of a pipelined load. After a restart every frame whose ack the client saw
// is in the log exactly once, and the start says first that the last run
// did not stop cleanly, so that the recovery's warnings after it are read
// as such (helper-109).
func TestSIGKILLLosesNoAckedFrame(t *testing.T) {
	dir := t.TempDir()
	p := startProcess(t, dir)
	acks := pipelineUntil(t, p.tcp, 5000, 300, func() { p.cmd.Process.Kill() })
	if err := <-p.exited; err == nil {
		t.Fatal("aglxd exited cleanly after SIGKILL?")
	}
	p.exited <- errors.New("killed")
	again := startProcess(t, dir)
	checkAcksStored(t, again, acks)
	if !again.logged("the last run here did not stop cleanly") {
		t.Fatalf("the start after a SIGKILL does not say the last run did not stop cleanly:\n%v", again.log())
	}
}

func checkAcksStored(t *testing.T, p *nodeProcess, acks map[string]ackBody) {
	t.Helper()
	if len(acks) == 0 {
		t.Fatal("no acks were read before the stop")
	}
	stored := checkStoredOnce(t, p.natsURL, acks)
	t.Logf("%d acked, %d stored", len(acks), stored)
}

// checkStoredOnce reads the log at natsURL and fails unless every acked
// frame (by its ID header) is in it once, at the sequence and event its ack
// named. It returns how many events the log holds.
func checkStoredOnce(t *testing.T, natsURL string, acks map[string]ackBody) int {
	t.Helper()
	stored := storedByID(t, natsURL) // fails on an ID stored twice
	for id, a := range acks {
		e, ok := stored[id]
		if !ok {
			t.Fatalf("frame %s was acked (seq %d) but is not in the log", id, a.Seq)
		}
		if e.Seq != a.Seq || e.ID != a.EventID {
			t.Fatalf("frame %s acked as seq %d event %s, stored as seq %d event %s", id, a.Seq, a.EventID, e.Seq, e.ID)
		}
	}
	return len(stored)
}
