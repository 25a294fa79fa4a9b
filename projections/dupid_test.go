package projections

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/protocol"
)

// dupIDLog is a log in which a second message carries the event id of a
// signed transfer: bob binds a key, is minted 100, sends carol 1 (signed),
// and then a transfer of 99 to mallory, signed with another key, appears
// under the same event id. Only a client writing into the event stream
// beside the node can make such a log.
func dupIDLog(t *testing.T, h *harness) (genuine, forged *Event, evs []*Event) {
	const bob, carol, mallory = "agent://bob.local", "agent://carol.local", "agent://mallory.local"
	k1, other := newEd25519(t), newEd25519(t)
	at := regT0
	add := func(e *Event) *Event { evs = append(evs, e); return e }
	add(h.event(signed(t, k1, frame(bob, testNode, protocol.TypeAuthRequest,
		fmt.Sprintf(`{"agent_id":"b","public_key":%q,"timestamp":%q}`, pubText(t, k1), ts(at)))), at))
	add(h.event(signed(t, nodeKey, frame(testNode, bob, protocol.TypeCreditTransfer,
		fmt.Sprintf(`{"transaction_id":"mint-1","amount":"100","currency":"AGLX","timestamp":%q}`, ts(at)))), at))
	genuine = add(h.event(signed(t, k1, frame(bob, carol, protocol.TypeCreditTransfer,
		fmt.Sprintf(`{"transaction_id":"t-1","amount":"1","currency":"AGLX","timestamp":%q}`, ts(at)))), at))
	forged = add(h.event(signed(t, other, frame(bob, mallory, protocol.TypeCreditTransfer,
		fmt.Sprintf(`{"transaction_id":"t-2","amount":"99","currency":"AGLX","timestamp":%q}`, ts(at)))), at))
	forged.Envelope.ID = genuine.Envelope.ID
	forged.Envelope.MsgID = genuine.Envelope.ID
	for _, e := range evs {
		e.Envelope.Msg = e.Msg // as the bridge leaves it, for the ingest check
	}
	return genuine, forged, evs
}

// TestDuplicateEventIDTakesNoOtherVerdict: the ingest's verdict for one
// message was taken, by event id, for another message with the same id:
// live, the forged transfer was paid (200); on replay, with no cache, it
// was refused (401), and the ledgers differed. The cache now vouches only
// for the envelope it checked.
func TestDuplicateEventIDTakesNoOtherVerdict(t *testing.T) {
	cache := NewVerdictCache()
	live := newHarness(t, func(c *RegistryConfig) { c.Verdicts = cache })
	_, forged, evs := dupIDLog(t, live)
	liveCredits := NewCredits(testNode, live.r, live.out)
	for _, e := range evs {
		if e != forged { // the forgery never passed the bridge
			(&IngestVerifier{Registry: live.r, Cache: cache}).VerifyBatch([]*events.Envelope{e.Envelope})
		}
		live.applyEvent(e)
		liveCredits.Apply(e)
	}
	liveReply, _, _ := live.out.Take(forged.Seq)

	replay := newHarness(t)
	replayCredits := NewCredits(testNode, replay.r, replay.out)
	for _, e := range evs {
		replay.applyEvent(e)
		replayCredits.Apply(e)
	}
	replayReply, _, _ := replay.out.Take(forged.Seq)

	a, _ := DigestOf(liveCredits, forged.Seq)
	b, _ := DigestOf(replayCredits, forged.Seq)
	if liveReply.Status != replayReply.Status || !bytes.Equal(liveReply.Body, replayReply.Body) || a.SHA256 != b.SHA256 {
		t.Fatalf("live and replay differ: live %d %s, replay %d %s; digests %s and %s",
			liveReply.Status, liveReply.Body, replayReply.Status, replayReply.Body, a.SHA256, b.SHA256)
	}
	if replayReply.Status != protocol.StatusUnauthorized {
		t.Fatalf("the forged transfer got %d %s; want 401", replayReply.Status, replayReply.Body)
	}
}
