package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"time"

	"github.com/aglx/ledger/bridge"
	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/projections"
)

// benchRow is one line of the report.
type benchRow struct {
	Name    string        `json:"name"`
	Count   int           `json:"count"`
	PerSec  float64       `json:"per_sec"`
	Ratio   float64       `json:"ratio_to_ceiling"`
	P50     time.Duration `json:"p50_ns"`
	P99     time.Duration `json:"p99_ns"`
	Elapsed time.Duration `json:"elapsed_ns"`
}

// runBench measures, in one process and one run, the raw JetStream ceiling
// and the node's durable end-to-end ingest, so that the ratio between them
// means something on a noisy machine.
func runBench(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("aglx bench", flag.ContinueOnError)
	n := fs.Int("n", 100000, "messages per measurement")
	conns := fs.Int("conns", 16, "client connections for the ingest runs")
	window := fs.Int("window", 4096, "publishes in flight for the raw runs")
	half := fs.Float64("rate-fraction", 0.5, "the latency run sends at this fraction of the measured peak")
	dir := fs.String("dir", "", "where the servers keep their stores (default: a temporary directory)")
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return exitCode(2)
	}
	if *dir == "" {
		d, err := os.MkdirTemp("", "aglx-bench")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		*dir = d
	}
	frame := benchFrame
	size := len(frame(0)) + 200 // body plus the envelope headers, as stored

	var rows []benchRow
	for _, raw := range []struct {
		name string
		sync time.Duration
	}{{"jetstream async publish, fsync every 2m (ceiling)", 2 * time.Minute}, {"jetstream async publish, fsync always", 0}} {
		r, err := benchRaw(ctx, fmt.Sprintf("%s/raw-%d", *dir, len(rows)), raw.sync, *n, size, *window)
		if err != nil {
			return fmt.Errorf("%s: %w", raw.name, err)
		}
		rows = append(rows, benchRow{Name: raw.name, Count: r.Msgs, PerSec: r.PerSec, P50: r.P50, P99: r.P99, Elapsed: r.Elapsed})
	}
	peak, err := benchIngest(ctx, *dir+"/node-peak", 0, bridge.Load{Conns: *conns, Frames: *n, Frame: frame})
	if err != nil {
		return fmt.Errorf("ingest: %w", err)
	}
	rows = append(rows, benchRow{Name: fmt.Sprintf("aglxd ingest, fsync always, %d conns pipelined", *conns), Count: peak.Frames, PerSec: peak.PerSec, P50: peak.P50, P99: peak.P99, Elapsed: peak.Elapsed})
	rate := peak.PerSec * *half
	paced, err := benchIngest(ctx, *dir+"/node-paced", 0, bridge.Load{Conns: *conns, Frames: min(*n, int(rate*10)+1), Rate: rate, Frame: frame})
	if err != nil {
		return fmt.Errorf("ingest at %.0f/s: %w", rate, err)
	}
	rows = append(rows, benchRow{Name: fmt.Sprintf("aglxd ingest at %.0f%% of peak (%.0f/s)", *half*100, rate), Count: paced.Frames, PerSec: paced.PerSec, P50: paced.P50, P99: paced.P99, Elapsed: paced.Elapsed})
	relaxed, err := benchIngest(ctx, *dir+"/node-relaxed", time.Second, bridge.Load{Conns: *conns, Frames: *n, Frame: frame})
	if err != nil {
		return fmt.Errorf("ingest with --fsync 1s: %w", err)
	}
	rows = append(rows, benchRow{Name: fmt.Sprintf("aglxd ingest, --fsync 1s (not durable), %d conns", *conns), Count: relaxed.Frames, PerSec: relaxed.PerSec, P50: relaxed.P50, P99: relaxed.P99, Elapsed: relaxed.Elapsed})
	for i := range rows {
		rows[i].Ratio = rows[i].PerSec / rows[0].PerSec
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"cpus": runtime.NumCPU(), "go": runtime.Version(), "frame_bytes": len(frame(0)), "rows": rows})
	}
	fmt.Fprintf(stdout, "%d CPUs, %s, frames of %d bytes, %d messages per run\n\n", runtime.NumCPU(), runtime.Version(), len(frame(0)), *n)
	fmt.Fprintf(stdout, "| %-58s | %10s | %6s | %9s | %9s |\n", "run", "msg/s", "ratio", "p50", "p99")
	fmt.Fprintf(stdout, "|%s|%s|%s|%s|%s|\n", dashes(60), dashes(12), dashes(8), dashes(11), dashes(11))
	for _, r := range rows {
		fmt.Fprintf(stdout, "| %-58s | %10.0f | %6.2f | %9s | %9s |\n", r.Name, r.PerSec, r.Ratio, r.P50.Round(10*time.Microsecond), r.P99.Round(10*time.Microsecond))
	}
	return nil
}

func dashes(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = '-'
	}
	return string(b)
}

// benchFrame is a credit.transfer of the size agents send (about 300 bytes).
func benchFrame(i int) []byte {
	return fmt.Appendf(nil, "AGLX/1.0 TCP\nFROM: agent://owner%02d.local\nTO: agent://worker05.local\nTYPE: credit.transfer\nCONTENT-TYPE: application/json\n\n"+
		`{"amount": 3, "currency": "AGLX", "reason": "Completed task.data.analyze", "timestamp": "2025-10-29T19:02:40Z", "transaction_id": "tx-%08d"}`+"\n", i%100, i)
}

func benchRaw(ctx context.Context, dir string, sync time.Duration, n, size, window int) (events.RawResult, error) {
	s, err := events.StartServer(events.ServerConfig{DataDir: dir, SyncInterval: sync})
	if err != nil {
		return events.RawResult{}, err
	}
	defer s.Shutdown()
	nc, err := s.Connect("test")
	if err != nil {
		return events.RawResult{}, err
	}
	defer nc.Close()
	return events.ProbeRaw(ctx, nc, n, size, window)
}

// benchIngest runs a node as aglxd does (embedded server with fsync
// always unless sync is set, the log, the projections, the bridge) and puts
// load on it.
func benchIngest(ctx context.Context, dir string, sync time.Duration, load bridge.Load) (bridge.LoadResult, error) {
	s, err := events.StartServer(events.ServerConfig{DataDir: dir, SyncInterval: sync})
	if err != nil {
		return bridge.LoadResult{}, err
	}
	defer s.Shutdown()
	nc, err := s.Connect("test")
	if err != nil {
		return bridge.LoadResult{}, err
	}
	defer nc.Close()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	l, err := events.Open(ctx, nc, events.Config{}, quiet)
	if err != nil {
		return bridge.LoadResult{}, err
	}
	defer l.Close(context.Background())
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go projections.NewRunner(l, quiet, projections.NewStats()).Run(runCtx)
	srv := bridge.New(l, bridge.Config{}, quiet)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return bridge.LoadResult{}, err
	}
	go srv.ServeTCP(ln, events.TransportTCP)
	defer srv.Shutdown(context.Background())
	load.Addr = ln.Addr().String()
	return load.Run(ctx)
}
