package projections

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/protocol"
)

// retryWaitMax bounds the pause between attempts to resume reading the log
// after an error (a NATS reconnect, say).
const retryWaitMax = 5 * time.Second

// prefetchChunk is how many events read from the stream the prefetcher
// gets at a time: enough to keep every core busy, small enough that the
// folds never wait long.
const prefetchChunk = 512 // events

// prefetchChunkBytes bounds a stretch by the memory its events hold
// (protocol.MemorySize), beside prefetchChunk: up to three stretches are
// in memory at once (one gathering, one being checked, one being folded),
// and 512 events of 1 MiB bodies each made a replay take 3 GB (helper-74).
const prefetchChunkBytes = 32 << 20 // bytes

// applyBatchMax bounds the events folded under one hold of the runner's
// lock. Taking the lock and waking the waiting replies once per stretch
// instead of once per event keeps the fold, the one serial stage of the
// node, from being starved by the goroutines it wakes; the bound keeps
// readers (View, the HTTP API) from waiting long. At about 15 µs per event
// it is a hold of a few milliseconds at most.
const applyBatchMax = 128 // events

// Prefetcher does work for events the folds are about to apply, in
// parallel, where the result can only save the folds work (signature checks
// into the verdict cache). It must not change any projection's state, so
// the folds stay the only writers and a replay gives the same state with or
// without it.
type Prefetcher interface {
	Prefetch(envs []*events.Envelope)
}

// Warmer is a projection that can prepare for a stretch of events before
// it applies them, for example by reading the memory they will touch so
// that its cache misses overlap (ledger.Ledger.Warm). Warm must not change
// the projection's state: a fold gives the same state with or without it.
type Warmer interface {
	Warm(evs []*Event)
}

// Runner feeds the log to its projections in order and tracks how far it
// has got. Readers of projection state go through View, so they never see
// an event half applied.
type Runner struct {
	log   *events.Log
	projs []Projection
	lg    *slog.Logger
	// Prefetcher, if set, sees stretches read back from the stream (at
	// start, and after falling behind) before the folds apply them.
	Prefetcher Prefetcher

	mu sync.RWMutex // guards the projections' state; held to change applied
	// applied is the sequence of the last event applied, and advanced is
	// closed and replaced when it grows. Both are atomic so that the
	// replies waiting in WaitFor never take mu: a reader woken by the
	// fold's Unlock would compete with the fold for the CPU.
	applied  atomic.Uint64
	advanced atomic.Pointer[chan struct{}]
	ready    chan struct{} // closed once the log as it stood at start is applied
	scratch  []*Event      // decode's result, reused: only the runner's goroutine uses it
	at       *atSeq        // AtSeq's look, under mu; nil once taken
}

// atSeq is a look at the folds right after one event (AtSeq).
type atSeq struct {
	seq uint64
	fn  func(ev *Event)
}

// AtSeq has fn called once, on the runner's goroutine with the folds
// locked, right after the first event at or past seq is applied, before
// the next, with that event: the state as of seq exactly when ev.Seq is
// seq, which a View may already have passed (the node takes frames while
// it replays). Call it before Run; fn must only take what it needs
// (ledger.Freeze) and return, and must not keep ev.
func (r *Runner) AtSeq(seq uint64, fn func(ev *Event)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.at = &atSeq{seq: seq, fn: fn}
}

// NewRunner returns a runner over log for the given projections.
func NewRunner(log *events.Log, lg *slog.Logger, projs ...Projection) *Runner {
	if lg == nil {
		lg = slog.Default()
	}
	r := &Runner{log: log, projs: projs, lg: lg, ready: make(chan struct{})}
	ch := make(chan struct{})
	r.advanced.Store(&ch)
	return r
}

// Resume has Run take up the folds after seq, the position of the saved
// state they were loaded from (LoadState), instead of at the log's first
// event. Call it before Run.
func (r *Runner) Resume(seq uint64) { r.applied.Store(seq) }

