package main

import (
	"context"
	"crypto"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"time"

	"github.com/aglx/ledger/bridge"
	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/projections"
	"github.com/aglx/ledger/protocol"
	"github.com/nats-io/nats.go"
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
	// Commit latency of the node's write-ahead stream during the run
	// (histogram bucket bounds: at most twice the true value); zero for
	// the raw runs.
	CommitP50 time.Duration `json:"commit_p50_ns,omitempty"`
	CommitP99 time.Duration `json:"commit_p99_ns,omitempty"`
	PerCommit float64       `json:"events_per_commit,omitempty"`
	// The node's own share of the ack latency: from reading a frame to
	// writing its reply (bucket bounds, as above).
	NodeP50 time.Duration `json:"node_p50_ns,omitempty"`
	NodeP99 time.Duration `json:"node_p99_ns,omitempty"`
	// CPUPerFrame is the process's CPU time per frame, load generator
	// included.
	CPUPerFrame time.Duration `json:"cpu_per_frame_ns,omitempty"`
	// LateP50 and LateP99 are, for a paced run, how late the load
	// generator wrote its frames after they were due (bridge.LoadResult):
	// inside P50 and P99, and the generator's, not the node's.
	LateP50 time.Duration `json:"generator_late_p50_ns,omitempty"`
	LateP99 time.Duration `json:"generator_late_p99_ns,omitempty"`
}

// nodeStats are what a node measured about itself during a run.
type nodeStats struct {
	commits events.CommitStats
	ack     events.LatencySnapshot
}

// nodeRow is the report's line for a run against a node.
func nodeRow(name string, r bridge.LoadResult, ns nodeStats) benchRow {
	cs := ns.commits
	row := benchRow{Name: name, Count: r.Frames, PerSec: r.PerSec, P50: r.P50, P99: r.P99, Elapsed: r.Elapsed,
		CommitP50: cs.Quantile(0.5), CommitP99: cs.Quantile(0.99), NodeP50: ns.ack.Quantile(0.5), NodeP99: ns.ack.Quantile(0.99),
		CPUPerFrame: r.CPUPerFrame(), LateP50: r.LateP50, LateP99: r.LateP99}
	if cs.Commits > 0 {
		row.PerCommit = float64(cs.Events) / float64(cs.Commits)
	}
	return row
}

