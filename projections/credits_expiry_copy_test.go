package projections

import (
	"fmt"
	"testing"
	"time"

	"github.com/aglx/ledger/protocol"
)

// TestHoldsExpireAtARefusedCopy: LEDGER.md says that before each credit or
// task event Apply releases every hold whose expiry has come. A copy of a
// refused signed message is a credit event in the log like any other, but
// the memory of refused messages answered it without the ledger ever
// seeing it, so a hold past its expiry stayed live (pending, in the
// snapshot and the digest) until some later event, and was recorded as
// ended by that event: a replayer written from the docs ends it at the
// copy.
func TestHoldsExpireAtARefusedCopy(t *testing.T) {
	const alice, bob = "agent://alice.local", "agent://bob.local"
	h, last := observedHarness(t, alice, bob) // alice has 50
	h.send(signed(t, h.alice, frame(alice, bob, protocol.TypeCreditApprove,
		fmt.Sprintf(`{"approved_amount":10,"transaction_id":"appr-1","expires":%q,"timestamp":%q}`, ts(h.at.Add(time.Minute)), ts(h.at)))))
	if last.Status != protocol.StatusOK {
		t.Fatalf("the approval: %d %s", last.Status, last.Reason)
	}
	refused := signed(t, h.alice, frame(alice, bob, protocol.TypeCreditTransfer,
		fmt.Sprintf(`{"amount":1000,"currency":"AGLX","transaction_id":"tx-big","timestamp":%q}`, ts(h.at))))
	h.send(refused)
	if last.Status != protocol.StatusPaymentRequired {
		t.Fatalf("the transfer: %d %s, want 402", last.Status, last.Reason)
	}
	h.at = h.at.Add(2 * time.Minute) // past the approval's expiry
	h.send(withID(refused, "copy-1"))
	if last.Status != protocol.StatusConflict {
		t.Fatalf("the copy: %d %s, want 409", last.Status, last.Reason)
	}
	copySeq := h.events[len(h.events)-1].Seq
	if live := h.c.L.Holds(alice); len(live) != 0 {
		t.Fatalf("after a credit event at %s, alice still has a live hold expiring %s (available %s)", h.at, live[0].Expires, h.available(alice))
	}
	v, _ := h.c.L.Account(alice)
	if v.Pending.String() != "0" || v.Seq != copySeq {
		t.Fatalf("alice: pending %s, seq %d; want 0 and the copy's seq %d", v.Pending.String(), v.Seq, copySeq)
	}
}
