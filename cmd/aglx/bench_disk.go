package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/aglx/ledger/bridge"
)

// The disk probe imitates the node's two write streams on the file system
// it is pointed at, without NATS: the group commit's small synced appends
// to the write-ahead stream, alone and beside a steady writer as fast as
// the event stream writes at peak. It answers the question the latency
// goal leaves open: how much of an ack's tail is the disk's own.
const (
	// diskCommitBytes is one group commit at half of peak on the
	// development machine: some 50 events of about 400 bytes.
	diskCommitBytes = 20 << 10 // bytes
	// diskCommitGap is the pause between commits, about one commit's
	// time, so the probe commits roughly as often as the node does.
	diskCommitGap = 700 * time.Microsecond
	// diskStreamChunk and diskStreamEvery are the event stream's writes:
	// what 40,000 events of about 1 KB a second put on disk between two
	// of its flushes (events.EventSyncInterval).
	diskStreamChunk = 4 << 20 // bytes
	diskStreamEvery = 100 * time.Millisecond
	// diskPhase is how long each of the probe's phases runs.
	diskPhase = 4 * time.Second
)

// diskResult is the latency of the probe's synced appends in one phase.
type diskResult struct {
	name               string
	n                  int
	p50, p99, p999, mx time.Duration
	// cpu is the process's CPU time per append and sync, the stream
	// writer's share included when it runs. On a virtual machine a sync
	// costs the guest CPU, not only waiting: it is part of every commit's
	// cost.
	cpu time.Duration
}

// benchDisk runs the probe in dir: alone, beside the stream writer, and
// both once more, since a virtual disk's neighbours come and go.
func benchDisk(ctx context.Context, dir string, stdout io.Writer) error {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		defer os.Remove(dir) // the probe's own, and empty once it is done
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "synced appends of %d KiB every %s in %s; the stream writer adds %d MiB every %s, synced\n\n",
		diskCommitBytes>>10, diskCommitGap, dir, diskStreamChunk>>20, diskStreamEvery)
	fmt.Fprintf(stdout, "| %-32s | %6s | %9s | %9s | %9s | %9s | %9s |\n", "phase", "syncs", "p50", "p99", "p99.9", "max", "CPU/sync")
	fmt.Fprintf(stdout, "|%s|%s|%s|%s|%s|%s|%s|\n", dashes(34), dashes(8), dashes(11), dashes(11), dashes(11), dashes(11), dashes(11))
	for _, beside := range []bool{false, true, false, true} {
		r, err := diskPhaseRun(ctx, dir, beside)
		if err != nil {
			return err
		}
		ms := func(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond)) }
		fmt.Fprintf(stdout, "| %-32s | %6d | %9s | %9s | %9s | %9s | %9s |\n", r.name, r.n, ms(r.p50), ms(r.p99), ms(r.p999), ms(r.mx), r.cpu.Round(time.Microsecond))
	}
	return nil
}

// diskPhaseRun appends and syncs for diskPhase, with the stream writer
// running beside it or not, and returns the syncs' latency.
func diskPhaseRun(ctx context.Context, dir string, beside bool) (diskResult, error) {
	res := diskResult{name: "commits alone"}
	wal, err := os.CreateTemp(dir, "wal-*")
	if err != nil {
		return res, err
	}
	defer os.Remove(wal.Name())
	defer wal.Close()
	stop := make(chan struct{})
	streamErr := make(chan error, 1)
	if beside {
		res.name = "commits beside the stream writer"
		go func() { streamErr <- diskStream(dir, stop) }()
	} else {
		streamErr <- nil
	}
	rec := make([]byte, diskCommitBytes)
	var lat []time.Duration
	cpu := bridge.ProcessCPU()
	end := time.Now().Add(diskPhase)
	for time.Now().Before(end) && ctx.Err() == nil {
		t0 := time.Now()
		if _, err = wal.Write(rec); err == nil {
			err = wal.Sync()
		}
		if err != nil {
			break
		}
		lat = append(lat, time.Since(t0))
		time.Sleep(diskCommitGap)
	}
	cpu = bridge.ProcessCPU() - cpu
	close(stop)
	if serr := <-streamErr; err == nil {
		err = serr
	}
	if err != nil {
		return res, fmt.Errorf("disk probe: %w", err)
	}
	if len(lat) == 0 {
		return res, ctx.Err()
	}
	slices.Sort(lat)
	res.n = len(lat)
	res.cpu = cpu / time.Duration(len(lat))
	res.p50, res.p99, res.p999, res.mx = lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)*999/1000], lat[len(lat)-1]
	return res, nil
}

// diskStream writes diskStreamChunk every diskStreamEvery to a file of
// its own and syncs it, until stop is closed.
func diskStream(dir string, stop <-chan struct{}) error {
	f, err := os.CreateTemp(dir, "stream-*")
	if err != nil {
		return err
	}
	defer os.Remove(filepath.Clean(f.Name()))
	defer f.Close()
	buf := make([]byte, diskStreamChunk)
	t := time.NewTicker(diskStreamEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return nil
		case <-t.C:
			if _, err := f.Write(buf); err != nil {
				return err
			}
			if err := f.Sync(); err != nil {
				return err
			}
		}
	}
}
