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

// TestOutboxRemembersRefusalsPastItsReplies: the relay asks whether the
// node refused a message long after its reply was dropped. A refusal is
// remembered for RefusalsMax refusals, an accepted message is known as
// such while no newer refusal was let go of, and past that the outbox says
// it does not know, rather than "not refused".
func TestOutboxRemembersRefusalsPastItsReplies(t *testing.T) {
	o := NewOutbox()
	refusal := Reply{Type: protocol.TypeError, Status: protocol.StatusPaymentRequired}
	o.Put(2, refusal)
	o.Put(3, Reply{Type: "ack", Status: protocol.StatusOK})
	for seq := uint64(4); seq < 4+2*OutboxMax; seq++ { // pushes 2 and 3 out of the replies
		o.Put(seq, Reply{Type: "ack", Status: protocol.StatusOK})
	}
	check := func(when string, tests []struct {
		seq            uint64
		refused, known bool
	}) {
		t.Helper()
		for _, tc := range tests {
			if refused, known := o.Refused(tc.seq); refused != tc.refused || known != tc.known {
				t.Errorf("%s: Refused(%d) = %v, %v; want %v, %v", when, tc.seq, refused, known, tc.refused, tc.known)
			}
		}
	}
	check("replies dropped", []struct {
		seq            uint64
		refused, known bool
	}{{2, true, true}, {3, false, true}, {1, false, true}, {4 + 2*OutboxMax - 1, false, true}})

	// RefusalsMax more refusals: the oldest eighth goes, 2 with it.
	base := uint64(1) << 40
	for i := range uint64(RefusalsMax) {
		o.addRefusal(base + i)
	}
	check("refusals dropped", []struct {
		seq            uint64
		refused, known bool
	}{{2, false, false}, {3, false, false}, {base, false, false}, {base + RefusalsMax - 1, true, true}, {base + RefusalsMax, false, true}})
	if len(o.refusals) > RefusalsMax {
		t.Errorf("%d refusals held, bound %d", len(o.refusals), RefusalsMax)
	}
}

// TestOutboxHoldsAtMostItsBytes: large replies are dropped by bytes, not
// only by count: 65,536 pages of registry.list held some 7 GB, for
// 98-byte fetches anyone may send (helper-98). The newest reply stays,
// the oldest dropped are reported dropped, and what is held stays within
// OutboxBytesMax.
func TestOutboxHoldsAtMostItsBytes(t *testing.T) {
	for _, tc := range []struct {
		name string
		body int // bytes a reply
	}{
		{"pages of 110 KB", 110 << 10},
		{"one reply larger than the bound", OutboxBytesMax + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOutbox()
			body := make([]byte, tc.body)
			n := uint64(2 * OutboxBytesMax / tc.body)
			if n < 2 {
				n = 2
			}
			for seq := uint64(1); seq <= n; seq++ {
				o.Put(seq, Reply{Type: protocol.TypeRegistryList, Status: protocol.StatusOK, Body: body})
			}
			if o.bytes > max(OutboxBytesMax, replyBytes(Reply{Type: protocol.TypeRegistryList, Body: body})) || len(o.bySeq) != len(o.order) {
				t.Fatalf("the outbox holds %d bytes in %d replies; at most %d", o.bytes, len(o.bySeq), OutboxBytesMax)
			}
			if _, ok, err := o.Take(n); !ok || err != nil {
				t.Fatalf("Take(newest %d) = %v, %v; want the reply", n, ok, err)
			}
			if _, _, err := o.Take(1); !errors.Is(err, ErrReplyDropped) {
				t.Fatalf("Take(oldest) = %v; want ErrReplyDropped", err)
			}
			held := 0
			for _, r := range o.bySeq {
				held += replyBytes(r)
			}
			if held != o.bytes {
				t.Fatalf("the outbox counts %d bytes and holds %d", o.bytes, held)
			}
		})
	}
}
