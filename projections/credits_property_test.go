package projections

import (
	"bytes"
	"crypto"
	"fmt"
	"testing"
	"time"

	"github.com/aglx/ledger/ledger"
	"github.com/aglx/ledger/protocol"
	"pgregory.net/rapid"
)

// TestSignedFoldsProperties folds the registry and the ledger over real
// Ed25519-signed frames (transfers, rewards, node rewards, offers with
// CREDITS, requests and denials), key rotations (some signed with the
// wrong key, so refused), copies of earlier frames under new IDs,
// timestamps in and out of the signature window, and a receive clock that
// steps back (helper-57) and now and then jumps ten minutes or more.
// After every event the ledger's own check holds;
// a signed reward posts once for its signed content, and a signed request
// or denial takes effect once; a signed message the ledger refused is
// refused again whenever a copy comes (helper-108); and a rebuild from the
// log gives the same ledger and registry, byte for byte.
func TestSignedFoldsProperties(t *testing.T) {
	const alice, bob, carol = "agent://alice.local", "agent://bob.local", "agent://carol.local"
	spare := []crypto.Signer{newEd25519(t), newEd25519(t), newEd25519(t)}
	rapid.Check(t, func(rt *rapid.T) {
		h := newCreditsHarness(t, alice, bob)
		keys := append([]crypto.Signer{h.alice}, spare...)
		keyName := "key-1" // the bound key's name for key.rotate: any, the first time
		posted, taken := map[string]int{}, map[string]int{}
		refused := map[string]uint64{} // by replayKey: the seq that refused it
		h.c.Observe = func(e *Event, out ledger.Outcome) {
			k := replayKey(e)
			// Answered as a repeat of what another message took (its
			// transaction_id booked since, say) is no effect of its own.
			if seq, ok := refused[k]; ok && out.Status < 400 && !out.Replayed {
				rt.Fatalf("seq %d: a copy (ID %q) of the signed %s refused at seq %d was taken (status %d): %s", e.Seq, e.Header(protocol.HeaderID), e.Type, seq, out.Status, e.Body)
			}
			if v := h.r.Authenticate(e); out.Status >= 400 && (v.Auth == AuthValid || v.Auth == AuthNode || v.Stale && stampedAhead(e)) {
				if _, ok := refused[k]; !ok {
					refused[k] = e.Seq
				}
			}
			switch {
			case e.Type == protocol.TypeCreditReward && out.Posted():
				if posted[k]++; posted[k] > 1 {
					rt.Fatalf("seq %d: a signed reward posted twice (ID %q): %s", e.Seq, e.Header(protocol.HeaderID), e.Body)
				}
			case (e.Type == protocol.TypeCreditRequest || e.Type == protocol.TypeCreditDeny) && out.Status == protocol.StatusOK && !out.Replayed &&
				h.r.Authenticate(e).Auth == AuthValid:
				if taken[k]++; taken[k] > 1 {
					rt.Fatalf("seq %d: a signed %s took effect twice (ID %q): %s", e.Seq, e.Type, e.Header(protocol.HeaderID), e.Body)
				}
			}
		}
		var sent []*protocol.Frame
		stamp := func() string {
			if rapid.Bool().Draw(rt, "stamp near the clock") { // mostly inside the window
				return ts(h.at.Add(time.Duration(rapid.IntRange(-240, 240).Draw(rt, "stamp offset")) * time.Second))
			}
			return ts(regT0.Add(time.Duration(rapid.IntRange(0, 40).Draw(rt, "stamp minute")) * time.Minute))
		}
		bound := h.alice // alice's key as the registry has it
		signer := func() crypto.Signer {
			if rapid.Bool().Draw(rt, "the bound key") { // most messages verify
				return bound
			}
			return keys[rapid.IntRange(0, len(keys)-1).Draw(rt, "key")]
		}
		amount := func() string { return rapid.SampledFrom([]string{"1", "2.5", "10", "40"}).Draw(rt, "amount") }
		for range rapid.IntRange(5, 60).Draw(rt, "events") {
			h.at = h.at.Add(time.Duration(rapid.IntRange(-120, 300).Draw(rt, "step seconds"))*time.Second - time.Second) // send adds one
			// Now and then a receive clock set ahead, or back (helper-111, helper-112).
			switch rapid.IntRange(0, 20).Draw(rt, "clock jump") {
			case 0:
				h.at = h.at.Add(12 * time.Minute)
			case 1:
				h.at = h.at.Add(-10 * time.Minute)
			}
			var f *protocol.Frame
			switch rapid.IntRange(0, 8).Draw(rt, "kind") {
			case 0:
				f = signed(t, signer(), frame(alice, bob, protocol.TypeCreditTransfer, fmt.Sprintf(
					`{"amount":%s,"currency":"AGLX","transaction_id":"tx-%d","timestamp":%q}`, amount(), rapid.IntRange(0, 5).Draw(rt, "tx"), stamp())))
			case 1:
				f = signed(t, signer(), frame(alice, bob, protocol.TypeCreditReward, fmt.Sprintf(
					`{"amount":%s,"reason":"thanks","timestamp":%q}`, amount(), stamp())))
			case 2:
				f = frame(alice, carol, protocol.TypeTaskAssign, fmt.Sprintf(`{"task":"analyze","timestamp":%q}`, stamp()))
				f.Headers = append(f.Headers, protocol.Header{Name: protocol.HeaderCredits, Value: amount()})
				f = signed(t, signer(), f)
			case 3:
				next := keys[rapid.IntRange(0, len(keys)-1).Draw(rt, "next key")]
				f = signed(t, signer(), frame(alice, testNode, protocol.TypeKeyRotate, fmt.Sprintf(
					`{"old_key_id":%q,"new_key_id":"n%d","public_key":%q,"timestamp":%q}`, keyName, h.seq+1, pubText(t, next), ts(h.at.Add(time.Second)))))
				sent = append(sent, f)
				h.send(f)
				if rep, ok, _ := h.out.Take(h.seq); ok && rep.Status == protocol.StatusOK {
					keyName, bound = fmt.Sprintf("n%d", h.seq), next
				}
				continue
			case 4:
				// To alice too, so that a transfer or an offer refused for
				// want of funds could be paid by a copy later.
				to := rapid.SampledFrom([]string{alice, bob}).Draw(rt, "rewarded")
				f = signed(t, nodeKey, frame(testNode, to, protocol.TypeCreditReward, fmt.Sprintf(
					`{"amount":%s,"reason":"bonus","timestamp":%q}`, amount(), stamp())))
			case 5:
				f = signed(t, signer(), frame(alice, bob, protocol.TypeCreditRequest, fmt.Sprintf(
					`{"requested_amount":%s,"purpose":"p","timestamp":%q}`, amount(), stamp())))
			case 6:
				f = signed(t, signer(), frame(alice, bob, protocol.TypeCreditDeny, fmt.Sprintf(
					`{"requested_amount":%s,"reason":"no","timestamp":%q}`, amount(), stamp())))
			default:
				if len(sent) == 0 {
					continue
				}
				f = withID(sent[rapid.IntRange(0, len(sent)-1).Draw(rt, "copy")], fmt.Sprintf("c-%d", rapid.IntRange(0, 9).Draw(rt, "id")))
			}
			sent = append(sent, f)
			h.send(f)
			if err := h.c.L.Check(); err != nil {
				rt.Fatalf("after %s: %v", f.Type(), err)
			}
		}
		live, err := h.c.L.Snapshot()
		if err != nil {
			rt.Fatal(err)
		}
		if again := h.refold(); !bytes.Equal(live, again) {
			rt.Fatalf("the rebuilt ledger differs:\n got %s\nwant %s", again, live)
		}
		registry, err := h.replay().Snapshot()
		if err != nil {
			rt.Fatal(err)
		}
		if !bytes.Equal(registry, h.snapshot()) {
			rt.Fatalf("the rebuilt registry differs:\n got %s\nwant %s", registry, h.snapshot())
		}
	})
}
