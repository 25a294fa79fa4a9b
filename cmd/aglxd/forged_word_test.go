package main

import (
	"fmt"
	"testing"

	"github.com/aglx/ledger/protocol"
)

// TestUnsignedRequestsInAKeyedName: over TLS on a real node, once alice
// has bound a key, a credit.request, credit.deny or credit.received in her
// name without her signature is answered 401, and a hundred of them do not
// lock out her own request. Until 2026-12-01 each was answered 202 and
// relayed, and her own signed request then got 429 (helper-60).
func TestUnsignedRequestsInAKeyedName(t *testing.T) {
	m := startNode(t, t.TempDir())
	s := lfNewSession(t, m)
	alice := lfNewParty(t, "agent://alice.local", protocol.KeyEd25519)
	s.bind(t, alice)
	for i := range 100 {
		lfExpect(t, s.send(t, lfFrame(alice.uri, "agent://bob.local", protocol.TypeCreditRequest,
			fmt.Sprintf(`{"requested_amount":1,"purpose":"forged %d","timestamp":%q}`, i, lfNow()))), "error", 401)
	}
	for _, f := range []*protocol.Frame{
		lfFrame(alice.uri, "agent://bob.local", protocol.TypeCreditDeny, fmt.Sprintf(`{"requested_amount":1,"reason":"forged","timestamp":%q}`, lfNow())),
		lfFrame(alice.uri, m.cfg.Name, protocol.TypeCreditReceived, fmt.Sprintf(`{"transaction_id":"tx-1","amount":"1","timestamp":%q}`, lfNow())),
	} {
		lfExpect(t, s.send(t, f), "error", 401)
	}
	lfExpect(t, s.send(t, alice.signed(t, "agent://bob.local", protocol.TypeCreditRequest,
		fmt.Sprintf(`{"requested_amount":5,"purpose":"real","timestamp":%q}`, lfNow()))), "ack", 202)
}
