package projections

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aglx/ledger/ledger"
	"github.com/aglx/ledger/protocol"
)

// TestRefusedSignedMessageStaysRefused: a signed transfer, approval,
// reward or offer with CREDITS that the ledger refused for want of funds
// is in the log, which anyone who may read the stream can read. Until
// 2026-12-02 anyone could send it again, unchanged, once the sender had
// the funds, and have it booked: money moved, or held, that its sender
// had been told was refused (helper-108). A copy is refused now (409),
// under any ID; the sender's own new message, signed again with another
// timestamp, is taken.
func TestRefusedSignedMessageStaysRefused(t *testing.T) {
	const alice, bob, carol = "agent://alice.local", "agent://bob.local", "agent://carol.local"
	tests := []struct {
		name string
		make func(h *creditsHarness, at time.Time) *protocol.Frame
		// After the copy and the new message: alice's balance and what
		// she has available (the mint of 100 came between).
		balance, available string
	}{
		{"a transfer", func(h *creditsHarness, at time.Time) *protocol.Frame {
			return signed(t, h.alice, frame(alice, bob, protocol.TypeCreditTransfer,
				fmt.Sprintf(`{"amount":60,"currency":"AGLX","reason":"only if I can","transaction_id":"tx-r","timestamp":%q}`, ts(at))))
		}, "90", "90"},
		{"an approval", func(h *creditsHarness, at time.Time) *protocol.Frame {
			return signed(t, h.alice, frame(alice, bob, protocol.TypeCreditApprove,
				fmt.Sprintf(`{"approved_amount":60,"transaction_id":"appr-r","timestamp":%q}`, ts(at))))
		}, "150", "90"},
		{"a reward", func(h *creditsHarness, at time.Time) *protocol.Frame {
			return signed(t, h.alice, frame(alice, bob, protocol.TypeCreditReward,
				fmt.Sprintf(`{"amount":60,"reason":"thanks","timestamp":%q}`, ts(at))))
		}, "90", "90"},
		{"an offer with CREDITS", func(h *creditsHarness, at time.Time) *protocol.Frame {
			f := frame(alice, carol, protocol.TypeTaskAssign, fmt.Sprintf(`{"task":"analyze","timestamp":%q}`, ts(at)))
			f.Headers = append(f.Headers, protocol.Header{Name: protocol.HeaderCredits, Value: "60"})
			return signed(t, h.alice, f)
		}, "150", "90"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, last := observedHarness(t, alice, bob) // alice has 50
			first := tc.make(h, h.at)
			h.send(first)
			if last.Status != protocol.StatusPaymentRequired {
				t.Fatalf("the first: %d %s, want 402", last.Status, last.Reason)
			}
			h.send(signed(t, nodeKey, frame(testNode, alice, protocol.TypeCreditTransfer,
				fmt.Sprintf(`{"amount":100,"currency":"AGLX","transaction_id":"m-more","timestamp":%q}`, ts(h.at)))))
			for _, id := range []string{"", "copy-1", "copy-2"} {
				h.send(withID(first, id))
				if last.Status != protocol.StatusConflict || !strings.Contains(last.Reason, "a copy of a signed message the node refused") {
					t.Fatalf("a copy under ID %q: %d %s, want 409", id, last.Status, last.Reason)
				}
			}
			if b, a := h.balance(alice), h.available(alice); b != "150" || a != "150" {
				t.Fatalf("after the copies alice has %s, %s available; want 150, 150: a copy took effect", b, a)
			}
			h.send(tc.make(h, h.at.Add(time.Second))) // signed again
			if last.Status >= 400 {
				t.Fatalf("the message signed again: %d %s", last.Status, last.Reason)
			}
			if b, a := h.balance(alice), h.available(alice); b != tc.balance || a != tc.available {
				t.Fatalf("alice has %s, %s available; want %s, %s", b, a, tc.balance, tc.available)
			}
			live, err := h.c.L.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			if again := h.refold(); !bytes.Equal(live, again) {
				t.Fatalf("the rebuilt ledger differs:\n got %s\nwant %s", again, live)
			}
		})
	}
}