// runBench measures, in one process and one run, the raw JetStream ceiling
// and the node's durable end-to-end ingest, so that the ratio between them
// means something on a noisy machine.
func runBench(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("bench")
	n := fs.Int("n", 100000, "messages per measurement")
	conns := fs.Int("conns", 16, "client connections for the ingest runs")
	window := fs.Int("window", 4096, "publishes in flight for the raw runs")
	half := fs.Float64("rate-fraction", 0.5, "the latency run sends at this fraction of the measured peak")
	dir := fs.String("dir", "", "where the servers keep their stores (default: a temporary directory)")
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	only := fs.String("only", "", "run only this part: raw, ingest (peak), latency (peak, then paced), signed, or disk (synced appends alone and beside a stream writer, without NATS; -dir picks the disk)")
	runs := fs.Int("runs", 1, "repeat the full measurement this many times and judge the goals over all runs")
	fixedRate := fs.Float64("rate", 0, "with -only latency: pace at this many frames a second instead of -rate-fraction of a peak measured first, to compare builds at one load")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of each timed load run to this file, suffixed with the run's name (and the allocations so far, suffixed .allocs)")
	traceOut := fs.String("trace", "", "write an execution trace of each timed load run to this file, suffixed with the run's name (go tool trace; a trace slows the run)")
	if _, err := parseQuery(fs, args, 0); err != nil {
		return err // no argument: flags after one were ignored
	}
	if *runs < 1 {
		return fmt.Errorf("aglx bench: -runs must be at least 1")
	}
	switch *only {
	case "", "raw", "ingest", "latency", "signed", "disk":
	default:
		return fmt.Errorf("aglx bench: -only %q: not one of raw, ingest, latency, signed, disk", *only)
	}
	if *runs > 1 && *only != "" {
		return fmt.Errorf("aglx bench: -runs repeats the full run and judges the goals over all runs; -only measures once")
	}
	if *fixedRate < 0 || (*fixedRate > 0 && *only != "latency") {
		return fmt.Errorf("aglx bench: -rate is a positive rate, and only for -only latency (the full run paces at a fraction of the peak it measures)")
	}
	temporary := *dir == ""
	if temporary {
		d, err := os.MkdirTemp("", "aglx-bench")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		*dir = d
	}
	profilePrefix, tracePrefix = *cpuprofile, *traceOut
	switch *only {
	case "disk":
		return benchDisk(ctx, *dir+"/disk", stdout)
	case "raw":
		rows, err := benchRawRows(ctx, *dir, len(benchFrame(0)), *n, *window)
		for _, r := range rows {
			fmt.Fprintf(stdout, "%s: %.0f/s, p50 %s p99 %s\n", r.Name, r.PerSec, r.P50, r.P99)
		}
		return err
	}
	if *only == "signed" {
		sr, err := benchSigned(ctx, *dir+"/node-signed", min(*n, 50000), *conns)
		if err != nil {
			return err
		}
		r, vt, replay := sr.load, sr.verify, sr.replay
		fmt.Fprintf(stdout, "cold replay: %d events in %s; their saved state %d bytes, saved in %s, loaded in %s\n", replay.events, replay.elapsed,
			replay.stateBytes, replay.saved.Round(time.Millisecond), replay.loaded.Round(time.Millisecond))
		fmt.Fprintf(stdout, "signature checks during the load: %s\n", sr.batching())
		ratio := func(per time.Duration) float64 { return r.PerSec / (float64(runtime.NumCPU()) / per.Seconds()) }
		fmt.Fprintf(stdout, "signed ingest %.0f/s (%d refused), verify %s, ceiling %.0f/s, ratio %.2f (crypto/ed25519: %s, ratio %.2f; batches of %d: %s, ratio %.2f), p50 %s p99 %s, CPU %s per frame\n",
			r.PerSec, r.Errors, vt.single, vt.ceiling, ratio(vt.single), vt.stdlib, ratio(vt.stdlib), verifyBatchBench, vt.batch, ratio(vt.batch), r.P50, r.P99, r.CPUPerFrame())
		return nil
	}
	// The frames are built before any timing starts, as they are for the
	// raw runs and the signed run: building them is the agents' work, not
	// the node's.
	var built frameSet
	for i := range *n {
		built.add(benchFrame(i))
	}
	frame := built.at
	if *only == "ingest" || *only == "latency" {
		report := func(name string, r bridge.LoadResult, ns nodeStats) {
			cs := ns.commits
			fmt.Fprintf(stdout, "%s %.0f/s (%d refused), p50 %s p99 %s, CPU %s per frame; in the node p50 <= %s p99 <= %s max %s; commits p50 <= %s p99 <= %s max %s, %.0f events each\n",
				name, r.PerSec, r.Errors, r.P50, r.P99, r.CPUPerFrame(), ns.ack.Quantile(0.5), ns.ack.Quantile(0.99), ns.ack.Max,
				cs.Quantile(0.5), cs.Quantile(0.99), cs.Latency.Max, float64(cs.Events)/float64(max(cs.Commits, 1)))
			if r.LateP99 > 0 {
				fmt.Fprintf(stdout, "  the load generator wrote its frames late by p50 %s p99 %s (inside the latencies, not the node's)\n", r.LateP50, r.LateP99)
			}
		}
		rate, name := *fixedRate, fmt.Sprintf("paced at %.0f/s:", *fixedRate)
		if rate == 0 {
			r, ns, err := benchIngest(ctx, *dir+"/node-peak", 0, bridge.Load{Conns: *conns, Frames: *n, Frame: frame})
			if err != nil {
				return err
			}
			report("ingest", r, ns)
			rate, name = r.PerSec**half, fmt.Sprintf("paced at %.0f%%:", *half*100)
		}
		if *only == "latency" {
			r, ns, err := benchIngest(ctx, *dir+"/node-paced", 0, bridge.Load{Conns: *conns, Frames: min(*n, int(rate*10)+1), Rate: rate, Frame: frame})
			if err != nil {
				return err
			}
			report(name, r, ns)
		}
		return nil
	}
	var reports []benchReport
	for run := 1; run <= *runs; run++ {
		runDir := fmt.Sprintf("%s/run-%d", *dir, run)
		rep, err := benchFull(ctx, runDir, frame, *n, *conns, *window, *half)
		if err != nil {
			return err
		}
		if temporary { // a run's stores are a few hundred MB
			os.RemoveAll(runDir)
		}
		reports = append(reports, rep)
		if !*asJSON {
			if *runs > 1 {
				fmt.Fprintf(stdout, "## run %d of %d\n\n", run, *runs)
			}
			rep.print(stdout, len(frame(0)), *n)
			fmt.Fprintln(stdout)
		}
	}
	goals := judgeGoals(reports)
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"cpus": runtime.NumCPU(), "go": runtime.Version(), "frame_bytes": len(frame(0)), "runs": reports, "goals": goals})
	}
	printGoals(stdout, goals)
	return nil
}

