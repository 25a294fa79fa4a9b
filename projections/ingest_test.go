package projections

import (
	"crypto"
	"fmt"
	"testing"

	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/protocol"
)

// TestIngestVerifierBatchVerdicts: the verdicts the validation workers
// record for a batch of frames, honest ones first, then mixed (good and
// forged Ed25519 and RSA signatures, senders without a key, frames the
// policy does not cover),
// more than one protocol batch long, are each what VerifyEnvelope says of
// the frame alone; and none is recorded where nothing was to be checked.
// The fold trusts a recorded verdict made under the key it would use, so
// a wrong one here would change an outcome.
func TestIngestVerifierBatchVerdicts(t *testing.T) {
	h := newHarness(t)
	at := regT0
	keys := []crypto.Signer{newEd25519(t), newEd25519(t), newRSA(t)}
	uri := func(a int) string { return fmt.Sprintf("agent://b%d.local", a) }
	for a, k := range keys {
		h.bindKey(uri(a), k, at)
	}
	stranger := newEd25519(t)
	update := func(a, i int) *protocol.Frame {
		return frame(uri(a), testNode, protocol.TypeRegistryUpdate,
			fmt.Sprintf(`{"agent_name":"B%d","status":"S%d","timestamp":%q}`, a, i, ts(at)))
	}
	type want struct {
		env     *events.Envelope
		checked bool
	}
	var envs []*events.Envelope
	var wants []want
	for i := range 4*ingestBatchMax + 5 {
		a := i % (len(keys) + 1) // the last is an agent without a key
		var f *protocol.Frame
		switch {
		case i < 2*ingestBatchMax: // a first stretch of honest Ed25519 signatures: batches that pass
			a = i % 2
			f = signed(t, keys[a], update(a, i))
		case a == len(keys):
			f = signed(t, stranger, update(a, i))
		case i%7 == 0:
			f = signed(t, stranger, update(a, i)) // a forgery
		case i%11 == 0:
			f = frame(uri(a), testNode, protocol.TypeRegistryFetch, `{"mode":"full"}`) // needs no signature
		default:
			f = signed(t, keys[a], update(a, i))
		}
		e := h.event(f, at)
		e.Envelope.Msg = e.Msg
		envs = append(envs, e.Envelope)
		wants = append(wants, want{e.Envelope, a < len(keys) && MessageNeedsSignature(e.Msg)})
	}
	cache := NewVerdictCache()
	v := &IngestVerifier{Registry: h.r, Cache: cache}
	before := protocol.Ed25519Counters()
	v.VerifyBatch(envs)
	after := protocol.Ed25519Counters()
	if batches, failed := after.Batches-before.Batches, after.FailedBatches-before.FailedBatches; batches-failed < 2 || failed < 1 {
		t.Fatalf("%d batches, %d of them failed; want passing and failing batches both", batches, failed)
	}
	good, bad := 0, 0
	for _, w := range wants {
		pub, kid, _ := h.r.CurrentKey(w.env.From)
		err, found := cache.Get(w.env, kid)
		if found != w.checked {
			t.Fatalf("%s from %s: verdict recorded %v, want %v", w.env.Type, w.env.From, found, w.checked)
		}
		if !found {
			continue
		}
		// The failure itself, reason and all, since the fold answers with
		// the cached one.
		want := VerifyEnvelope(pub, w.env)
		if fmt.Sprint(err) != fmt.Sprint(want) || protocol.StatusOf(err) != protocol.StatusOf(want) {
			t.Errorf("%s from %s: recorded %v, alone %v", w.env.Type, w.env.From, err, want)
		}
		if err == nil {
			good++
		} else {
			bad++
		}
	}
	if good == 0 || bad == 0 {
		t.Fatalf("%d good and %d bad verdicts: the batch did not mix them", good, bad)
	}
}