// TestRefusedCopiesAreBounded: the memory of refusals holds at most
// RefusedCopiesPerSenderMax of one sender's; a refusal past that seals
// the sender up to its timestamp instead, so that its copy is refused
// (429) all the same, and a message stamped later is judged as usual. The
// memory forgets what no copy could pass the signature window with.
func TestRefusedCopiesAreBounded(t *testing.T) {
	const alice, bob = "agent://alice.local", "agent://bob.local"
	h, last := observedHarness(t, alice, bob) // alice has 50
	at := h.at
	transfer := func(i int, at time.Time) *protocol.Frame {
		return signed(t, h.alice, frame(alice, bob, protocol.TypeCreditTransfer,
			fmt.Sprintf(`{"amount":1000,"currency":"AGLX","transaction_id":"tx-%d","timestamp":%q}`, i, ts(at))))
	}
	sendAt := func(f *protocol.Frame, when time.Time) {
		h.at = when.Add(-time.Second) // send adds one
		h.send(f)
	}
	var frames []*protocol.Frame
	refuse := func(i int) {
		t.Helper()
		f := transfer(i, at)
		frames = append(frames, f)
		sendAt(f, at) // all in one second
		if last.Status != protocol.StatusPaymentRequired {
			t.Fatalf("transfer %d: %d %s", i, last.Status, last.Reason)
		}
	}
	for i := range RefusedCopiesPerSenderMax {
		refuse(i)
	}
	if n := len(h.c.refused.byName); n != RefusedCopiesPerSenderMax {
		t.Fatalf("%d refusals remembered, want %d", n, RefusedCopiesPerSenderMax)
	}
	sendAt(withID(frames[0], "c-0"), at)
	if last.Status != protocol.StatusConflict {
		t.Fatalf("a copy of a remembered refusal: %d %s, want 409", last.Status, last.Reason)
	}
	refuse(RefusedCopiesPerSenderMax) // one more than the sender's share
	if n, s := len(h.c.refused.byName), len(h.c.refused.seals); n != RefusedCopiesPerSenderMax || s != 1 {
		t.Fatalf("%d refusals remembered and %d seals, want %d and 1", n, s, RefusedCopiesPerSenderMax)
	}
	cases := []struct {
		name   string
		f      *protocol.Frame
		status protocol.Status
	}{
		{"a copy of the refusal past the memory", withID(frames[RefusedCopiesPerSenderMax], "c-last"), protocol.StatusTooManyRequests},
		{"another message stamped at the seal", transfer(5000, at), protocol.StatusTooManyRequests},
		{"a message stamped later", transfer(5001, at.Add(time.Second)), protocol.StatusPaymentRequired},
	}
	for _, tc := range cases {
		sendAt(tc.f, at.Add(2*time.Second))
		if last.Status != tc.status {
			t.Fatalf("%s: %d %s, want %d", tc.name, last.Status, last.Reason, tc.status)
		}
	}
	// Past twice the window (and the skew), the refusals are forgotten
	// one by one into alice's seal: only the last is remembered, and the
	// seal stands at the latest stamp of those forgotten.
	later := at.Add(2*SignatureWindowDefault + refusedSkew + time.Minute)
	sendAt(transfer(6000, later), later)
	if n, s := len(h.c.refused.byName), h.c.refused.seals[alice]; n != 1 || !s.Equal(at.Add(time.Second)) {
		t.Fatalf("after the window: %d refusals kept and a seal at %s; want the last refusal only, and a seal at %s", n, s, at.Add(time.Second))
	}
}

