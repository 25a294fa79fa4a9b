package main

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
)

// TestReadersCannotForgeTheNodesAcks: a NATS client without credentials
// watches the write-ahead subject and answers the node's first commit
// itself, before JetStream does, with a made-up sequence. Were that
// answer taken, the node would expect the wrong end of its write-ahead
// stream and refuse every later frame with 503, until restarted. The
// node's reply subjects are closed to readers, so every frame is acked,
// in sequence.
func TestReadersCannotForgeTheNodesAcks(t *testing.T) {
	m := startNode(t, t.TempDir())
	rd, err := nats.Connect(m.NATSURL()) // no credentials: a reader
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	var once sync.Once
	forged := make(chan error, 1)
	if _, err := rd.Subscribe("aglx.wal.>", func(msg *nats.Msg) {
		once.Do(func() {
			stream := strings.TrimPrefix(msg.Subject, "aglx.wal.") + "_WAL"
			forged <- rd.Publish(msg.Reply, fmt.Appendf(nil, `{"stream":%q,"seq":987654}`, stream))
		})
	}); err != nil {
		t.Fatal(err)
	}
	if err := rd.Flush(); err != nil {
		t.Fatal(err)
	}

	c := dial(t, m.TCPAddr())
	for i := range 5 {
		c.Write(referenceFiles(t)[3]) // task.result
		c.Flush()
		if _, a := readAck(t, c); a.Seq != uint64(i+1) {
			t.Fatalf("frame %d acked at seq %d, want %d", i, a.Seq, i+1)
		}
	}
	select {
	case err := <-forged:
		t.Logf("the reader's forged answer (publish error: %v) changed nothing", err)
	default:
		t.Log("the reader never saw a write-ahead publish")
	}
}