// benchReport is one full run: the raw ceiling and floor, the node at peak,
// paced, relaxed and signed, and the cold replay.
type benchReport struct {
	Rows          []benchRow    `json:"rows"`
	Signed        benchRow      `json:"signed"`
	VerifyNS      time.Duration `json:"verify_ns"`
	VerifyCeiling float64       `json:"verify_ceiling_per_sec"`
	// StdlibVerifyNS is the same check with crypto/ed25519, and
	// BatchVerifyNS the node's check per signature in batches: both for
	// reference, beside the goal's one-at-a-time ceiling.
	StdlibVerifyNS time.Duration `json:"stdlib_verify_ns"`
	BatchVerifyNS  time.Duration `json:"batch_verify_ns"`
	// SignedBatching says how the signed run's checks were made.
	SignedBatching string        `json:"signed_batching"`
	ReplayEvents   uint64        `json:"replay_events"`
	ReplayNS       time.Duration `json:"replay_ns"`
	// The saved state of the replayed folds: its size, and how long a
	// clean stop takes to save it and a start to load it.
	StateBytes  int           `json:"state_bytes"`
	StateSaveNS time.Duration `json:"state_save_ns"`
	StateLoadNS time.Duration `json:"state_load_ns"`
}

// Indexes of benchReport.Rows.
const (
	rowCeiling = iota
	rowSyncAlways
	rowPeak
	rowPaced
	rowRelaxed
)

// benchFull runs every measurement once, one after the other, each with
// its own server and store under dir.
func benchFull(ctx context.Context, dir string, frame func(int) []byte, n, conns, window int, half float64) (benchReport, error) {
	rows, err := benchRawRows(ctx, dir, len(frame(0)), n, window)
	if err != nil {
		return benchReport{}, err
	}
	peak, ns, err := benchIngest(ctx, dir+"/node-peak", 0, bridge.Load{Conns: conns, Frames: n, Frame: frame})
	if err != nil {
		return benchReport{}, fmt.Errorf("ingest: %w", err)
	}
	rows = append(rows, nodeRow(fmt.Sprintf("aglxd ingest, fsync always, %d conns pipelined", conns), peak, ns))
	rate := peak.PerSec * half
	paced, ns, err := benchIngest(ctx, dir+"/node-paced", 0, bridge.Load{Conns: conns, Frames: min(n, int(rate*10)+1), Rate: rate, Frame: frame})
	if err != nil {
		return benchReport{}, fmt.Errorf("ingest at %.0f/s: %w", rate, err)
	}
	rows = append(rows, nodeRow(fmt.Sprintf("aglxd ingest at %.0f%% of peak (%.0f/s)", half*100, rate), paced, ns))
	relaxed, ns, err := benchIngest(ctx, dir+"/node-relaxed", time.Second, bridge.Load{Conns: conns, Frames: n, Frame: frame})
	if err != nil {
		return benchReport{}, fmt.Errorf("ingest with --fsync 1s: %w", err)
	}
	rows = append(rows, nodeRow(fmt.Sprintf("aglxd ingest, --fsync 1s (not durable), %d conns", conns), relaxed, ns))
	signedN := min(n, 50000)
	sr, err := benchSigned(ctx, dir+"/node-signed", signedN, conns)
	signed := sr.load
	if err != nil {
		return benchReport{}, fmt.Errorf("signed ingest: %w", err)
	}
	if signed.Errors > 0 {
		return benchReport{}, fmt.Errorf("signed ingest: %d transfers were refused", signed.Errors)
	}
	signedRow := benchRow{Name: fmt.Sprintf("aglxd signed credit.transfer ingest, %d conns", conns), Count: signed.Frames, PerSec: signed.PerSec,
		P50: signed.P50, P99: signed.P99, Elapsed: signed.Elapsed, CPUPerFrame: signed.CPUPerFrame()}
	for i := range rows {
		rows[i].Ratio = rows[i].PerSec / rows[0].PerSec
	}
	signedRow.Ratio = signed.PerSec / sr.verify.ceiling
	return benchReport{Rows: rows, Signed: signedRow, VerifyNS: sr.verify.single, VerifyCeiling: sr.verify.ceiling,
		StdlibVerifyNS: sr.verify.stdlib, BatchVerifyNS: sr.verify.batch, SignedBatching: sr.batching(),
		ReplayEvents: sr.replay.events, ReplayNS: sr.replay.elapsed,
		StateBytes: sr.replay.stateBytes, StateSaveNS: sr.replay.saved, StateLoadNS: sr.replay.loaded}, nil
}