// TestRefusedCopiesSurviveAClockThatStepsBack: the memory forgets by the
// fold's clock, the latest receive time, while the signature window is
// judged by each message's own. A receive clock that ran ahead for one
// event and was set back (an NTP step, a resumed VM) made the memory
// forget a refusal whose copy could still pass the window, and the copy
// was booked (helper-111). A forgotten refusal goes into its sender's
// seal, which refuses the copy all the same.
func TestRefusedCopiesSurviveAClockThatStepsBack(t *testing.T) {
	const alice, bob = "agent://alice.local", "agent://bob.local"
	h, last := observedHarness(t, alice, bob) // alice has 50
	r0 := h.at.Add(time.Second)
	first := signed(t, h.alice, frame(alice, bob, protocol.TypeCreditTransfer,
		fmt.Sprintf(`{"amount":60,"currency":"AGLX","transaction_id":"tx-r","timestamp":%q}`, ts(r0))))
	h.send(first) // received at r0
	if last.Status != protocol.StatusPaymentRequired {
		t.Fatalf("the first: %d %s", last.Status, last.Reason)
	}
	// The clock runs twelve minutes ahead for one event, the node's mint...
	h.at = r0.Add(12*time.Minute - time.Second)
	h.send(signed(t, nodeKey, frame(testNode, alice, protocol.TypeCreditTransfer,
		fmt.Sprintf(`{"amount":100,"currency":"AGLX","transaction_id":"m-more","timestamp":%q}`, ts(h.at.Add(time.Second))))))
	// ... and is set back: the copy arrives three minutes after the first.
	h.at = r0.Add(3*time.Minute - time.Second)
	h.send(withID(first, "copy"))
	if last.Status != protocol.StatusConflict && last.Status != protocol.StatusTooManyRequests {
		t.Fatalf("a copy of the refused transfer, in its window after the clock stepped back: %d %s", last.Status, last.Reason)
	}
	if b := h.balance(alice); b != "150" {
		t.Fatalf("alice has %s, want 150: the copy was booked", b)
	}
}

// TestAFullMemoryForgetsTheOldest: with the memory full of other agents'
// refusals (a hundred keys could keep it so), a bystander's one refusal
// sealed the bystander, and its next, different message in the same
// second was refused (helper-111). The oldest refusal is forgotten into
// its own sender's seal instead, and the bystander's next message is
// judged as any.
func TestAFullMemoryForgetsTheOldest(t *testing.T) {
	const alice, bob = "agent://alice.local", "agent://bob.local"
	h, last := observedHarness(t, alice, bob) // alice has 50
	m := h.c.refused
	old := h.at.Add(-time.Minute)
	for i := range RefusedCopiesMax { // a hundred senders' thousand each
		from := fmt.Sprintf("agent://mallory-%d.local", i/RefusedCopiesPerSenderMax)
		name := fmt.Sprintf("n%d", i)
		m.byName[name] = refusedCopy{from: from, stamp: old, expires: h.at.Add(time.Hour)}
		m.perSender[from]++
		m.order = append(m.order, name)
	}
	t1 := h.at.Add(time.Second)
	h.send(signed(t, h.alice, frame(alice, bob, protocol.TypeCreditTransfer,
		fmt.Sprintf(`{"amount":60,"currency":"AGLX","transaction_id":"tx-a","timestamp":%q}`, ts(t1)))))
	if last.Status != protocol.StatusPaymentRequired {
		t.Fatalf("the first: %d %s", last.Status, last.Reason)
	}
	if _, sealed := m.seals[alice]; sealed || len(m.byName) != RefusedCopiesMax || !m.seals["agent://mallory-0.local"].Equal(old) {
		t.Fatalf("alice sealed %v, %d remembered, mallory-0 sealed at %s; want alice remembered, the oldest forgotten into its sender's seal", sealed, len(m.byName), m.seals["agent://mallory-0.local"])
	}
	h.send(signed(t, h.alice, frame(alice, bob, protocol.TypeCreditTransfer,
		fmt.Sprintf(`{"amount":5,"currency":"AGLX","transaction_id":"tx-b","timestamp":%q}`, ts(t1)))))
	if last.Status != protocol.StatusOK {
		t.Fatalf("alice's next, different transfer in the same second (she has 50): %d %s", last.Status, last.Reason)
	}
}

