package bridge

import (
	"context"
	"time"
)

// Messages that wait for a lane.
//
// The relay follows the log in order. Until 2026-12-01, a message that
// found no lane free (relayLanesMax busy, and none for its address) stopped
// it until a lane ended, and retries, which fall due before new messages
// are taken, took every lane again at each of their attempts. So any
// agents that registered 64 addresses that take a frame and never answer
// held every other agent's messages for the relay's timeout, again at
// every wave of retries (helper-82 measured 10 s for one message to a
// working addressee).
//
// Now retries may hold at most half the lanes (relayRetryLanesMax). An
// address that failed once is likely to fail again, each time holding its
// lane for the whole timeout, while addresses that answer end their lanes
// within milliseconds. An address counts as retried while it has a
// message waiting for a retry (retryFor), not only for the retries
// themselves: a new message that started an ordinary lane for it carried
// its retries past the share (helper-85).
//
// And a message that finds no lane waits in a list of its own, in the
// order the relay took it, while the relay goes on with the log: messages
// for addressees without a registration are settled, messages for down
// addresses queued for their retry (within the retry bounds), and a
// message that waits only for the retries' share does not hold up the
// messages behind it that need no retry lane. What the list keeps in order
// (placeWaiting):
//   - an address's messages: one for an address with a message waiting
//     waits behind it;
//   - behind a message that waits for any lane at all (all 64 busy),
//     every later message waits too, even one whose address has a lane:
//     fed on, 64 busy lanes never end, and the waiting message starved
//     for as long as their addressees were kept busy (helper-85). The
//     lanes drain, and the list takes the first that ends, in order;
//   - behind a message that waits for the retries' share, the later
//     messages for retried addresses wait too, for the same reason.
//
// The list counts towards the relay's bound (relayPendingMax), its
// retries towards the retry bounds (relayRetryPerAddressMax,
// relayRetriesMax), and its messages are owed, in the cursor's record,
// like those in lanes and retries.

// relayRetryLanesMax bounds the lanes delivering to retried addresses
// (retryFor).
const relayRetryLanesMax = relayLanesMax / 2 // lanes

// waitingItem is a message waiting for a lane to addr.
type waitingItem struct {
	it    *retryItem
	addr  string
	since time.Time // when it began to wait: due from then after a restart
}

// retryFor reports whether it, for addr, goes to a retried address: it
// failed before, or addr has messages waiting for a retry, in the retry
// queue or in the list. The caller holds st.mu.
func (st *relayRun) retryFor(it *retryItem, addr string) bool {
	return it.addr != "" || st.retryCount[addr] > 0 || st.waitRetryFor[addr] > 0
}

// place hands it to addr's lane, queues it for a retry if addr is down,
// or puts it at the end of the messages waiting for a lane, as the list's
// order asks (placeWaiting). The caller must not hold st.mu.
func (st *relayRun) place(ctx context.Context, it *retryItem, addr string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.isDown(addr, it) {
		return // bounded there, as every retry is
	}
	if len(st.laneWait) > 0 && st.held(it, addr) {
		st.wait(it, addr)
		return
	}
	switch st.dispatch(ctx, it, addr) {
	case noLane:
		st.waitAll = true
		st.wait(it, addr)
	case noRetryLane:
		st.waitRetries = true
		st.wait(it, addr)
	}
}

// held reports whether it, for addr, must wait behind the messages
// already waiting for a lane: as placeWaiting's last pass left the list's
// marks, since only a lane that ends can change them. The caller holds
// st.mu.
func (st *relayRun) held(it *retryItem, addr string) bool {
	return st.waitAll || st.laneWaitFor[addr] > 0 || st.waitRetries && (st.retryFor(it, addr) || st.lanes[addr] != nil && st.lanes[addr].retry)
}

// wait puts it at the end of the list. The caller holds st.mu.
func (st *relayRun) wait(it *retryItem, addr string) {
	st.laneWait = append(st.laneWait, waitingItem{it: it, addr: addr, since: time.Now()})
	st.laneWaitFor[addr]++
	st.countRetry(it, +1)
	st.r.laneWaiting.Store(int64(len(st.laneWait)))
}

// countRetry adds d to the retries waiting in the list, if it is one: they
// count towards the retry bounds (queueRetry) and make their address a
// retried one (retryFor). The caller holds st.mu.
func (st *relayRun) countRetry(it *retryItem, d int) {
	if it.addr == "" {
		return
	}
	if st.waitRetryFor[it.addr] += d; st.waitRetryFor[it.addr] <= 0 {
		delete(st.waitRetryFor, it.addr)
	}
	st.waitRetryCount += d
}

// placeWaiting hands the messages waiting for a lane to lanes, in order,
// as far as lanes are free, and marks what still holds the list up (held).
// Only a lane that ended since the last pass can have made room, so
// without one it does nothing. The caller must not hold st.mu.
func (st *relayRun) placeWaiting(ctx context.Context) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.laneWait) == 0 || st.laneGen == st.placedGen {
		return
	}
	st.placedGen = st.laneGen
	st.waitAll, st.waitRetries = false, false
	// laneWaitFor is counted again as the pass keeps messages, so that a
	// message is held only by the ones before it; the retries waiting
	// (waitRetryFor) stay counted until placed, so that an address with a
	// retry further down still counts as retried (retryFor).
	clear(st.laneWaitFor)
	kept := st.laneWait[:0]
	for _, w := range st.laneWait {
		if !st.held(w.it, w.addr) {
			// Counted out while dispatched: if its address is down, the
			// retry bounds it meets there must not count it twice.
			st.countRetry(w.it, -1)
			res := st.dispatch(ctx, w.it, w.addr)
			if res == placed {
				continue
			}
			st.countRetry(w.it, +1)
			st.waitAll = st.waitAll || res == noLane
			st.waitRetries = st.waitRetries || res == noRetryLane
		}
		kept = append(kept, w)
		st.laneWaitFor[w.addr]++
	}
	clear(st.laneWait[len(kept):]) // let the placed envelopes go
	st.laneWait = kept
	st.r.laneWaiting.Store(int64(len(kept)))
}