// benchRawRows measures raw JetStream, the ceiling and the floor, with
// messages the size of a stored event whose frame is frameBytes long.
func benchRawRows(ctx context.Context, dir string, frameBytes, n, window int) ([]benchRow, error) {
	size := frameBytes + 200 // body plus the envelope headers, as stored
	var rows []benchRow
	for _, raw := range []struct {
		name string
		sync time.Duration
	}{{"jetstream async publish, fsync every 2m (ceiling)", 2 * time.Minute}, {"jetstream async publish, fsync always", 0}} {
		r, err := benchRaw(ctx, fmt.Sprintf("%s/raw-%d", dir, len(rows)), raw.sync, n, size, window)
		if err != nil {
			return rows, fmt.Errorf("%s: %w", raw.name, err)
		}
		rows = append(rows, benchRow{Name: raw.name, Count: r.Msgs, PerSec: r.PerSec, P50: r.P50, P99: r.P99, Elapsed: r.Elapsed})
	}
	return rows, nil
}

// print writes the report as two tables.
func (rep benchReport) print(stdout io.Writer, frameBytes, n int) {
	rows, signedRow, per, ceiling := rep.Rows, rep.Signed, rep.VerifyNS, rep.VerifyCeiling
	fmt.Fprintf(stdout, "%d CPUs, %s, frames of %d bytes, %d messages per run\n\n", runtime.NumCPU(), runtime.Version(), frameBytes, n)
	fmt.Fprintf(stdout, "| %-58s | %8s | %5s | %9s | %9s | %15s | %19s | %9s |\n", "run", "msg/s", "ratio", "p50", "p99", "node p50/p99", "commit p50/p99 (ev)", "CPU/frame")
	fmt.Fprintf(stdout, "|%s|%s|%s|%s|%s|%s|%s|%s|\n", dashes(60), dashes(10), dashes(7), dashes(11), dashes(11), dashes(17), dashes(21), dashes(11))
	for _, r := range rows {
		node, commits, cpu := "", "", ""
		if r.PerCommit > 0 {
			// Bucket bounds, or the largest value seen when a quantile
			// falls past the last bucket: two or three digits are precision
			// enough.
			ms := func(d time.Duration) time.Duration {
				if d >= 10*time.Millisecond {
					return d.Round(time.Millisecond)
				}
				return d.Round(10 * time.Microsecond)
			}
			node = fmt.Sprintf("%s/%s", ms(r.NodeP50), ms(r.NodeP99))
			commits = fmt.Sprintf("%s/%s (%.0f)", ms(r.CommitP50), ms(r.CommitP99), r.PerCommit)
			cpu = r.CPUPerFrame.Round(100 * time.Nanosecond).String()
		}
		fmt.Fprintf(stdout, "| %-58s | %8.0f | %5.2f | %9s | %9s | %15s | %19s | %9s |\n", r.Name, r.PerSec, r.Ratio,
			r.P50.Round(10*time.Microsecond), r.P99.Round(10*time.Microsecond), node, commits, cpu)
	}
	for _, r := range rep.Rows {
		if r.LateP99 > 0 {
			fmt.Fprintf(stdout, "\n%s: the load generator wrote its frames late by p50 %s, p99 %s (time.Sleep overshooting): inside the latencies above, and not the node's\n",
				r.Name, r.LateP50.Round(10*time.Microsecond), r.LateP99.Round(10*time.Microsecond))
		}
	}
	fmt.Fprintf(stdout, "\nsignature check (Ed25519, canonical form included): %s on one core; ceiling %d cores / %s = %.0f/s\n", per.Round(100*time.Nanosecond), runtime.NumCPU(), per.Round(100*time.Nanosecond), ceiling)
	if rep.StdlibVerifyNS > 0 {
		stdlibCeiling := float64(runtime.NumCPU()) / rep.StdlibVerifyNS.Seconds()
		fmt.Fprintf(stdout, "for reference, the same check with crypto/ed25519: %s; against its ceiling of %.0f/s the signed run is %.2f\n",
			rep.StdlibVerifyNS.Round(100*time.Nanosecond), stdlibCeiling, signedRow.PerSec/stdlibCeiling)
	}
	if rep.BatchVerifyNS > 0 {
		batchCeiling := float64(runtime.NumCPU()) / rep.BatchVerifyNS.Seconds()
		fmt.Fprintf(stdout, "and the node's check in batches of %d, as its workers check under load: %s a signature; against that ceiling of %.0f/s the signed run is %.2f\n",
			verifyBatchBench, rep.BatchVerifyNS.Round(100*time.Nanosecond), batchCeiling, signedRow.PerSec/batchCeiling)
	}
	fmt.Fprintln(stdout)
	fmt.Fprintf(stdout, "| %-58s | %8s | %5s | %9s | %9s | %9s |\n", "run", "msg/s", "ratio", "p50", "p99", "CPU/frame")
	fmt.Fprintf(stdout, "|%s|%s|%s|%s|%s|%s|\n", dashes(60), dashes(10), dashes(7), dashes(11), dashes(11), dashes(11))
	fmt.Fprintf(stdout, "| %-58s | %8.0f | %5.2f | %9s | %9s | %9s |\n", signedRow.Name+" (ratio: to the verify ceiling)", signedRow.PerSec, signedRow.Ratio,
		signedRow.P50.Round(10*time.Microsecond), signedRow.P99.Round(10*time.Microsecond), signedRow.CPUPerFrame.Round(100*time.Nanosecond))
	if rep.SignedBatching != "" {
		fmt.Fprintf(stdout, "\nthe signed run's signature checks: %s\n", rep.SignedBatching)
	}
	if rep.ReplayEvents > 0 {
		fmt.Fprintf(stdout, "\ncold replay of that log (all the node's folds, every signature checked again, in parallel): %d events in %s, %.0f events/s\n",
			rep.ReplayEvents, rep.ReplayNS.Round(time.Millisecond), float64(rep.ReplayEvents)/rep.ReplayNS.Seconds())
		fmt.Fprintf(stdout, "the replayed folds' saved state (what a clean stop writes, and the next start loads instead of replaying): %d bytes, saved in %s, loaded in %s\n",
			rep.StateBytes, rep.StateSaveNS.Round(time.Millisecond), rep.StateLoadNS.Round(time.Millisecond))
	}
}

