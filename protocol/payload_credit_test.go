package protocol

import (
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/apd/v3"
)

// TestValidateBuiltPayloads covers payloads the node builds in Go rather
// than decodes: Validate must catch what decoding would have refused.
func TestValidateBuiltPayloads(t *testing.T) {
	when := Timestamp{Time: time.Date(2025, 10, 29, 19, 2, 40, 0, time.UTC)}
	transfer := func(edit func(p *CreditTransfer)) Payload {
		p := &CreditTransfer{Amount: mustAmount(t, "3"), Currency: Currency, Timestamp: when, TransactionID: "tx-1"}
		edit(p)
		return p
	}
	huge := Amount(*apd.New(1, 40))
	tests := []struct {
		name string
		p    Payload
		want string // "" for valid
	}{
		{"valid transfer", transfer(func(*CreditTransfer) {}), ""},
		{"amount out of bounds", transfer(func(p *CreditTransfer) { p.Amount = &huge }), `field "amount" is out of range`},
		{"amount NaN", transfer(func(p *CreditTransfer) { p.Amount = &Amount{Form: apd.NaN} }), `field "amount" is not a finite number`},
		{"timestamp text not RFC 3339", transfer(func(p *CreditTransfer) { p.Timestamp = Timestamp{Time: when.Time, Text: "now"} }), `field "timestamp" holds "now"`},
		{"timestamp text and time differ", transfer(func(p *CreditTransfer) {
			p.Timestamp = Timestamp{Time: when.Time, Text: "2025-10-29T00:00:00Z"}
		}), "does not match its time"},
		{"non-canonical address", &RegistryExchange{KnownAgents: []KnownAgent{{AgentURI: URI{SchemeAgent, "Alpha.local"}}}}, "not a canonical AGLX address"},
		{"unknown scheme", &RegistryExchange{KnownAgents: []KnownAgent{{AgentURI: URI{"http", "alpha"}}}}, "not a canonical AGLX address"},
		{"nil entries", &RegistrySync{}, `field "entries" is required`},
		{"valid sync", &RegistrySync{Entries: []RegistryEntry{{AgentID: "a", AgentURI: URI{SchemeAgent, "a.local"}}}}, ""},
		{"balance with negative pending", &CreditBalance{Pending: mustAmount(t, "-1")}, `field "pending" must not be negative`},
		{"empty balance", &CreditBalance{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.p.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Validate(%+v) = %v, want nil", tt.p, err)
			case tt.want != "" && (StatusOf(err) != StatusBadRequest || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Validate(%+v) = %v, want a 400 containing %q", tt.p, err, tt.want)
			}
		})
	}
}
