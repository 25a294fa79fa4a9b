package projections

import (
	"errors"
	"testing"

	"github.com/aglx/ledger/protocol"
)

// TestOutboxSaysWhenAReplyWasDropped: a reply pushed out by OutboxMax
// newer ones is reported dropped, not absent, so that the bridge does not
// answer a refused message with a plain ack; a reply that was never made
// is absent.
func TestOutboxSaysWhenAReplyWasDropped(t *testing.T) {
	o := NewOutbox()
	refusal := Reply{Type: "error", Status: protocol.StatusPaymentRequired, Body: []byte(`{}`)}
	o.Put(2, refusal) // seq 1 is a message no projection answered
	o.Put(3, refusal)
	if _, _, err := o.Take(3); err != nil { // taken in time
		t.Fatal(err)
	}
	for seq := uint64(4); seq < 4+OutboxMax; seq++ {
		o.Put(seq, Reply{Type: "ack", Status: protocol.StatusOK})
	}
	tests := []struct {
		seq     uint64
		ok      bool
		dropped bool
	}{
		{2, false, true},                 // pushed out untaken
		{4 + OutboxMax - 1, true, false}, // the newest
		{4 + OutboxMax, false, false},    // not applied yet: nothing made
	}
	for _, tc := range tests {
		_, ok, err := o.Take(tc.seq)
		if ok != tc.ok || errors.Is(err, ErrReplyDropped) != tc.dropped {
			t.Errorf("Take(%d) = %v, %v; want ok %v, dropped %v", tc.seq, ok, err, tc.ok, tc.dropped)
		}
	}
}