// TestASealLeavesTaskEndsAlone: a seal refuses only what moves or holds
// credit. A sealed sender's task.cancel, never refused by the ledger and
// so never a copy of a refusal, was refused 429 and the hold it ends
// stayed (helper-111).
func TestASealLeavesTaskEndsAlone(t *testing.T) {
	const alice, bob, carol = "agent://alice.local", "agent://bob.local", "agent://carol.local"
	h, last := observedHarness(t, alice, bob) // alice has 50
	t0 := h.at
	offer := frame(alice, carol, protocol.TypeTaskAssign, fmt.Sprintf(`{"task":"analyze","task_id":"t1","timestamp":%q}`, ts(t0)))
	offer.Headers = append(offer.Headers, protocol.Header{Name: protocol.HeaderCredits, Value: "10"})
	h.send(signed(t, h.alice, offer))
	if h.available(alice) != "40" {
		t.Fatalf("the offer: %d %s, available %s", last.Status, last.Reason, h.available(alice))
	}
	t1 := t0.Add(10 * time.Second)
	for i := range RefusedCopiesPerSenderMax + 1 { // the last seals alice at t1
		h.at = t1.Add(-time.Second)
		h.send(signed(t, h.alice, frame(alice, bob, protocol.TypeCreditTransfer,
			fmt.Sprintf(`{"amount":1000,"currency":"AGLX","transaction_id":"tx-%d","timestamp":%q}`, i, ts(t1)))))
	}
	if _, sealed := h.c.refused.seals[alice]; !sealed {
		t.Fatal("alice is not sealed")
	}
	h.at = t1
	h.send(signed(t, h.alice, frame(alice, carol, protocol.TypeTaskCancel, fmt.Sprintf(`{"task_id":"t1","timestamp":%q}`, ts(t1)))))
	if e := h.events[len(h.events)-1]; h.c.RefusedEvent(e) || h.available(alice) != "50" {
		t.Fatalf("alice's task.cancel while sealed: refused %v (%d %s), available %s; want it taken and the hold ended", h.c.RefusedEvent(e), last.Status, last.Reason, h.available(alice))
	}
}

// TestRefusedWhenStampedAheadStaysRefused: a transfer whose signature
// held but whose timestamp lay ahead of its arrival by more than the
// window was refused as stale (401), and was not remembered: a copy sent
// once its timestamp was inside the window was booked, with no clock
// step at all (helper-112).
func TestRefusedWhenStampedAheadStaysRefused(t *testing.T) {
	const alice, bob = "agent://alice.local", "agent://bob.local"
	h, last := observedHarness(t, alice, bob) // alice has 50
	r0 := h.at.Add(time.Second)
	first := signed(t, h.alice, frame(alice, bob, protocol.TypeCreditTransfer,
		fmt.Sprintf(`{"amount":40,"currency":"AGLX","transaction_id":"tx-s","timestamp":%q}`, ts(r0.Add(6*time.Minute)))))
	h.send(first) // received at r0, stamped six minutes ahead
	if last.Status != protocol.StatusUnauthorized {
		t.Fatalf("the first: %d %s, want 401 (stale)", last.Status, last.Reason)
	}
	for _, after := range []time.Duration{2 * time.Minute, 10 * time.Minute} { // the stamp inside the window, then its end
		h.at = r0.Add(after - time.Second)
		h.send(withID(first, fmt.Sprint("copy-", after)))
		if last.Status < 400 || h.balance(alice) != "50" {
			t.Fatalf("a copy %s after the stale first: %d %s; alice has %s", after, last.Status, last.Reason, h.balance(alice))
		}
	}
}

