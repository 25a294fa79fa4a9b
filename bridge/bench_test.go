package bridge

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/aglx/ledger/events"
	"github.com/nats-io/nats.go"
)

// The benchmarks below run on the same embedded server configuration as
// aglxd, so that their ratio is the cost of the node: decoding, validation,
// the group commit, the event stream, the replies. Run them together:
//
//	go test ./bridge -run '^$' -bench 'IngestTCP|JetStreamRaw' -benchtime 50000x
//
// `aglx bench` measures the same and more (latency at half of peak) in one
// command; docs/BENCHMARKS.md has the figures.

// benchConns is how many client connections BenchmarkIngestTCP spreads the
// frames over; each pipelines its share.
const benchConns = 16

// benchFrame is a credit.transfer of the size agents send (about 270 bytes).
func benchFrame(i int) []byte {
	return fmt.Appendf(nil, "AGLX/1.0 TCP\nFROM: agent://owner%02d.local\nTO: agent://worker05.local\nTYPE: credit.transfer\nCONTENT-TYPE: application/json\n\n"+
		`{"amount": 3, "currency": "AGLX", "reason": "Completed task.data.analyze", "timestamp": "2025-10-29T19:02:40Z", "transaction_id": "tx-%08d"}`+"\n", i%100, i)
}

// storedSize is a stored event's size: the body plus the envelope headers.
var storedSize = len(benchFrame(0)) + 200

// BenchmarkJetStreamRaw is plain JetStream: async publishes of messages the
// size of a stored event, 4096 in flight, to a file stream, with the
// server's default fsync (every 2 minutes: the ceiling) and with fsync
// after every write.
func BenchmarkJetStreamRaw(b *testing.B) {
	for _, c := range []struct {
		name string
		sync time.Duration
	}{{"fsync=2m", 2 * time.Minute}, {"fsync=always", 0}} {
		b.Run(c.name, func(b *testing.B) {
			nc := benchServer(b, c.sync)
			b.SetBytes(int64(storedSize))
			b.ResetTimer()
			r, err := events.ProbeRaw(context.Background(), nc, b.N, storedSize, 4096)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(r.PerSec, "msgs/s")
			b.ReportMetric(float64(r.P99.Microseconds()), "p99-µs")
		})
	}
}

// benchServer starts an embedded server (fsync every sync, or on every
// write if 0) and connects to it; both end with the benchmark.
func benchServer(b testing.TB, sync time.Duration) *nats.Conn {
	b.Helper()
	s, err := events.StartServer(events.ServerConfig{DataDir: b.TempDir(), SyncInterval: sync})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.Shutdown)
	nc, err := s.Connect("bench")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	return nc
}

// openBenchLog opens a log on a fresh server with fsync always, as aglxd
// runs it, and a logger that discards; the log closes with tb.
func openBenchLog(tb testing.TB) (*events.Log, *slog.Logger) {
	tb.Helper()
	nc := benchServer(tb, 0)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	l, err := events.Open(context.Background(), nc, events.Config{ExclusiveWriter: true}, quiet) // the embedded server: as the node runs
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close(context.Background()) })
	return l, quiet
}

// BenchmarkIngestTCP is the node's edge end to end, durable (fsync
// always): frames over loopback TCP on benchConns connections, each
// pipelining, until every ack has been read.
func BenchmarkIngestTCP(b *testing.B) {
	l, quiet := openBenchLog(b)
	srv := New(l, Config{}, quiet)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go srv.ServeTCP(ln, events.TransportTCP)
	defer srv.Shutdown(context.Background())

	b.SetBytes(int64(len(benchFrame(0))))
	b.ResetTimer()
	r, err := Load{Addr: ln.Addr().String(), Conns: benchConns, Frames: b.N, Frame: benchFrame}.Run(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	if r.Errors > 0 {
		b.Fatalf("%d frames were refused", r.Errors)
	}
	b.ReportMetric(r.PerSec, "frames/s")
}
