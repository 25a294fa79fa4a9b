package projections

import (
	"fmt"
	"testing"
	"time"

	"github.com/aglx/ledger/ledger"
	"github.com/aglx/ledger/protocol"
)

// TestUnsignedWordInAKeyedAgentsName: once alice has a key, a
// credit.request, credit.deny or claim in her name needs her signature.
// Until 2026-12-01 these TYPEs were outside the policy (helper-60):
// anyone could fill the pair's 100 open requests with unsigned ones and
// lock out alice's own, close a request made to her, or record a false
// claim against her. A balance query, which states nothing, needs none.
func TestUnsignedWordInAKeyedAgentsName(t *testing.T) {
	const alice, bob = "agent://alice.local", "agent://bob.local"
	tests := []struct {
		name string
		run  func(t *testing.T, h *creditsHarness, last *ledger.Outcome)
	}{
		{
			name: "unsigned requests in alice's name are refused and do not lock out her own",
			run: func(t *testing.T, h *creditsHarness, last *ledger.Outcome) {
				for i := range 100 {
					h.send(frame(alice, bob, protocol.TypeCreditRequest,
						fmt.Sprintf(`{"requested_amount":1,"purpose":"forged %d","timestamp":%q}`, i, ts(h.at))))
					if last.Status != protocol.StatusUnauthorized {
						t.Fatalf("unsigned credit.request %d in alice's name: %d %s; want 401", i, last.Status, last.Reason)
					}
				}
				h.send(signed(t, h.alice, frame(alice, bob, protocol.TypeCreditRequest,
					fmt.Sprintf(`{"requested_amount":5,"purpose":"real","timestamp":%q}`, ts(h.at.Add(time.Second))))))
				if last.Status != protocol.StatusOK {
					t.Errorf("alice's own signed credit.request: %d %s; want 200", last.Status, last.Reason)
				}
			},
		},
		{
			name: "an unsigned deny in alice's name leaves bob's request to her open",
			run: func(t *testing.T, h *creditsHarness, last *ledger.Outcome) {
				h.send(frame(bob, alice, protocol.TypeCreditRequest, fmt.Sprintf(`{"requested_amount":5,"purpose":"p","timestamp":%q}`, ts(h.at))))
				h.send(frame(alice, bob, protocol.TypeCreditDeny, fmt.Sprintf(`{"requested_amount":5,"reason":"forged","timestamp":%q}`, ts(h.at))))
				if last.Status != protocol.StatusUnauthorized {
					t.Errorf("unsigned credit.deny in alice's name: %d %s; want 401", last.Status, last.Reason)
				}
				if st := h.c.L.Requests(0, 10)[0].State; st != "open" {
					t.Errorf("bob's request to alice is %q after a deny nobody signed in alice's name; want open", st)
				}
				h.send(signed(t, h.alice, frame(alice, bob, protocol.TypeCreditDeny, fmt.Sprintf(`{"requested_amount":5,"reason":"real","timestamp":%q}`, ts(h.at)))))
				if st := h.c.L.Requests(0, 10)[0].State; last.Status != protocol.StatusOK || st != "denied" {
					t.Errorf("alice's own signed credit.deny: %d %s, request %q; want 200 and denied", last.Status, last.Reason, st)
				}
			},
		},
		{
			name: "unsigned claims in alice's name are refused and recorded against no one",
			run: func(t *testing.T, h *creditsHarness, last *ledger.Outcome) {
				for _, f := range []*protocol.Frame{
					frame(alice, testNode, protocol.TypeCreditBalance, fmt.Sprintf(`{"balance":"1000000","updated":%q}`, ts(h.at))),
					frame(alice, testNode, protocol.TypeCreditReceived, fmt.Sprintf(`{"transaction_id":"m-bob","amount":"10","timestamp":%q}`, ts(h.at))),
				} {
					h.send(f)
					if n := len(h.c.L.Mismatches(0, 10)); n != 0 || last.Status != protocol.StatusUnauthorized {
						t.Errorf("unsigned %s in alice's name: status %d, %d mismatches on record; want 401 and none", f.Type(), last.Status, n)
					}
				}
				// A signed message carries a timestamp, here beside the
				// TYPE's own members (docs/REGISTRY.md).
				h.send(signed(t, h.alice, frame(alice, testNode, protocol.TypeCreditBalance, fmt.Sprintf(`{"balance":"1000000","updated":%q,"timestamp":%q}`, ts(h.at), ts(h.at)))))
				if n := len(h.c.L.Mismatches(0, 10)); n != 1 || last.Status != protocol.StatusOK {
					t.Errorf("alice's own signed claim: status %d %s, %d mismatches on record; want 200 and one", last.Status, last.Reason, n)
				}
			},
		},
		{
			name: "an unsigned balance query in alice's name is answered",
			run: func(t *testing.T, h *creditsHarness, last *ledger.Outcome) {
				h.send(frame(alice, testNode, protocol.TypeCreditBalance, `{}`))
				if last.Status != protocol.StatusOK || last.View == nil || last.View.Balance.String() != "50" {
					t.Errorf("balance query: %d %s %+v; want 200 with alice's 50", last.Status, last.Reason, last.View)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newCreditsHarness(t, alice, bob)
			var last ledger.Outcome
			h.c.Observe = func(e *Event, out ledger.Outcome) { last = out }
			tt.run(t, h, &last)
		})
	}
}
