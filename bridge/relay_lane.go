package bridge

import (
	"context"
	"time"
)

// Lanes: the relay delivers to several addresses at once.
//
// One delivery may take up to relayTimeout (connecting, writing, waiting
// for the addressee's reply). When deliveries ran one after another on the
// relay's goroutine, a single addressee that accepted a connection and
// never answered held every other agent's messages for that long, and one
// that was down cost a connect timeout at each of its retries. Now each
// address has a lane: a goroutine that delivers its messages in the order
// the relay took them, on the one connection to that address. A slow or
// dead addressee holds only its own lane.
//
// The relay's goroutine still takes the log's messages in order, looks up
// the addressee's address and hands each message to that address's lane;
// it also keeps the retry queue and the cursor. A lane settles what it
// delivers (or queues it for a retry) under the run's lock, so the cursor
// never passes a message that is still in a lane.

// relayLanesMax bounds the addresses delivered to at once: goroutines and
// connections. When it is reached, a message for an address without a
// lane waits for one (relay_wait.go).
const relayLanesMax = 64 // lanes

// lane delivers the messages for one address, in order.
type lane struct {
	addr string
	ch   chan *retryItem // buffered relayPendingMax: sends never block
	// outstanding counts the messages sent to ch and not yet settled. The
	// lane ends when it reaches 0; both change under relayRun.mu.
	outstanding int
	// retry is set for a lane started for a retry: it counts towards
	// relayRetryLanesMax for as long as it lasts.
	retry bool
}

// placement is what dispatch made of a message.
type placement int

const (
	placed      placement = iota // in its address's lane, or queued for a retry (the address is down)
	noLane                       // a new lane was needed and relayLanesMax are busy
	noRetryLane                  // a new lane for a retry was needed and retries hold relayRetryLanesMax
)

// dispatch hands it to the lane of addr, starting one if needed, or, if
// addr is down, queues it for the address's next attempt. It changes
// nothing when that needs a lane beyond relayLanesMax, or, for a retry
// (retryFor), beyond relayRetryLanesMax (relay_wait.go). The caller holds
// st.mu.
func (st *relayRun) dispatch(ctx context.Context, it *retryItem, addr string) placement {
	if st.isDown(addr, it) {
		return placed
	}
	ln := st.lanes[addr]
	if ln == nil {
		retry := st.retryFor(it, addr)
		switch {
		case len(st.lanes) >= relayLanesMax:
			return noLane
		case retry && st.retryLanes >= relayRetryLanesMax:
			return noRetryLane
		}
		ln = &lane{addr: addr, ch: make(chan *retryItem, relayPendingMax), retry: retry}
		st.lanes[addr] = ln
		if retry {
			st.retryLanes++
		}
		st.r.lanes.Store(int64(len(st.lanes)))
		st.wg.Add(1)
		go st.runLane(ctx, ln)
	}
	// The relay takes no message while relayPendingMax are in lanes,
	// waiting for one, or waiting for a retry, and that is the channel's
	// capacity, so it is never full (a new lane's is empty); if it were,
	// blocking here while holding mu would stop the lane for good, so a
	// full lane counts as no lane free.
	//
	// What the cursor record needs of it is read before the send: from
	// then on the lane changes it without the lock.
	e := st.inLane[it.env.Seq]
	e = inLaneEntry{n: e.n + 1, attempts: max(e.attempts, it.attempts), addr: it.addr, id: it.env.ID, since: time.Now()}
	select {
	case ln.ch <- it:
	default:
		return noLane
	}
	ln.outstanding++
	st.inLane[it.env.Seq] = e
	return placed
}

// runLane delivers the lane's messages until it has none left. After ctx
// ends it delivers nothing more: what is left stays unsettled, so the
// cursor stays behind it and a restart delivers it.
func (st *relayRun) runLane(ctx context.Context, ln *lane) {
	defer st.wg.Done()
	for it := range ln.ch {
		if ctx.Err() != nil {
			return
		}
		res := st.attempt(ctx, it, ln.addr)
		st.mu.Lock()
		switch res {
		case attemptDelivered:
			delete(st.down, ln.addr)
		case attemptCut:
			st.requeue(it)
		case attemptRetry:
			st.queueRetry(it, ln.addr)
			st.breakLane(ln, it.due, it.attempts)
		case attemptGaveUp:
			// The address failed all the same: the messages behind this
			// one wait for the first back-off instead of each waiting out
			// a timeout now, and keep their own attempt counts.
			st.breakLane(ln, time.Now().Add(relayBackOff[0]), 0)
		}
		st.leaveLane(ln, it)
		done := ln.outstanding == 0
		if done {
			delete(st.lanes, ln.addr)
			if ln.retry {
				st.retryLanes--
			}
			st.laneGen++ // room for the messages waiting for a lane
			st.r.lanes.Store(int64(len(st.lanes)))
		}
		st.mu.Unlock()
		st.wake(st.freed)
		if done {
			st.wake(st.laneEnded)
			return
		}
	}
}

// leaveLane settles the lane's bookkeeping for it, whatever became of it.
// The caller holds mu.
func (st *relayRun) leaveLane(ln *lane, it *retryItem) {
	if e := st.inLane[it.env.Seq]; e.n <= 1 {
		delete(st.inLane, it.env.Seq)
	} else {
		e.n--
		st.inLane[it.env.Seq] = e
	}
	ln.outstanding--
}

// wake signals ch (st.freed: a lane settled a message; st.laneEnded: a
// lane ended) to the relay's goroutine, if it waits for it.
func (st *relayRun) wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// waitFor waits until ch is signalled, the cursor is due to be written,
// ctx ends, or, if untilDue, a retry falls due.
func (st *relayRun) waitFor(ctx context.Context, ch chan struct{}, untilDue bool) {
	until := time.Now().Add(relayCursorSaveInterval)
	if due, ok := st.nextDue(); untilDue && ok && due.Before(until) {
		until = due
	}
	t := time.NewTimer(time.Until(until))
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	case <-ctx.Done():
	}
}

// inLaneEntry is what the relay keeps of a message in a lane: how many
// times it was handed to one (see relayRun.inLane), and its attempts and
// failed address as they were when it was, for the cursor record (the
// lane changes the item itself without the lock).
type inLaneEntry struct {
	n, attempts int
	addr, id    string
	since       time.Time // when it entered the lane
}
