package projections

import (
	"fmt"
	"testing"
	"time"

	"github.com/aglx/ledger/protocol"
)

// TestUntrackedSignedRetryCopyCancelsNothing: a signed task.retry whose
// new handshake was not tracked (its pair was full) was not remembered as
// seen, so a copy of it, sent by anyone who holds it within its signature
// window, cancelled the owner's next handshake for the same task in the
// owner's name (helper-137).
func TestUntrackedSignedRetryCopyCancelsNothing(t *testing.T) {
	const owner, w1, w2 = hsOwner, hsWorker, hsOther
	h := newHSHarness(t)
	ownerKey := newEd25519(t)
	h.bindKey(owner, ownerKey, h.at)
	h.catchUp()
	sign := func(f *protocol.Frame) *protocol.Frame {
		return signed(t, ownerKey, stamped(f, h.at.Add(time.Millisecond)))
	}
	// The pair owner -> w2 is full.
	for i := range HandshakesPairMax {
		h.send(sign(frame(owner, w2, protocol.TypeTaskAssign, fmt.Sprintf(`{"task":"x","task_id":"f-%d"}`, i))), time.Millisecond)
	}
	h.send(sign(frame(owner, w1, protocol.TypeTaskAssign, `{"task":"a","task_id":"t-1"}`)), time.Second)
	retry := sign(frame(owner, w2, protocol.TypeTaskRetry, `{"original_task_id":"t-1","attempt":2}`))
	h.send(retry, time.Second) // cancels t-1 with w1; untracked: the pair is full
	// The owner hands t-1 to w1 again.
	again := h.send(sign(frame(owner, w1, protocol.TypeTaskAssign, `{"task":"a2","task_id":"t-1"}`)), time.Second)
	if q, ok := h.hs.Handshake(again.Seq); !ok || q.State != HandshakePending {
		t.Fatalf("the second assignment opened %+v", q)
	}
	// w2, which was relayed the retry, sends it again a minute later.
	h.send(withID(retry, "copy"), time.Minute)
	if q, _ := h.hs.Handshake(again.Seq); q.State != HandshakePending {
		t.Errorf("a copy of the owner's earlier retry ended its new assignment: %s (%s)", q.State, q.Detail)
	}
}

// TestOverdueKeyDoesNotRepeat: a request that reuses the key of a
// handshake past its deadline opens a handshake, whether or not the expiry
// bound (HandshakesExpiryMax) has reached the old one yet because many
// others fell due at once; it was counted repeated and not tracked
// (helper-137).
func TestOverdueKeyDoesNotRepeat(t *testing.T) {
	for _, fillers := range []int{0, HandshakesExpiryMax + 44} {
		t.Run(fmt.Sprintf("%d others due", fillers), func(t *testing.T) {
			h := newHSHarness(t)
			sendStrangers(h, fillers)
			h.send(frame(hsOwner, hsWorker, protocol.TypeShutdownRequest, `{"request_id":"s-1"}`), time.Microsecond)
			again := h.send(frame(hsOwner, hsWorker, protocol.TypeShutdownRequest, `{"request_id":"s-1"}`), HandshakeShutdownTTL+time.Second)
			if q, ok := h.hs.Handshake(again.Seq); !ok || q.State != HandshakePending {
				c, _ := h.hs.Counts()
				t.Errorf("the request after the first one's deadline was not tracked (repeated %d)", c.Repeated)
			}
		})
	}
}

// TestOverduePairDoesNotFillIt: a pair whose HandshakesPairMax requests
// are all past their deadline takes a new one, however many strangers'
// handshakes fell due at the same time; the overdue ones counted against
// the pair's bound until the expiry bound reached them (helper-137).
func TestOverduePairDoesNotFillIt(t *testing.T) {
	for _, fillers := range []int{0, HandshakesExpiryMax + 44} {
		t.Run(fmt.Sprintf("%d others due", fillers), func(t *testing.T) {
			h := newHSHarness(t)
			sendStrangers(h, fillers)
			for i := range HandshakesPairMax {
				h.send(frame(hsOwner, hsWorker, protocol.TypeShutdownRequest, fmt.Sprintf(`{"request_id":"s-%d"}`, i)), time.Microsecond)
			}
			next := h.send(frame(hsOwner, hsWorker, protocol.TypeShutdownRequest, `{"request_id":"late"}`), HandshakeShutdownTTL+time.Second)
			if q, ok := h.hs.Handshake(next.Seq); !ok || q.State != HandshakePending {
				c, _ := h.hs.Counts()
				t.Errorf("a request to a pair whose requests are all overdue was not tracked (untracked %d)", c.Untracked)
			}
		})
	}
}

// sendStrangers opens n unsigned shutdown requests to hsOther from made-up
// senders, a pair's bound each, a microsecond apart: handshakes that fall
// due together, more than HandshakesExpiryMax of them when n is.
func sendStrangers(h *hsHarness, n int) {
	for i := range n {
		from := fmt.Sprintf("agent://made-up-%d.local", i/HandshakesPairMax)
		h.send(frame(from, hsOther, protocol.TypeShutdownRequest, fmt.Sprintf(`{"request_id":"p-%d"}`, i)), time.Microsecond)
	}
}
