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
		// What the registry keeps of an agent is bounded (LabelSizeMax,
		// LabelsMax, AddressSizeMax), so a 1 MiB body cannot become a
		// 1 MiB registry entry.
		{"update at the bounds", &RegistryUpdate{AgentName: strings.Repeat("n", LabelSizeMax), Capabilities: make32(LabelSizeMax), Address: strings.Repeat("h", AddressSizeMax)}, ""},
		{"name too long", &RegistryUpdate{AgentName: strings.Repeat("n", LabelSizeMax+1)}, `field "agent_name" is longer than 128 bytes`},
		{"too many capabilities", &RegistryUpdate{AgentName: "n", Capabilities: append(make32(1), "x")}, `field "capabilities" lists 33 entries; at most 32`},
		{"capability too long", &RegistryUpdate{AgentName: "n", Capabilities: []string{strings.Repeat("c", LabelSizeMax+1)}}, `field "capabilities[0]" is longer than 128 bytes`},
		{"status too long", &RegistryUpdate{AgentName: "n", Status: strings.Repeat("s", LabelSizeMax+1)}, `field "status" is longer`},
		{"address too long", &RegistryUpdate{AgentName: "n", Address: strings.Repeat("h", AddressSizeMax+1)}, `field "address" is longer than 255 bytes`},
		{"announce type too long", &AgentAnnounce{AgentName: "n", AgentType: strings.Repeat("t", LabelSizeMax+1)}, `field "agent_type" is longer`},
		{"sync status too long", &RegistrySync{Entries: []RegistryEntry{{AgentID: "a", AgentURI: URI{SchemeAgent, "a.local"}, Status: strings.Repeat("s", LabelSizeMax+1)}}}, `field "entries[0].status" is longer`},
		{"too much expertise", &MentorRegister{AgentName: "n", Expertise: append(make32(1), "x")}, `field "expertise" lists 33 entries`},
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

// make32 is LabelsMax labels of n bytes each.
func make32(n int) []string {
	out := make([]string, LabelsMax)
	for i := range out {
		out[i] = strings.Repeat("c", n)
	}
	return out
}