// profilePrefix, when set, makes every timed load run write its CPU
// profile to profilePrefix.<run>: a profile of the whole command would
// mix in setup, frame signing and the replay, and hide the ingest path.
// tracePrefix does the same with an execution trace, which shows what a
// profile cannot: when the cores sat idle, and which goroutine waited for
// what (go tool trace).
var profilePrefix, tracePrefix string

// timedLoad runs a load test, profiled or traced when profilePrefix or
// tracePrefix asks for it.
func timedLoad(ctx context.Context, name string, load bridge.Load) (bridge.LoadResult, error) {
	// What the stages before left (signed frames, an earlier node's heap)
	// is collected now, not during the timing (helper-91).
	runtime.GC()
	if tracePrefix != "" {
		f, err := os.Create(tracePrefix + "." + name)
		if err != nil {
			return bridge.LoadResult{}, err
		}
		defer f.Close()
		if err := trace.Start(f); err != nil {
			return bridge.LoadResult{}, err
		}
		defer trace.Stop()
	}
	if profilePrefix == "" {
		return load.Run(ctx)
	}
	f, err := os.Create(profilePrefix + "." + name)
	if err != nil {
		return bridge.LoadResult{}, err
	}
	defer f.Close()
	if err := pprof.StartCPUProfile(f); err != nil {
		return bridge.LoadResult{}, err
	}
	defer pprof.StopCPUProfile()
	r, err := load.Run(ctx)
	if mf, merr := os.Create(profilePrefix + "." + name + ".allocs"); merr == nil {
		pprof.Lookup("allocs").WriteTo(mf, 0)
		mf.Close()
	}
	return r, err
}

func dashes(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = '-'
	}
	return string(b)
}

// benchFrame is an unsigned task.result of the size agents send (about 270
// bytes): a message the node records and acknowledges, with no fold
// deciding its answer.
func benchFrame(i int) []byte {
	return fmt.Appendf(nil, "AGLX/1.0 TCP\nFROM: agent://worker%02d.local\nTO: agent://owner01.local\nTYPE: task.result\nCONTENT-TYPE: application/json\n\n"+
		`{"task_id": "t-%08d", "status": "SUCCESS", "duration": 1.43, "result": {"records_processed": 5200, "summary": "Dataset analyzed successfully"}}`+"\n", i%100, i)
}

