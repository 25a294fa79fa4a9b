package bridge

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/aglx/ledger/events"
)

// newTestRun is a relayRun with no log behind it, for the bookkeeping of
// lanes, retries and the list of messages waiting for a lane. ctx is
// cancelled, so a lane it starts delivers nothing and stays counted.
func newTestRun() (*relayRun, context.Context) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return &relayRun{r: &Relay{Lg: slog.New(slog.NewTextHandler(io.Discard, nil))}, retries: newRetryQueue(),
		lanes: map[string]*lane{}, inLane: map[uint64]inLaneEntry{}, down: map[string]time.Time{},
		retryCount: map[string]int{}, laneWaitFor: map[string]int{}, waitRetryFor: map[string]int{},
		freed: make(chan struct{}, 1), laneEnded: make(chan struct{}, 1)}, ctx
}

// busyLanes fills n lanes with a message each, to addresses of their own;
// retry marks them as lanes of retried addresses.
func (st *relayRun) busyLanes(n int, retry bool) {
	for i := range n {
		st.lanes[fmt.Sprintf("127.0.0.2:%d", 1000+i)] = &lane{retry: retry, outstanding: 1}
		if retry {
			st.retryLanes++
		}
	}
}

// endLane ends one of the busy lanes, as runLane does.
func (st *relayRun) endLane(retry bool) {
	for addr, ln := range st.lanes {
		if ln.retry == retry && ln.ch == nil {
			delete(st.lanes, addr)
			if retry {
				st.retryLanes--
			}
			st.laneGen++
			return
		}
	}
}

func msg(seq uint64) *retryItem {
	return &retryItem{env: &events.Envelope{Seq: seq, ID: fmt.Sprint("e", seq)}}
}

// TestRelayRetryShareIsByAddress: an address with a message waiting for a
// retry is a retried address, whatever message opens its lane: a new
// message that found its down mark run out started an ordinary lane, and
// the address's retries rode it past the share (helper-85).
func TestRelayRetryShareIsByAddress(t *testing.T) {
	st, ctx := newTestRun()
	st.busyLanes(relayRetryLanesMax, true)
	const x = "127.0.0.1:9"
	st.down[x] = time.Now().Add(-time.Millisecond) // its back-off has run out
	retry := msg(1)
	retry.attempts, retry.due = 1, time.Now().Add(-time.Millisecond)
	st.queueRetry(retry, x)
	st.place(ctx, msg(2), x) // taken from the log before the retry falls due
	if st.lanes[x] != nil || len(st.laneWait) != 1 {
		t.Fatalf("a new message for a retried address opened a lane past the retries' share: lanes %d, waiting %d", len(st.lanes), len(st.laneWait))
	}
	st.mu.Lock()
	it := st.popRetry()
	st.mu.Unlock()
	st.place(ctx, it, x)
	if st.lanes[x] != nil || len(st.laneWait) != 2 {
		t.Fatalf("the retry opened a lane past the share: lanes %d, waiting %d", len(st.lanes), len(st.laneWait))
	}
	if st.laneWait[0].it.env.Seq != 2 || st.laneWait[1].it.env.Seq != 1 {
		t.Fatalf("waiting: seq %d then %d; want 2, taken first, then the retry", st.laneWait[0].it.env.Seq, st.laneWait[1].it.env.Seq)
	}
	// A retry lane ends: the address gets one, as a retried address, and
	// both its messages go in it, in the list's order (placeWaiting). The
	// lane's own order is not read off its channel: the lane's goroutine,
	// started under a cancelled context, takes one message as it stops.
	st.endLane(true)
	st.placeWaiting(ctx)
	ln := st.lanes[x]
	if ln == nil || !ln.retry || len(st.laneWait) != 0 || st.retryLanes != relayRetryLanesMax || ln.outstanding != 2 {
		t.Fatalf("after a retry lane ended: lane %+v, waiting %d, retry lanes %d", ln, len(st.laneWait), st.retryLanes)
	}
}

// TestRelayWaitingBlocksFeedingBusyLanes: behind a message that waits for
// any lane, a message for an address with a busy lane waits too: fed on,
// busy lanes never ended, and the waiting message starved (helper-85).
// When a lane ends, the list is placed in order.
func TestRelayWaitingBlocksFeedingBusyLanes(t *testing.T) {
	st, ctx := newTestRun()
	const busy = "127.0.0.1:7"
	st.busyLanes(relayLanesMax-1, false)
	st.place(ctx, msg(1), busy) // the 64th lane
	if st.lanes[busy] == nil {
		t.Fatal("the 64th lane was not opened")
	}
	st.place(ctx, msg(2), "127.0.0.1:8") // no lane left
	st.place(ctx, msg(3), busy)          // its lane is there, but busy
	if len(st.laneWait) != 2 || st.lanes[busy].outstanding != 1 {
		t.Fatalf("waiting %d, the busy lane holds %d; want 2 waiting and the lane not fed", len(st.laneWait), st.lanes[busy].outstanding)
	}
	st.endLane(false)
	st.placeWaiting(ctx)
	if len(st.laneWait) != 0 || st.lanes["127.0.0.1:8"] == nil || st.lanes[busy].outstanding != 2 {
		t.Fatalf("after a lane ended: waiting %d, lanes %d", len(st.laneWait), len(st.lanes))
	}
}

// TestRelayWaitingRetriesAreBounded: retries waiting for a lane count
// towards the retry bounds, so dead addresses cannot hold more than half
// the relay's bound through the list (helper-85).
func TestRelayWaitingRetriesAreBounded(t *testing.T) {
	st, ctx := newTestRun()
	st.busyLanes(relayRetryLanesMax, true)
	for i := range relayRetriesMax {
		it := msg(uint64(i + 1))
		it.attempts, it.addr = 1, fmt.Sprintf("127.0.0.3:%d", i%64)
		st.place(ctx, it, it.addr) // no retry lane: they wait
	}
	if len(st.laneWait) != relayRetriesMax {
		t.Fatalf("%d retries wait for a lane, want %d", len(st.laneWait), relayRetriesMax)
	}
	before := st.r.undeliverable.Load()
	st.mu.Lock()
	st.queueRetry(msg(9999), "127.0.0.3:1")
	st.mu.Unlock()
	if st.retries.len() != 0 || st.r.undeliverable.Load() != before+1 {
		t.Fatalf("a retry past the bound was queued: %d queued", st.retries.len())
	}
}

// TestRelayWaitingKeepsEachAddressInOrder: a message for an address with
// one already waiting waits behind it, even with a lane free.
func TestRelayWaitingKeepsEachAddressInOrder(t *testing.T) {
	st, ctx := newTestRun()
	const x = "127.0.0.1:9"
	st.busyLanes(relayLanesMax, false)
	st.place(ctx, msg(1), x)
	st.endLane(false) // a lane is free, and the list not yet placed
	st.waitAll = false
	st.place(ctx, msg(2), x)
	if st.lanes[x] != nil || len(st.laneWait) != 2 {
		t.Fatalf("a later message for %s went ahead of one waiting: lanes %d, waiting %d", x, len(st.lanes), len(st.laneWait))
	}
}
