package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aglx/ledger/events"
	"github.com/nats-io/nats.go/jetstream"
)

// TestASecondNodeOnTheSameNATSIsRefused: on an operator's NATS, where no
// data dir's lock reaches, a second node started beside the first (a
// standby, with the same key) is refused at start, naming the first;
// once the first stops, it starts and serves. And a node whose lease
// another has taken refuses appends from then on.
func TestASecondNodeOnTheSameNATSIsRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ns := startExternalNATS(t)
	withNATS := func(c *Config) { c.NATSURL, c.NATSListen, c.leaseTTL = ns.ClientURL(), "", 3*time.Second }
	dirA, dirB := t.TempDir(), t.TempDir()
	a := startNodeWith(t, dirA, withNATS)
	sendTasks(t, a.TCPAddr(), "a", 3)
	for _, f := range []string{"node.key", "token.key"} { // the standby holds the node's keys
		b, err := os.ReadFile(filepath.Join(dirA, "keys", f))
		if err != nil {
			t.Fatal(err)
		}
		os.MkdirAll(filepath.Join(dirB, "keys"), 0o700)
		if err := os.WriteFile(filepath.Join(dirB, "keys", f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg := DefaultConfig()
	cfg.Relay, cfg.DataDir = false, dirB
	cfg.Listen, cfg.UDP, cfg.HTTP, cfg.TLSListen = "127.0.0.1:0", "", "", ""
	withNATS(&cfg)
	var logs lockedBuffer
	b := NewMain(cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	err := b.Run(ctx)
	b.Close(ctx)
	if !errors.Is(err, events.ErrLeaseHeld) || !strings.Contains(err.Error(), a.cfg.Name) {
		t.Fatalf("a second node on the same streams: %v; want it refused, naming the first", err)
	}
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	b = startNodeWith(t, dirB, withNATS)
	sendTasks(t, b.TCPAddr(), "b", 3)

	// Another node takes the lease (as after a pause longer than the TTL):
	// this one refuses appends, and /healthz says why.
	js, err := jetstream.New(b.nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, events.LeaseBucket)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := json.Marshal(events.LeaseHolder{Node: "registry://standby.local", Host: "elsewhere", PID: 7, Run: "other"})
	if _, err := kv.Put(ctx, "writer", other); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if err := b.log.Healthy(); err != nil && strings.Contains(err.Error(), "registry://standby.local") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node did not notice its lease was taken: %v", b.log.Healthy())
		}
	}
	c := dial(t, b.TCPAddr())
	f := lfFrame("agent://load.local", "agent://sink.local", "task.result", `{"task_id":"after","status":"SUCCESS"}`)
	if err := c.WriteFrame(f); err != nil {
		t.Fatal(err)
	}
	c.Flush()
	if r, err := c.ReadReply(); err != nil || r.Type() != "error" || !strings.Contains(string(r.Body), "503") {
		t.Fatalf("a frame after the lease was lost: %v %v; want 503", r, err)
	}
}