// Run replays the log from its start (or from where Resume put the folds)
// and then follows it until ctx ends.
// A restart of the node therefore resumes every projection where the log
// stands; a full replay at start is the simple, always-correct way to get
// there.
//
// Run returns only when ctx ends. Where the log ends is read first, for
// the readiness mark; while that fails (a reader whose server restarts),
// Run retries, as it retries reads later: a runner that gave up here would
// leave the node's folds empty and its answers waiting forever.
func (r *Runner) Run(ctx context.Context) error {
	wait := 100 * time.Millisecond
	end, err := r.log.LastSeq(ctx)
	for err != nil {
		if ctx.Err() != nil {
			return nil // stopped, not failed: a stop during start is no warning
		}
		r.lg.Warn("projections: reading where the log ends failed; retrying", "err", err, "wait", wait)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil
		}
		wait = min(2*wait, retryWaitMax)
		end, err = r.log.LastSeq(ctx)
	}
	r.markReadyAt(end)
	if from := r.Applied() + 1; end >= from {
		// The replay's start and end, for an operator watching a start:
		// /readyz is 503 meanwhile, and the log said nothing (helper-61).
		r.lg.Info("projections: replaying the log", "from_seq", from, "to_seq", end)
		go func(start time.Time) {
			select {
			case <-r.ready:
				took, n := time.Since(start), end-from+1
				r.lg.Info("projections: caught up with the log; ready", "events", n, "took", took.Round(time.Millisecond),
					"events_per_second", int(float64(n)/max(took.Seconds(), 1e-3)))
			case <-ctx.Done():
			}
		}(time.Now())
	}
	wait = 100 * time.Millisecond
	for {
		from := r.Applied() + 1
		var err error
		if r.log.Writable() {
			err = r.feed(ctx, end)
		} else {
			// Chunks for the prefetcher while replaying what was there at
			// start; one by one once caught up, so nothing waits.
			chunkMax := 1
			if r.Prefetcher != nil {
				chunkMax = prefetchChunk
			}
			pipe := r.newStretchPipe(end)
			err = r.log.Read(ctx, events.ReadOptions{StartSeq: from, Follow: true}, func(e *events.Envelope) error {
				pipe.add(e, chunkMax, end)
				return nil
			})
		}
		if ctx.Err() != nil {
			return nil
		}
		r.lg.Warn("projections: reading the log failed; retrying", "from", from, "err", err, "wait", wait)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil
		}
		wait = min(2*wait, retryWaitMax)
	}
}

// feed follows the node's own log: each newly published event is taken
// from the log's memory when it is still there (the common case: no trip
// through NATS, no second decoding), and read from the stream when it is
// not (at start, or after falling behind). Both give the same events in
// the same order: the stream's.
func (r *Runner) feed(ctx context.Context, readyAt uint64) error {
	batch := make([]*events.Envelope, 0, applyBatchMax)
	for {
		next := r.Applied() + 1
		if err := r.log.WaitPublished(ctx, next); err != nil {
			return err
		}
		missed := false
		for published := r.log.Published(); next <= published && !missed; {
			batch = batch[:0]
			for ; next <= published && len(batch) < applyBatchMax; next++ {
				e, ok := r.log.Recent(next)
				if !ok {
					missed = true
					break
				}
				batch = append(batch, e)
			}
			r.apply(readyAt, batch...)
		}
		clear(batch)
		if !missed {
			continue
		}
		// Not in memory: read a stretch from the stream, in chunks that the
		// prefetcher sees before the folds do.
		end := r.log.Published()
		pipe := r.newStretchPipe(readyAt)
		err := r.log.Read(ctx, events.ReadOptions{StartSeq: next}, func(e *events.Envelope) error {
			if pipe.add(e, prefetchChunk, end) {
				return events.ErrStop
			}
			return nil
		})
		if err != nil {
			return err
		}
		pipe.finish() // the read ended: fold what it gave
	}
}

// stretchPipe folds the stretches read back from the stream one behind
// the reading: while the folds apply one stretch on the runner's
// goroutine, the prefetcher checks the next one's signatures on every
// core. Without the overlap, the cores sat idle during every fold and
// every read (a replay used about 1.4 of 2 cores).
//
// The prefetcher of a stretch sees the keys as they stood before the
// stretch ahead of it was folded; a key bound in that stretch is missing,
// and the fold checks such a signature itself: the verdict cache only
// saves work, it never decides.
type stretchPipe struct {
	r       *Runner
	readyAt uint64
	chunk   []*events.Envelope // gathering (add)
	bytes   int64              // the memory chunk's events hold
	prev    []*events.Envelope // read and prefetching, not yet folded
	done    chan struct{}      // closed when prev's prefetch is over
}

// add gathers e into the current chunk, which goes to push once it holds
// chunkMax events or reaches end; from end on, the pipe is flushed at
// once, so that nothing read waits for more. It reports whether e is at
// or past end.
func (p *stretchPipe) add(e *events.Envelope, chunkMax int, end uint64) bool {
	p.chunk = append(p.chunk, e)
	p.bytes += protocol.MemorySize(e.Headers, e.Body)
	atEnd := e.Seq >= end
	if len(p.chunk) < chunkMax && p.bytes < prefetchChunkBytes && !atEnd {
		return false
	}
	p.push(p.chunk)
	p.chunk, p.bytes = p.chunk[:0], 0
	if atEnd {
		p.flush()
	}
	return atEnd
}