// frameSet holds the frames a load sends, built before the timing starts,
// in one buffer: a hundred thousand separate slices would be as many heap
// objects for the node's garbage collector to mark in every cycle, which a
// real node, whose agents live elsewhere, never carries.
type frameSet struct {
	buf  []byte
	ends []int
}

func (s *frameSet) add(f []byte) {
	s.buf = append(s.buf, f...)
	s.ends = append(s.ends, len(s.buf))
}

// at is the i-th frame; the load generator only reads it.
func (s *frameSet) at(i int) []byte {
	start := 0
	if i > 0 {
		start = s.ends[i-1]
	}
	return s.buf[start:s.ends[i]:s.ends[i]]
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

// benchNode is a node as aglxd wires it: embedded server (fsync always
// unless sync is set), the log, the registry, ledger and stats folds with
// their answers and ingest-time signature checks, the relay, and the
// bridge.
type benchNode struct {
	addr  string
	name  string
	key   crypto.Signer
	nc    *nats.Conn
	log   *events.Log
	srv   *bridge.Server
	close func()
}

func startBenchNode(ctx context.Context, dir string, sync time.Duration) (*benchNode, error) {
	s, err := events.StartServer(events.ServerConfig{DataDir: dir, SyncInterval: sync})
	if err != nil {
		return nil, err
	}
	var closers []func()
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	closers = append(closers, s.Shutdown)
	nc, err := s.Connect("bench")
	if err != nil {
		closeAll()
		return nil, err
	}
	closers = append(closers, nc.Close)
	commitConn, err := s.Connect("bench-commit")
	if err != nil {
		closeAll()
		return nil, err
	}
	closers = append(closers, commitConn.Close)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	l, err := events.Open(ctx, nc, events.Config{CommitConn: commitConn, ExclusiveWriter: true}, quiet)
	if err != nil {
		closeAll()
		return nil, err
	}
	closers = append(closers, func() { l.Close(context.Background()) })
	key, err := protocol.GenerateKey(protocol.KeyEd25519)
	if err != nil {
		closeAll()
		return nil, err
	}
	const name = "registry://bench.local"
	outbox, verdicts := projections.NewOutbox(), projections.NewVerdictCache()
	folds := projections.NewFolds(projections.RegistryConfig{NodeURI: name, NodeKey: key, Outbox: outbox, Verdicts: verdicts})
	registry := folds.Registry
	runner := projections.NewRunner(l, quiet, folds.All()...)
	runCtx, cancel := context.WithCancel(context.Background())
	closers = append(closers, cancel)
	go runner.Run(runCtx)
	relay := &bridge.Relay{Log: l, Runner: runner, Registry: registry, NodeURI: name, Lg: quiet,
		Networks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	if err := relay.Open(ctx); err != nil {
		closeAll()
		return nil, err
	}
	go relay.Run(runCtx)
	srv := bridge.New(l, bridge.Config{
		Name: name, AllowPlaintextSecurity: true,
		Answerer: projections.NewAnswers(runner, outbox, projections.AnswersCredits, projections.AnswersRegistry),
		Verifier: &projections.IngestVerifier{Registry: registry, Cache: verdicts},
	}, quiet)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		closeAll()
		return nil, err
	}
	go srv.ServeTCP(ln, events.TransportTCP)
	closers = append(closers, func() { srv.Shutdown(context.Background()) })
	return &benchNode{addr: ln.Addr().String(), name: name, key: key, nc: nc, log: l, srv: srv, close: closeAll}, nil
}

// benchIngest puts load on a fresh node.
func benchIngest(ctx context.Context, dir string, sync time.Duration, load bridge.Load) (bridge.LoadResult, nodeStats, error) {
	n, err := startBenchNode(ctx, dir, sync)
	if err != nil {
		return bridge.LoadResult{}, nodeStats{}, err
	}
	defer n.close()
	load.Addr = n.addr
	r, err := timedLoad(ctx, filepath.Base(dir), load)
	if err == nil && r.Errors > 0 {
		// Refusals are answered fast and would count as throughput: a run
		// with any measures nothing (helper-91).
		err = fmt.Errorf("%d of %d frames were refused", r.Errors, r.Frames)
	}
	return r, nodeStats{commits: n.log.CommitStats(), ack: n.srv.AckLatency()}, err
}
