package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/aglx/ledger/bridge"
	"github.com/aglx/ledger/projections"
)

// Saving the folds' state while the node runs. A clean stop saves it
// (foldstate.go), but a node that crashes, or is killed, was never
// stopped cleanly, and its next start folded everything since the last
// clean stop: on a node that runs for months, most of the log, when
// on-call engineers need it back most.
//
// The live folds cannot simply be written out as they run: encoding them
// holds their lock, and every reply that waits for the folds with it,
// for about 200 ms per 50,000 transfers and seconds at millions. So a
// round works on a copy of its own: it loads the state saved last (the
// stop's, or the last round's) into fresh folds, folds the events since
// from the stream up to an event the live folds have passed, and saves
// that. The copy is the same code folding the same events as a start
// would after a crash, so it is the state that start would reach, and it
// takes no lock the live node holds. Its price is CPU (each event is
// folded a second time, at most checkpointDuty of one core), memory (a
// second set of folds while the round runs) and a write of the whole
// state per round. docs/DESIGN.md, "Saved fold state".

// checkpointDuty is the share of the wall time a round may work; it
// sleeps the rest, after each stretch of events. The fold of the copy is
// one goroutine and checks every signature itself (no verdict cache),
// so a round takes at most this share of one core.
const checkpointDuty = 0.25

// checkpointer runs the rounds. stop ends a round in progress, without
// writing, and waits for it.
type checkpointer struct {
	m      *Main
	every  time.Duration
	cancel context.CancelFunc
	done   chan struct{}
	// saved is the sequence of the state on disk as far as this run
	// knows (the one the start loaded, or the last round's): a round
	// starts only once the live folds have passed it.
	saved atomic.Uint64
	// source is the state a round starts from: the one the start loaded
	// (the node's, or one prepared for this build, and so checked,
	// against its stop's record among others), then the rounds' own; ""
	// while there is none to build on. Not one the start refused or did
	// not read (--full-replay): readFoldState alone does not check the
	// record, and a round's result, at another sequence, is never checked
	// against it. Only the rounds' goroutine uses it once they run.
	source string
	// rounds counts the rounds that saved a state, failures those that
	// failed (aglx_fold_state_save_failures_total).
	rounds, failures atomic.Uint64
	// afterLoad, if set, runs in a round once the saved state is loaded:
	// tests make a round panic there. Nil in the node.
	afterLoad func()
}

// errRoundPanicked wraps a round's panic. A round is a shortcut for the
// next start, never needed for a reply: a panic in it (a bug in loading
// or folding the copy) is a failed round and stops the rounds for this
// run, and does not take down the node that serves. The live folds apply
// the same events with the same code, so a panic that is really in a
// fold would reach them too; one in the load of a saved state would not.
var errRoundPanicked = errors.New("the background save panicked; no more background saves in this run")

// startCheckpoints starts the rounds, every --save-state-every once the
// live folds hold the log as it stood at start. loaded is the sequence of
// the state the start loaded (0: none).
func (m *Main) startCheckpoints(loaded uint64) {
	if m.cfg.SaveStateEvery <= 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &checkpointer{m: m, every: m.cfg.SaveStateEvery, cancel: cancel, done: make(chan struct{}), afterLoad: m.cfg.afterRoundLoad}
	c.saved.Store(loaded)
	if loaded > 0 {
		c.source = m.stateLoadedFrom
	}
	m.checkpoints = c
	go c.run(ctx)
}

// stop ends the rounds and waits for the one in progress to give up.
func (c *checkpointer) stop() {
	if c == nil {
		return
	}
	c.cancel()
	<-c.done
}