// finish folds everything gathered and held.
func (p *stretchPipe) finish() {
	if len(p.chunk) > 0 {
		p.push(p.chunk)
		p.chunk, p.bytes = p.chunk[:0], 0
	}
	p.flush()
}

func (r *Runner) newStretchPipe(readyAt uint64) *stretchPipe {
	return &stretchPipe{r: r, readyAt: readyAt}
}

// push takes a stretch (a copy: the caller reuses its slice), starts its
// prefetch and folds the stretch before it.
func (p *stretchPipe) push(chunk []*events.Envelope) {
	next := slices.Clone(chunk)
	done := make(chan struct{})
	if p.r.Prefetcher != nil && len(next) > 1 {
		go func() {
			defer close(done)
			p.r.Prefetcher.Prefetch(next)
		}()
	} else {
		close(done)
	}
	p.flush()
	p.prev, p.done = next, done
}

// flush folds the stretch still held, once its prefetch is over.
func (p *stretchPipe) flush() {
	if p.prev == nil {
		return
	}
	<-p.done
	for c := range slices.Chunk(p.prev, applyBatchMax) {
		p.r.apply(p.readyAt, c...)
	}
	p.prev = nil
}

// markReadyAt closes ready at once if the folds already hold the log up
// to end: an empty log, or a saved state loaded at its end (Resume), where
// no event comes to close it.
func (r *Runner) markReadyAt(end uint64) {
	if end <= r.applied.Load() {
		close(r.ready)
	}
}

// apply folds a stretch of consecutive events under one hold of the lock
// and wakes the waiters once.
//
// The events are decoded before the lock is taken, and every Warmer sees
// the stretch before any fold applies it.
func (r *Runner) apply(readyAt uint64, es ...*events.Envelope) {
	evs := r.decode(es)
	r.mu.Lock()
	defer r.mu.Unlock()
	before := r.applied.Load()
	for _, p := range r.projs {
		if w, ok := p.(Warmer); ok && len(evs) > 0 {
			w.Warm(evs)
		}
	}
	for _, ev := range evs {
		for _, p := range r.projs {
			p.Apply(ev)
		}
		r.applied.Store(ev.Seq)
		if a := r.at; a != nil && ev.Seq >= a.seq {
			r.at = nil
			a.fn(ev)
		}
	}
	clear(evs) // the scratch must not keep the events alive
	applied := r.applied.Load()
	if applied == before {
		return
	}
	// applied is stored before the channel is swapped, and WaitFor loads
	// the channel before applied, so a waiter either sees the new sequence
	// or holds the channel closed here.
	ch := make(chan struct{})
	close(*r.advanced.Swap(&ch))
	if readyAt != 0 && applied >= readyAt {
		select {
		case <-r.ready:
		default:
			close(r.ready)
		}
	}
}

// decode returns the events of es that the folds have not seen yet,
// decoded, in the runner's scratch slice. Only the runner's goroutine
// calls it and changes applied, so it needs no lock.
func (r *Runner) decode(es []*events.Envelope) []*Event {
	evs := r.scratch[:0]
	applied := r.applied.Load()
	for _, e := range es {
		if e.Seq <= applied {
			// The ordered consumer may redeliver after a reset; a fold sees
			// each event once.
			continue
		}
		ev, err := NewEvent(e)
		if err != nil {
			r.lg.Warn("projections: an event in the log does not decode; skipped by every fold", "seq", e.Seq, "err", err)
		}
		evs = append(evs, ev)
		applied = e.Seq
	}
	r.scratch = evs
	return evs
}

// Applied is the sequence of the last event folded into the projections.
// The fold may be in the middle of a stretch: read the state it describes
// through View.
func (r *Runner) Applied() uint64 { return r.applied.Load() }

// Ready is closed once the runner has applied every event that was in the
// log when Run started.
func (r *Runner) Ready() <-chan struct{} { return r.ready }

// WaitFor blocks until the event at seq has been applied, so that a reply
// can reflect the message it answers (read-your-writes).
func (r *Runner) WaitFor(ctx context.Context, seq uint64) error {
	for {
		ch := *r.advanced.Load()
		applied := r.applied.Load()
		if applied >= seq {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("projections: waiting for seq %d (applied %d)", seq, applied), ctx.Err())
		}
	}
}

// View runs fn while no event is being applied, so fn sees a state that
// matches exactly one log position, which it is given.
func (r *Runner) View(fn func(applied uint64)) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	fn(r.applied.Load())
}
