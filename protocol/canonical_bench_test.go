package protocol

import "testing"

// BenchmarkSigningInput builds the signing input of a signed
// credit.transfer as agents send it (members out of order, white space):
// the part of every signature check that is not the curve arithmetic.
func BenchmarkSigningInput(b *testing.B) {
	body := []byte(`{"amount": 1, "currency": "AGLX", "timestamp": "2026-11-30T12:00:00Z", "transaction_id": "tx-00000042", "memo": "weekly settlement for task 7f3a", "signature": "ed25519:` +
		"0f3c9a0f3c9a0f3c9a0f3c9a0f3c9a0f3c9a0f3c9a0f3c9a0f3c9a0f3c9a0f3c9a0f3c9a0f3c9a0f3c9a0f3c9a0f3c9a0f3c9a0f3c9a0f3c9a0f3c9a0f3c9a" + `"}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := SigningInput("agent://a01.bench", "agent://a02.bench", TypeCreditTransfer, "", body); err != nil {
			b.Fatal(err)
		}
	}
}
