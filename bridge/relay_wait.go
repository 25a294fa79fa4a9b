package bridge

import (
	"context"
	"time"
)

// Messages that wait for a lane.
//
// The relay follows the log in order. Until 2026-12-01, a message that
// found no lane free (relayLanesMax busy, and none for its address) stopped
// it: nothing after that message was taken until a lane ended, not even a
// message for an address whose lane was busy and working, and retries that
// fell due took the lanes first. So any agents that registered 64
// addresses that take a frame and never answer held every other agent's
// messages for the relay's timeout, again at each of their retries
// (helper-82 measured 10 s for one message to a working addressee).
//
// Now such a message waits in a list of its own, in the order the relay
// took it, and the relay goes on with the log: the messages behind it
// whose addresses have lanes go to them at once. When a lane ends, the
// list is placed first, before new messages and in order, so a message
// never waits behind one taken later; messages for an address with one
// already waiting join the list behind it, so each address still gets its
// messages in the order the relay took them. The list counts towards the
// relay's bound (relayPendingMax), and its messages are owed, in the
// cursor's record, like those in lanes and retries.
//
// And retries may hold at most half the lanes (relayRetryLanesMax). An
// address that failed once is likely to fail again, each time holding its
// lane for the whole timeout; addresses that answer end their lanes
// within milliseconds. So after the first timeout, slow addresses hold at
// most half the lanes, and the other half stays for everyone else. Only
// the first attempts of fresh addresses can still take every lane, for one
// timeout, and each such wave needs new registrations inside
// --relay-networks.

// relayRetryLanesMax bounds the lanes delivering retries: messages that
// failed at an address before, or arrived while it was down.
const relayRetryLanesMax = relayLanesMax / 2 // lanes

// waitingItem is a message waiting for a lane to addr.
type waitingItem struct {
	it    *retryItem
	addr  string
	since time.Time // when it began to wait: due from then after a restart
}

// place hands it to addr's lane, or puts it at the end of the messages
// waiting for a lane when none can take it, or when a message for addr
// already waits there. The caller must not hold st.mu.
func (st *relayRun) place(ctx context.Context, it *retryItem, addr string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.laneWaitFor[addr] > 0 || !st.dispatch(ctx, it, addr) {
		st.laneWait = append(st.laneWait, waitingItem{it: it, addr: addr, since: time.Now()})
		st.laneWaitFor[addr]++
		st.r.laneWaiting.Store(int64(len(st.laneWait)))
	}
}

// placeWaiting hands the messages waiting for a lane to lanes, in order,
// as far as lanes are free: only a lane that ended since the last pass can
// have made room, so without one it does nothing. A message whose address
// has an earlier one still waiting stays behind it. The caller must not
// hold st.mu.
func (st *relayRun) placeWaiting(ctx context.Context) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.laneWait) == 0 || st.laneGen == st.placedGen {
		return
	}
	st.placedGen = st.laneGen
	var stuck map[string]bool // addresses with a message still waiting
	kept := st.laneWait[:0]
	for _, w := range st.laneWait {
		if !stuck[w.addr] && st.dispatch(ctx, w.it, w.addr) {
			if st.laneWaitFor[w.addr]--; st.laneWaitFor[w.addr] <= 0 {
				delete(st.laneWaitFor, w.addr)
			}
			continue
		}
		if stuck == nil {
			stuck = map[string]bool{}
		}
		stuck[w.addr] = true
		kept = append(kept, w)
	}
	clear(st.laneWait[len(kept):]) // let the placed envelopes go
	st.laneWait = kept
	st.r.laneWaiting.Store(int64(len(kept)))
}
