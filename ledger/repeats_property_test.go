package ledger

import (
	"fmt"
	"testing"

	"github.com/aglx/ledger/protocol"
	"pgregory.net/rapid"
)

// TestRepeatsChangesNothing: where Repeats(e) is true, Apply(e) leaves the
// ledger exactly as an event with no effect would (an ack at the same seq,
// time and id, which still lets holds expire): snapshot-identical,
// requests, mismatches and taken names included. The memory of refused
// signed messages lets a sealed sender's message through to Apply on
// Repeats' word, so a Repeats that said true where Apply books, holds,
// opens or answers a request would let a refused message take effect. The
// events are the ledger property's, plus signed requests and denials, and
// rewards, offers and adjustments named by their signature, from pools
// small enough that names collide (helper-113).
func TestRepeatsChangesNothing(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := newHarness(t)
		twin := New(node)
		for range rapid.IntRange(50, 400).Draw(t, "events") {
			var e Event
			switch rapid.IntRange(0, 5).Draw(t, "kind") {
			case 0:
				from, to := rapid.SampledFrom(propAgents).Draw(t, "from"), rapid.SampledFrom(propAgents).Draw(t, "to")
				amount := rapid.SampledFrom([]string{"1", "5", "5.0"}).Draw(t, "requested")
				name := drawID(t, "sn", 6, "signed name")
				auth := rapid.SampledFrom(propAuths).Draw(t, "auth")
				if rapid.Bool().Draw(t, "deny") {
					e = Event{From: from, To: to, Auth: auth, SignedName: name, Payload: &protocol.CreditDeny{RequestedAmount: amt(amount)}}
				} else {
					e = Event{From: from, To: to, Auth: auth, SignedName: name, Payload: &protocol.CreditRequest{RequestedAmount: amt(amount)}}
				}
			case 1:
				e = drawEvent(t, h)
				switch e.Payload.(type) {
				case *protocol.CreditReward, *protocol.TaskAssign, *protocol.CreditAdjust:
					e.SignedName = drawID(t, "sn", 6, "signed name")
				}
			default:
				e = drawEvent(t, h)
			}
			repeats := h.l.Repeats(e)
			o := h.apply(e)
			e = h.log[len(h.log)-1]
			if !repeats {
				twin.Apply(e)
				continue
			}
			twin.Apply(Event{Seq: e.Seq, EventID: e.EventID, Time: e.Time, From: alice, To: bob, Auth: AuthValid, Payload: &protocol.Ack{}})
			a, _ := h.l.Snapshot()
			b, _ := twin.Snapshot()
			if string(a) != string(b) {
				sameSnapshot(t, fmt.Sprintf("Repeats said taken, Apply(%s) = %d %s", describe(e), o.Status, o.Reason), a, b)
			}
			if fmt.Sprint(h.l.Requests(0, 1000)) != fmt.Sprint(twin.Requests(0, 1000)) || len(h.l.mismatches) != len(twin.mismatches) || h.l.signed.len() != twin.signed.len() {
				t.Fatalf("Repeats said taken, yet Apply(%s) changed requests, mismatches or taken names", describe(e))
			}
		}
	})
}
