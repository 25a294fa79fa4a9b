package main

import (
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// TestExternalNATS runs the node against a separate NATS server
// (--nats-url), as an operator with a NATS cluster would: the node creates
// its streams there, acknowledges frames, and folds them.
func TestExternalNATS(t *testing.T) {
	ns := startExternalNATS(t)

	m := startNodeWith(t, t.TempDir(), func(c *Config) { c.NATSURL = ns.ClientURL() })
	c := dial(t, m.TCPAddr())
	c.Write(referenceFiles(t)[3]) // task.result
	c.Flush()
	_, a := readAck(t, c)
	ev := getEvent(t, m, openLogAt(t, ns.ClientURL()), a.Seq)
	if ev.Type != "task.result" || ev.ID != a.EventID {
		t.Fatalf("stored %+v", ev)
	}
}

// startExternalNATS starts a NATS server with JetStream on a random
// loopback port, apart from any node, and stops it when the test ends
// (after the cleanups registered later, such as the node's).
func startExternalNATS(t *testing.T) *server.Server {
	t.Helper()
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: t.TempDir(), SyncAlways: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(30 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	return ns
}