func (c *checkpointer) run(ctx context.Context) {
	defer close(c.done)
	select {
	case <-c.m.runner.Ready():
	case <-ctx.Done():
		return
	}
	t := time.NewTicker(c.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := c.safeRound(ctx)
		if errors.Is(err, errRoundPanicked) {
			c.failures.Add(1)
			c.m.lg.Error("the fold state was not saved in the background, and will not be until the next start; a start after a crash folds from the state saved before",
				"path", c.m.foldStatePath(), "err", err)
			return
		}
		if err != nil && ctx.Err() == nil {
			c.failures.Add(1)
			c.m.lg.Warn("the fold state was not saved in the background; a start after a crash folds from the state saved before",
				"path", c.m.foldStatePath(), "err", err)
		}
	}
}

// safeRound runs a round and turns a panic in it into errRoundPanicked,
// with the panic's value and stack.
func (c *checkpointer) safeRound(ctx context.Context) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%w: %v\n%s", errRoundPanicked, v, debug.Stack())
		}
	}()
	return c.round(ctx)
}

// round brings a copy of the folds from the saved state up to the event
// the live folds last applied, and saves it in the saved state's place.
func (c *checkpointer) round(ctx context.Context) error {
	m := c.m
	target := m.runner.Applied()
	if target <= c.saved.Load() {
		return nil // nothing new since the state on disk
	}
	started := time.Now()
	cfg := m.foldConfig
	cfg.Verdicts = nil // the live node's: its entries are for its own folds to take
	folds, outbox := newFolds(cfg)
	var from uint64
	if c.source != "" {
		h, _, why, err := m.readFoldState(ctx, c.source, folds, outbox, m.log.Durable())
		switch {
		case err == nil && why == "":
			from = h.Seq
		case errors.Is(err, fs.ErrNotExist):
		default:
			if err != nil {
				why = err.Error()
			}
			m.lg.Info("the saved fold state cannot be built on; the background save folds the whole log", "path", c.source, "why", why)
			folds, outbox = newFolds(cfg) // a failed load leaves the folds half loaded
		}
	}
	if c.afterLoad != nil {
		c.afterLoad()
	}
	if from >= target {
		c.saved.Store(from)
		return nil
	}
	// The load and the encoding below are paced as the fold is: each is
	// a pass over the whole state on one core (a second and more at
	// millions of events), whatever the few events since the last round.
	p := dutyPacer{ctx: ctx, duty: checkpointDuty, since: started}
	if err := p.pace(); err != nil {
		return err
	}
	r := projections.NewRunner(m.log, m.lg.With("part", "background fold"), folds.All()...)
	r.Resume(from)
	if err := r.FoldTo(ctx, target, p.pace); err != nil {
		return err
	}
	e, err := m.log.Get(ctx, target)
	if err != nil {
		return err
	}
	b, err := m.encodeFoldState(folds, outbox, target, e.ID, nil)
	if err != nil {
		return err
	}
	if err := p.pace(); err != nil {
		return err // the stop saves its own, newer state
	}
	if err := bridge.WriteFileDurable(m.foldStatePath(), b, 0o600); err != nil {
		return err
	}
	c.saved.Store(target)
	c.source = m.foldStatePath()
	m.dropPreparedState()
	c.rounds.Add(1)
	m.lg.Info("fold state saved in the background", "path", m.foldStatePath(), "seq", target, "from_seq", from, "events", target-from,
		"bytes", len(b), "took", time.Since(started).Round(time.Millisecond))
	return nil
}

// dutyPacer keeps a loop of work to a share of the wall time: after each
// piece it sleeps for as long as the piece took times (1-duty)/duty. The
// piece's wall time includes waiting for a core, so on a busy machine it
// backs off further.
type dutyPacer struct {
	ctx   context.Context
	duty  float64
	since time.Time
}

func (p *dutyPacer) pace() error {
	worked := time.Since(p.since)
	t := time.NewTimer(time.Duration(float64(worked) * (1 - p.duty) / p.duty))
	defer t.Stop()
	select {
	case <-t.C:
	case <-p.ctx.Done():
		return p.ctx.Err()
	}
	p.since = time.Now()
	return nil
}
