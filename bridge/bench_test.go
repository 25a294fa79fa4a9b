package bridge

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/aglx/ledger/events"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The two benchmarks below run against the same server configuration as
// aglxd (embedded, file storage, sync always unless -fsync is set) so that
// their ratio is the cost of the AGLX edge: decoding, validation, envelope,
// replies. Run them together:
//
//	go test ./bridge -run '^$' -bench 'IngestTCP|JetStreamRaw' -benchtime 20000x -count 3

// benchConns is how many client connections BenchmarkIngestTCP spreads
// the frames over; each pipelines all of its frames.
const benchConns = 8

// benchFrame is a credit.transfer of the size agents send (about 300 bytes).
func benchFrame(i int) []byte {
	return fmt.Appendf(nil, "AGLX/1.0 TCP\nFROM: agent://owner%02d.local\nTO: agent://worker05.local\nTYPE: credit.transfer\nCONTENT-TYPE: application/json\n\n"+
		`{"amount": 3, "currency": "AGLX", "reason": "Completed task.data.analyze", "timestamp": "2025-10-29T19:02:40Z", "transaction_id": "tx-%08d", "signature": "rsa-sha256:1a4d3f"}`+"\n", i%100, i)
}

func startBenchServer(b *testing.B) (*events.Log, *nats.Conn) {
	b.Helper()
	s, err := events.StartServer(events.ServerConfig{DataDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.Shutdown)
	nc, err := s.Connect("test")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	l, err := events.Open(context.Background(), nc, events.Config{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close(context.Background()) })
	return l, nc
}

// BenchmarkJetStreamRaw is the ceiling: async publishes of messages the
// size of a stored event (body plus envelope headers), with the same number
// in flight as the node allows.
func BenchmarkJetStreamRaw(b *testing.B) {
	_, nc := startBenchServer(b)
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(events.InFlightMax))
	if err != nil {
		b.Fatal(err)
	}
	payload := make([]byte, 480) // body plus the envelope's headers, as stored
	b.SetBytes(int64(len(payload)))
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if _, err := js.PublishAsync(fmt.Sprintf("aglx.ev.credit.transfer.agent~o%d.agent~w", i%100), payload, jetstream.WithStallWait(time.Minute)); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(5 * time.Minute):
		b.Fatal("publishes not acknowledged")
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
}

// BenchmarkIngestTCP is the node's edge end to end: frames over loopback
// TCP on benchConns connections, each pipelining, until every ack is read.
func BenchmarkIngestTCP(b *testing.B) {
	l, _ := startBenchServer(b)
	srv := New(l, Config{PipelineMax: PipelineMaxDefault}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go srv.ServeTCP(ln, events.TransportTCP)
	b.Cleanup(func() { srv.Shutdown(context.Background()) })

	per := (b.N + benchConns - 1) / benchConns
	frames := make([][]byte, benchConns)
	for c := range frames {
		for i := 0; i < per; i++ {
			frames[c] = append(frames[c], benchFrame(c*per+i)...)
		}
	}
	b.SetBytes(int64(len(benchFrame(0))))
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for c := 0; c < benchConns; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl, err := Dial(context.Background(), ln.Addr().String())
			if err != nil {
				b.Error(err)
				return
			}
			defer cl.Close()
			go func() { cl.Write(frames[c]); cl.CloseWrite() }()
			for i := 0; i < per; i++ {
				f, err := cl.ReadReply()
				if err != nil || f.Type() != "ack" {
					b.Errorf("reply %d: %v %s", i, err, f.Body)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(per*benchConns)/time.Since(start).Seconds(), "frames/s")
}
