package bridge

import (
	"log/slog"
	"time"
)

// An address that fails is treated as down until its next attempt is due.
//
// Without this, a lane went on to try every message queued behind one
// that had just failed, each waiting out its own timeout (10 s for an
// address that drops packets), and one dead address with many messages
// filled the relay's bound of messages waiting for a retry
// (relayPendingMax) for half an hour, while no other agent got anything.
// Now:
//   - when a delivery to an address fails, the messages queued behind it
//     in the lane go back to the retry queue untried, due with it, and
//     counted as having failed with it (so a dead address's messages are
//     given up together, after the back-off, not one after another);
//   - a new message for an address that is down goes to the retry queue
//     without an attempt;
//   - at most relayRetryPerAddressMax messages wait for a retry per
//     address; beyond that a message that fails is given up at once (it
//     stays in the log, like any undelivered message), so one address
//     cannot hold the relay's whole bound.

// relayRetryPerAddressMax bounds the messages waiting for a retry to one
// address: a quarter of relayPendingMax, so that one dead address cannot
// fill it, and an address down for a moment during a burst keeps a few
// hundred messages for later. Beyond it, messages for a failing address
// are given up untried (they stay in the log): keeping them would hold the
// relay's bound, and with it every other agent's messages.
const relayRetryPerAddressMax = relayPendingMax / 4 // messages

// relayRetriesMax bounds the messages waiting for a retry to all addresses
// together: half of relayPendingMax, so that the other half is always left
// for messages to addresses that work. With only the per-address bound,
// four dead addresses (any four agents registering ports nobody listens
// on) filled relayPendingMax, and the relay took nothing new until their
// back-offs ran out, half an hour later.
const relayRetriesMax = relayPendingMax / 2 // messages

// isDown reports whether addr is down, and if so queues it for the
// address's next attempt instead. The caller holds mu.
func (st *relayRun) isDown(addr string, it *retryItem) bool {
	until, ok := st.down[addr]
	if !ok {
		return false
	}
	if !time.Now().Before(until) {
		delete(st.down, addr) // due again: the next attempt decides
		return false
	}
	if it.due.Before(until) {
		it.due = until
	}
	st.queueRetry(it, addr)
	return true
}

// breakLane marks the lane's address down until due, after a delivery to
// it failed, and sends the messages queued behind that one in the lane
// back to the retry queue, due then, counted as having made attempts
// attempts (at least). The caller holds mu, and the failed message is
// still counted in the lane.
func (st *relayRun) breakLane(ln *lane, due time.Time, attempts int) {
	st.down[ln.addr] = due
	for ln.outstanding > 1 {
		it := <-ln.ch // there: outstanding counts it
		st.leaveLane(ln, it)
		it.attempts = max(it.attempts, attempts)
		it.due = due
		st.queueRetry(it, ln.addr)
	}
}

// pruneDown forgets the addresses whose down time has passed, so that
// addresses never written to again do not pile up. The caller holds mu.
func (st *relayRun) pruneDown(now time.Time) {
	for addr, until := range st.down {
		if !now.Before(until) {
			delete(st.down, addr)
		}
	}
}

// queueRetry puts it in the retry queue as having failed at addr, or gives
// it up if addr has relayRetryPerAddressMax waiting already, or all
// addresses relayRetriesMax. The caller holds mu.
func (st *relayRun) queueRetry(it *retryItem, addr string) {
	// Retries waiting for a lane count as waiting for a retry (relay_wait.go).
	forAddr, all := st.retryCount[addr]+st.waitRetryFor[addr], st.retries.len()+st.waitRetryCount
	if forAddr >= relayRetryPerAddressMax || all >= relayRetriesMax {
		st.r.undeliverable.Add(1)
		st.giveUpLog.log(st.r.Lg, time.Now(), slog.LevelWarn, "relay: too many messages wait for a retry; giving this one up, it stays in the log",
			"seq", it.env.Seq, "to", it.env.To, "addr", addr, "waiting_for_addr", forAddr, "waiting", all)
		return
	}
	it.addr = addr
	st.retryCount[addr]++
	st.retries.push(it)
	st.r.waiting.Store(int64(st.retries.len()))
}

// requeue puts it back in the retry queue outside the per-address bound:
// a message taken from the queue that found no lane, or cut short by
// shutdown, was counted before and must stay unsettled. The caller holds
// mu.
func (st *relayRun) requeue(it *retryItem) {
	if it.addr != "" {
		st.retryCount[it.addr]++
	}
	st.retries.push(it)
	st.r.waiting.Store(int64(st.retries.len()))
}

// popRetry takes the first message from the retry queue. The caller holds
// mu.
func (st *relayRun) popRetry() *retryItem {
	it := st.retries.pop()
	if it.addr != "" {
		if st.retryCount[it.addr]--; st.retryCount[it.addr] <= 0 {
			delete(st.retryCount, it.addr)
		}
	}
	st.r.waiting.Store(int64(st.retries.len()))
	return it
}
