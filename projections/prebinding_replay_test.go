package projections

import (
	"fmt"
	"testing"
	"time"

	"github.com/aglx/ledger/protocol"
)

// TestSignedBeforeBindingReplayIsRefused: an agent that signs its messages
// with its key before binding it (a signed registry.update sent just
// before, or racing, its auth.request) has them judged AuthUnsigned: the
// signature is not checked, and signedOutOfOrder records no clock. After
// the binding the same bytes verify, so a copy of the first update (read
// from the event stream, or taken off plain TCP), sent again within its
// window, was applied as fresh: it put back the address the agent had
// since moved from, and the relay delivered there (review, helper-131).
func TestSignedBeforeBindingReplayIsRefused(t *testing.T) {
	const bob = "agent://bob.local"
	at := func(d time.Duration) time.Time { return regT0.Add(d) }
	h := newHarness(t)
	k := newEd25519(t)
	first := signed(t, k, frame(bob, testNode, protocol.TypeRegistryUpdate,
		fmt.Sprintf(`{"agent_name":"Bob","address":"10.0.0.1","port":7000,"timestamp":%q}`, ts(at(0)))))
	raw := string(first.Body)
	h.mustReply(first, at(0), protocol.TypeRegistryAck, protocol.StatusOK)
	h.mustReply(signed(t, k, frame(bob, testNode, protocol.TypeRegistryUpdate,
		fmt.Sprintf(`{"agent_name":"Bob","address":"10.0.0.2","port":7000,"timestamp":%q}`, ts(at(10*time.Second))))),
		at(10*time.Second), protocol.TypeRegistryAck, protocol.StatusOK)
	h.bindKey(bob, k, at(20*time.Second))

	_, rep, _ := h.apply(frame(bob, testNode, protocol.TypeRegistryUpdate, raw), at(30*time.Second))
	if c, _ := h.r.Contact(bob, at(31*time.Second)); c != "10.0.0.2:7000" {
		t.Fatalf("a copy of an update signed before the key was bound, sent again after the binding, was answered %s %d and moved the contact back to %s",
			rep.Type, rep.Status, c)
	}
	if rep.Status != protocol.StatusUnauthorized {
		t.Errorf("the copy was answered %s %d %s, want 401", rep.Type, rep.Status, rep.Body)
	}
	// The agent's own updates after the binding still pass, stamped in
	// the binding's second too.
	h.mustReply(signed(t, k, frame(bob, testNode, protocol.TypeRegistryUpdate,
		fmt.Sprintf(`{"agent_name":"Bob","address":"10.0.0.3","port":7000,"timestamp":%q}`, ts(at(20*time.Second))))),
		at(32*time.Second), protocol.TypeRegistryAck, protocol.StatusOK)
	if !equalSnapshots(h.r, h.replay()) {
		t.Error("a replay of the log folds another registry")
	}
}

func equalSnapshots(a, b *Registry) bool {
	x, err1 := a.Snapshot()
	y, err2 := b.Snapshot()
	return err1 == nil && err2 == nil && string(x) == string(y)
}

// TestSignedRewardBeforeBindingTakesEffectOnce: the ledger names a signed
// credit.reward by what its signature covers only when its verdict is
// AuthValid. One an agent signed before binding its key was AuthUnsigned,
// named by its ID header; once the key is bound the same bytes verify, so
// the payee, to whom the relay delivered the reward, sent it again under
// a new ID within the window and was paid twice (review, helper-131).
func TestSignedRewardBeforeBindingTakesEffectOnce(t *testing.T) {
	const alice, bob, dave = "agent://alice.local", "agent://bob.local", "agent://dave.local"
	h := newCreditsHarness(t, alice, bob)
	h.send(signed(t, nodeKey, frame(testNode, dave, protocol.TypeCreditTransfer,
		fmt.Sprintf(`{"amount":50,"currency":"AGLX","transaction_id":"m-dave","timestamp":%q}`, ts(h.at)))))
	k := newEd25519(t)
	reward := signed(t, k, frame(dave, bob, protocol.TypeCreditReward,
		fmt.Sprintf(`{"amount":10,"reason":"thanks","timestamp":%q}`, ts(h.at.Add(time.Second)))))
	h.send(withID(reward, "rw-1"))
	h.at = h.at.Add(time.Second)
	h.bindKey(dave, k, h.at)
	h.send(withID(reward, "rw-2"))
	if got := h.balance(bob); got != "20" {
		t.Errorf("bob's balance = %s after dave's one signed reward of 10 and its copy sent after dave bound its key, want 20", got)
	}
}
