package projections

import (
	"encoding/json"
	"testing"

	"github.com/aglx/ledger/protocol"
	"pgregory.net/rapid"
)

// specialIDs are the characters json.Marshal escapes, each alone and
// among plain text.
var specialIDs = []string{"a&b", "a<b", "a>b", `"q"`, `back\slash`, "nul\x00", "tab\t", "del\x7f", "ls\u2028ps\u2029", "é", "bad\xffutf8", ""}

// TestCreditAckMatchesJSONMarshal: the hand-written transfer ack is, byte
// for byte, what encoding/json writes for the same struct, whatever the
// transaction id holds (quotes, controls, HTML characters, invalid UTF-8)
// and whatever the amounts.
func TestCreditAckMatchesJSONMarshal(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		amount := func(label string) protocol.Amount {
			text := rapid.StringMatching(`-?[0-9]{1,20}(\.[0-9]{1,12})?`).Draw(rt, label)
			a, err := protocol.ParseAmount(text)
			if err != nil {
				rt.Skipf("%q: %v", text, err)
			}
			return *a
		}
		id := rapid.OneOf(rapid.StringMatching(`[A-Za-z0-9._:-]{1,40}`), rapid.String(),
			rapid.StringMatching("[a-z<>&\"\\\\\x00-\x1f\x7f\u2028\u2029é]{0,12}"),
			rapid.Map(rapid.SliceOf(rapid.Byte()), func(b []byte) string { return string(b) })).Draw(rt, "id")
		if rapid.Bool().Draw(rt, "special") {
			id = rapid.SampledFrom(specialIDs).Draw(rt, "special id")
		}
		a := creditAck{TransactionID: id, Balance: amount("balance"), Available: amount("available"), Replayed: rapid.Bool().Draw(rt, "replayed")}
		want, err := json.Marshal(a)
		if err != nil {
			rt.Fatal(err)
		}
		if got := a.appendJSON(nil); string(got) != string(want) {
			rt.Fatalf("appendJSON wrote %s, json.Marshal %s", got, want)
		}
	})
}
