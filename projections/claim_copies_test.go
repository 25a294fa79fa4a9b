package projections

import (
	"fmt"
	"testing"
	"time"

	"github.com/aglx/ledger/protocol"
)

// TestSignedClaimCopyRecordsNothing: a keyed agent's claims must be signed
// (helper-60: unsigned ones in its name recorded false claims against
// it), and a copy of its own signed, true claim, sent again within the
// window after its balance moved, records nothing: it was recorded as a
// new claim, now false, against it (helper-97).
func TestSignedClaimCopyRecordsNothing(t *testing.T) {
	const alice, bob = "agent://alice.local", "agent://bob.local"
	for _, tc := range []struct{ name, typ, body string }{
		{"credit.balance", protocol.TypeCreditBalance, `{"balance":50,"timestamp":%q}`},
		{"credit.received", protocol.TypeCreditReceived, `{"transaction_id":"m-alice","amount":50,"balance":50,"timestamp":%q}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newCreditsHarness(t, alice, bob)
			claim := signed(t, h.alice, frame(alice, testNode, tc.typ, fmt.Sprintf(tc.body, ts(h.at.Add(time.Second)))))
			h.send(claim)
			if n := len(h.c.L.Mismatches(0, 100)); n != 0 {
				t.Fatalf("alice's true claim recorded %d mismatches", n)
			}
			// alice's balance moves: the node mints her 5 more.
			h.send(signed(t, nodeKey, frame(testNode, alice, protocol.TypeCreditTransfer,
				fmt.Sprintf(`{"amount":5,"currency":"AGLX","transaction_id":"m-alice-2","timestamp":%q}`, ts(h.at)))))
			// bob, who read the claim in the event stream, sends the same bytes again a minute later.
			h.at = h.at.Add(time.Minute)
			h.send(withID(claim, "bob-copy"))
			if ms := h.c.L.Mismatches(0, 100); len(ms) != 0 {
				t.Errorf("a copy of alice's signed claim was recorded as a new claim of hers: %+v", ms)
			}
		})
	}
}