// TestASealOutlivesItsWindowByADay: a seal is dropped a day after its
// timestamp plus the window, so that a copy of a refusal it holds is
// refused after the node's clock ran a day ahead and was set back by a
// day less two minutes; dropped at a day flat, the copy was booked
// (helper-112).
func TestASealOutlivesItsWindowByADay(t *testing.T) {
	const alice, bob = "agent://alice.local", "agent://bob.local"
	h, last := observedHarness(t, alice, bob) // alice has 50
	r0 := h.at.Add(time.Second)
	first := signed(t, h.alice, frame(alice, bob, protocol.TypeCreditTransfer,
		fmt.Sprintf(`{"amount":60,"currency":"AGLX","transaction_id":"tx-r","timestamp":%q}`, ts(r0))))
	h.send(first)
	if last.Status != protocol.StatusPaymentRequired {
		t.Fatalf("the first: %d %s", last.Status, last.Reason)
	}
	// A day and two minutes ahead, for a mint to alice (which forgets the
	// refusal into alice's seal and sweeps the seals)...
	h.at = r0.Add(refusedSealKeep + 2*time.Minute - time.Second)
	h.send(signed(t, nodeKey, frame(testNode, alice, protocol.TypeCreditTransfer,
		fmt.Sprintf(`{"amount":100,"currency":"AGLX","transaction_id":"m-more","timestamp":%q}`, ts(h.at.Add(time.Second))))))
	// ... then set back: the copy arrives four minutes after the first.
	h.at = r0.Add(4*time.Minute - time.Second)
	h.send(withID(first, "copy"))
	if last.Status < 400 || h.balance(alice) != "150" {
		t.Fatalf("a copy after the clock came back by a day less two minutes: %d %s; alice has %s", last.Status, last.Reason, h.balance(alice))
	}
}

// TestASealedSendersResendIsAnsweredAsBefore: someone with many keys can
// fill the memory fast enough that another sender's fresh refusal is
// forgotten into its seal. That sender's resend of a reward already taken
// (its reply lost), stamped before the seal, was refused 429, and signed
// again as the 429 said, it was taken twice (helper-112). A message the
// ledger would answer as already taken goes on to the ledger, which
// answers it again and changes nothing; a new one stamped before the seal
// is still refused.
func TestASealedSendersResendIsAnsweredAsBefore(t *testing.T) {
	const alice, bob = "agent://alice.local", "agent://bob.local"
	h, last := observedHarness(t, alice, bob) // alice has 50, bob 10
	t1 := h.at.Add(time.Second)
	rewardAt := func(reason string) *protocol.Frame {
		return signed(t, h.alice, frame(alice, bob, protocol.TypeCreditReward,
			fmt.Sprintf(`{"amount":5,"reason":%q,"timestamp":%q}`, reason, ts(t1))))
	}
	first := rewardAt("thanks")
	h.send(first) // taken; say its reply was lost
	if last.Status != protocol.StatusOK || h.balance(bob) != "15" {
		t.Fatalf("the reward: %d %s, bob has %s", last.Status, last.Reason, h.balance(bob))
	}
	h.send(signed(t, h.alice, frame(alice, bob, protocol.TypeCreditTransfer,
		fmt.Sprintf(`{"amount":1000,"currency":"AGLX","transaction_id":"tx-big","timestamp":%q}`, ts(h.at.Add(time.Second))))))
	if last.Status != protocol.StatusPaymentRequired {
		t.Fatalf("the transfer: %d %s", last.Status, last.Reason)
	}
	h.c.refused.forgetOldest() // as a flood of others' refusals would
	if _, sealed := h.c.refused.seals[alice]; !sealed {
		t.Fatal("alice is not sealed")
	}
	h.send(withID(first, "resend"))
	if last.Status != protocol.StatusOK || !last.Replayed || h.balance(bob) != "15" {
		t.Fatalf("the resend of the taken reward: %d %s (replayed %v); bob has %s, want 15", last.Status, last.Reason, last.Replayed, h.balance(bob))
	}
	h.send(rewardAt("another"))
	if last.Status != protocol.StatusTooManyRequests || h.balance(bob) != "15" {
		t.Fatalf("a new reward stamped before the seal: %d %s; bob has %s", last.Status, last.Reason, h.balance(bob))
	}
}

// observedHarness is newCreditsHarness with the ledger's outcome of the
// latest event kept in *last.
func observedHarness(t *testing.T, alice, bob string) (h *creditsHarness, last *ledger.Outcome) {
	h, last = newCreditsHarness(t, alice, bob), new(ledger.Outcome)
	h.c.Observe = func(_ *Event, out ledger.Outcome) { *last = out }
	return h, last
}
