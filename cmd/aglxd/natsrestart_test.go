package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// startNATSAt starts a NATS server with JetStream that keeps its store in
// dir and listens on port (server.RANDOM_PORT for any). It is not stopped
// at the end of the test: the caller stops it, or registers that.
func startNATSAt(t *testing.T, dir string, port int) (*server.Server, error) {
	t.Helper()
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: dir, SyncAlways: true, NoSigs: true,
		MaxPayload: operatorMaxPayload})
	if err != nil {
		return nil, err
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		ns.Shutdown()
		return nil, fmt.Errorf("nats-server on port %d did not start", port)
	}
	return ns, nil
}

// restartNATSAt starts the NATS server again on the port it had, trying
// for a while: the port was just freed, and on a shared machine it may be
// slow to come free, or briefly taken (helper-110). It fails the test
// rather than return no server, which the cleanup that stops the current
// one would not survive.
func restartNATSAt(t *testing.T, dir string, port int) *server.Server {
	t.Helper()
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var ns *server.Server
		if ns, err = startNATSAt(t, dir, port); err == nil {
			return ns
		}
		if time.Now().After(deadline) {
			t.Fatalf("the NATS server did not start again on port %d: %v", port, err)
		}
	}
}

// restartFrame is frame i of the restart test: a task.result with its own
// ID, so that a resend is recognised.
func restartFrame(i int) []byte {
	return fmt.Appendf(nil, "AGLX/1.0 TCP\nFROM: agent://load.local\nTO: agent://sink.local\nTYPE: task.result\nID: r-%d\n\n{\"task_id\":\"t%d\",\"status\":\"SUCCESS\"}\n", i, i)
}

// TestNATSServerRestart restarts the operator's NATS server (--nats-url)
// in the middle of a pipelined load. While it is away, no frame is acked
// that is not stored: each is either acked or refused with 503, the
// status that tells an agent to resend. After it is back, the node takes
// frames again without a restart of its own; the refused frames, resent
// with the same IDs, are acked; and every acked frame is in the log
// exactly once, at the sequence its ack gave.
func TestNATSServerRestart(t *testing.T) {
	storeDir := t.TempDir()
	ns, err := startNATSAt(t, storeDir, server.RANDOM_PORT)
	if err != nil {
		t.Fatal(err)
	}
	port := ns.Addr().(*net.TCPAddr).Port
	var mu sync.Mutex
	current := ns
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		current.Shutdown()
		current.WaitForShutdown()
	})
	// An ack timeout far beyond the test's deadlines: a request lost with
	// the server must end when the connection drops, not when it times out.
	m := startNodeWith(t, t.TempDir(), func(c *Config) { c.NATSURL = ns.ClientURL(); c.ackTimeout = 10 * time.Minute })

	const total, restartAfter = 3000, 300
	c := dial(t, m.TCPAddr())
	c.Conn().SetDeadline(time.Now().Add(120 * time.Second))
	// The writer holds back the second half of the frames until the
	// restart has begun, so that they meet it even on a slow machine.
	restarting := make(chan struct{})
	go func() {
		for i := range total {
			if i == total/2 {
				c.Flush()
				<-restarting
			}
			if c.Write(restartFrame(i)) != nil {
				return
			}
			if i%64 == 63 && c.Flush() != nil {
				return
			}
		}
		c.Flush()
	}()
	restarted := make(chan error, 1)
	acks := map[string]ackBody{}
	var refused []int
	for range total {
		f, err := c.ReadReply()
		if err != nil {
			t.Fatalf("after %d acks and %d refusals: %v", len(acks), len(refused), err)
		}
		id := f.Value("IN-REPLY-TO")
		switch {
		case f.Type() == "ack":
			var a ackBody
			if err := json.Unmarshal(f.Body, &a); err != nil {
				t.Fatal(err)
			}
			acks[id] = a
			if len(acks) == restartAfter {
				go func() { // away, then back on the same port and store
					mu.Lock()
					defer mu.Unlock()
					current.Shutdown()
					close(restarting)
					current.WaitForShutdown()
					var err error
					for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
						var ns2 *server.Server
						if ns2, err = startNATSAt(t, storeDir, port); err == nil {
							current = ns2
							break
						}
						if time.Now().After(deadline) {
							break
						}
					}
					restarted <- err
				}()
			}
		case f.Type() == "error" && strings.HasPrefix(f.Value("STATUS"), "503 "):
			var i int
			if _, err := fmt.Sscanf(id, "r-%d", &i); err != nil {
				t.Fatalf("503 for %q", id)
			}
			refused = append(refused, i)
		default:
			t.Fatalf("reply to %s: %s %s %s", id, f.Type(), f.Value("STATUS"), f.Body)
		}
	}
	if err := <-restarted; err != nil {
		t.Fatalf("restarting the NATS server: %v", err)
	}
	t.Logf("%d acked, %d refused with 503 while the server was away", len(acks), len(refused))

	// The node takes frames again, and a resend of a refused frame is
	// acked once, whether or not its first attempt was stored after all.
	for _, i := range append([]int{total}, refused...) {
		acks[fmt.Sprintf("r-%d", i)] = resendUntilAcked(t, m, c, i, 60*time.Second)
	}
	if len(acks) != total+1 {
		t.Fatalf("%d frames acked in the end, want %d", len(acks), total+1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	last := uint64(0)
	for _, a := range acks {
		last = max(last, a.Seq)
	}
	if err := m.log.WaitPublished(ctx, last); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	url := current.ClientURL()
	mu.Unlock()
	checkStoredOnce(t, url, acks)
}
