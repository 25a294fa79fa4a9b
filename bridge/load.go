package bridge

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Load describes a load test of a node's TCP edge: Conns connections, each
// sending its share of Frames frames pipelined (closed loop, as fast as the
// node answers) or, with Rate set, at a fixed rate (open loop).
type Load struct {
	Addr   string
	Conns  int
	Frames int
	// Rate is frames per second over all connections; 0 sends as fast as
	// the connection's pipeline allows.
	Rate float64
	// Frame returns the i-th frame; it must carry nothing that makes the
	// node refuse it.
	Frame func(i int) []byte
}

// LoadResult is what a load test measured. Latency runs from the moment a
// frame was due to be sent (not when it was sent, so that a slow node
// cannot hide its own queueing) until its ack was read.
type LoadResult struct {
	Frames   int
	Elapsed  time.Duration
	PerSec   float64
	P50, P99 time.Duration
	Max      time.Duration
	Errors   int
	// CPU is the CPU time (user and system) the whole process used during
	// the run, load generator included. Per frame, it is a figure that a
	// busy machine disturbs far less than a rate.
	CPU time.Duration
	// LateP50 and LateP99 are, for a paced run, how late the generator
	// wrote its frames after they were due: part of every latency above,
	// and the generator's, not the node's (time.Sleep overshoots on a busy
	// machine). A reader of a paced p99 needs it beside (helper-91).
	LateP50, LateP99 time.Duration
}

// CPUPerFrame is CPU divided by the frames answered.
func (r LoadResult) CPUPerFrame() time.Duration {
	if r.Frames == 0 {
		return 0
	}
	return r.CPU / time.Duration(r.Frames)
}

// Run executes the load test.
func (ld Load) Run(ctx context.Context) (LoadResult, error) {
	conns := max(ld.Conns, 1)
	per := ld.Frames / conns
	lat := make([][]time.Duration, conns)
	late := make([][]time.Duration, conns)
	errs := make([]int, conns)
	var wg sync.WaitGroup
	var firstErr error
	var mu sync.Mutex
	cpu := ProcessCPU()
	start := time.Now()
	for c := 0; c < conns; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, lt, e, err := ld.runConn(ctx, c, per, conns, start)
			lat[c], late[c], errs[c] = l, lt, e
			if err != nil {
				mu.Lock()
				firstErr = err
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu = ProcessCPU() - cpu
	if firstErr != nil {
		return LoadResult{}, firstErr
	}
	var all []time.Duration
	res := LoadResult{Elapsed: elapsed, CPU: cpu}
	for c := range lat {
		all = append(all, lat[c]...)
		res.Errors += errs[c]
	}
	slices.Sort(all)
	res.Frames = len(all)
	res.PerSec = float64(len(all)) / elapsed.Seconds()
	if len(all) > 0 {
		res.P50 = all[len(all)/2]
		res.P99 = all[len(all)*99/100]
		res.Max = all[len(all)-1]
	}
	if ld.Rate > 0 {
		all = all[:0]
		for c := range late {
			all = append(all, late[c]...)
		}
		slices.Sort(all)
		if len(all) > 0 {
			res.LateP50, res.LateP99 = all[len(all)/2], all[len(all)*99/100]
		}
	}
	return res, nil
}

func (ld Load) runConn(ctx context.Context, c, per, conns int, start time.Time) (lat, late []time.Duration, errors int, err error) {
	cl, err := Dial(ctx, ld.Addr)
	if err != nil {
		return nil, nil, 0, err
	}
	defer cl.Close()
	// due[i] is when frame i was due, as an offset from start: a
	// time.Time holds a pointer, and the collector would scan them all.
	due := make([]time.Duration, per)
	late = make([]time.Duration, 0, per)
	var interval time.Duration
	if ld.Rate > 0 {
		interval = time.Duration(float64(time.Second) * float64(conns) / ld.Rate)
	}
	sent := make(chan int, per)
	go func() {
		defer close(sent)
		for i := 0; i < per; i++ {
			d := time.Since(start)
			if interval > 0 {
				d = time.Duration(i) * interval
				if wait := d - time.Since(start); wait > 0 {
					cl.Flush()
					time.Sleep(wait)
				}
			}
			due[i] = d
			if interval > 0 {
				late = append(late, time.Since(start)-d)
			}
			if cl.Write(ld.Frame(c*per+i)) != nil {
				return
			}
			sent <- i
		}
		cl.CloseWrite()
	}()
	lat = make([]time.Duration, 0, per)
	for i := 0; i < per; i++ {
		f, err := cl.ReadReply()
		if err != nil {
			return nil, nil, 0, fmt.Errorf("connection %d, reply %d of %d: %w", c, i, per, err)
		}
		<-sent
		lat = append(lat, time.Since(start)-due[i])
		if f.Type() != "ack" {
			errors++
		}
	}
	return lat, late, errors, nil
}
