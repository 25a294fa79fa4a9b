package projections

import (
	"crypto"
	"fmt"
	"testing"
	"time"

	"github.com/aglx/ledger/protocol"
)

// TestUnsignedAnswersInAKeyedNameEndNothing: once an agent has a key, an
// answer, cancellation or retry in its name ends a handshake only if it is
// signed with that key. The signature policy does not ask these TYPEs to
// be signed, so anyone could otherwise close a keyed agent's handshakes:
// a forged mentor.feedback ended the mentee's request, and the mentor's
// signed feedback that came after found none, and moved no reputation.
// The same answer signed ends the handshake.
func TestUnsignedAnswersInAKeyedNameEndNothing(t *testing.T) {
	tests := []struct {
		name string
		// request is signed by its sender (FROM); answer is sent as it
		// is, then signed by its sender.
		request, answer func() *protocol.Frame
	}{
		{name: "shutdown.response",
			request: func() *protocol.Frame {
				return frame(hsOwner, hsWorker, protocol.TypeShutdownRequest, `{"request_id":"s-1","reason":"done"}`)
			},
			answer: func() *protocol.Frame {
				return frame(hsWorker, hsOwner, protocol.TypeShutdownResponse, `{"request_id":"s-1","approve":true}`)
			}},
		{name: "plan.approval.response",
			request: func() *protocol.Frame {
				return frame(hsWorker, hsOwner, protocol.TypePlanApproval, `{"request_id":"p-1","plan":"migrate"}`)
			},
			answer: func() *protocol.Frame {
				return frame(hsOwner, hsWorker, protocol.TypePlanApprovalResponse, `{"request_id":"p-1","approve":false}`)
			}},
		{name: "mentor.feedback",
			request: func() *protocol.Frame {
				return frame(hsWorker, hsOther, protocol.TypeMentorRequest, `{"task_id":"t-9"}`)
			},
			answer: func() *protocol.Frame {
				return frame(hsOther, hsWorker, protocol.TypeMentorFeedback, `{"score":0.9}`)
			}},
		{name: "task.retry by the task's owner",
			request: func() *protocol.Frame {
				return frame(hsOwner, hsWorker, protocol.TypeTaskAssign, `{"task":"analyze","task_id":"t-1"}`)
			},
			answer: func() *protocol.Frame {
				return frame(hsOwner, hsOther, protocol.TypeTaskRetry, `{"original_task_id":"t-1","attempt":2}`)
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHSHarness(t)
			keys := map[string]crypto.Signer{}
			for _, uri := range []string{hsOwner, hsWorker, hsOther} {
				keys[uri] = newEd25519(t)
				h.bindKey(uri, keys[uri], h.at)
			}
			h.catchUp()
			req := tc.request()
			seq := h.send(signed(t, keys[req.From()], stamped(req, h.at.Add(time.Second))), time.Second).Seq
			if q, ok := h.hs.Handshake(seq); !ok || q.State != HandshakePending || !q.Signed {
				t.Fatalf("the signed request opened %+v", q)
			}

			h.send(tc.answer(), time.Second)
			if q, _ := h.hs.Handshake(seq); q.State != HandshakePending {
				t.Fatalf("an unsigned %s in a keyed agent's name ended the handshake: %+v", tc.name, q)
			}
			if c, _ := h.hs.Counts(); c.Unauthenticated != 1 {
				t.Fatalf("counts %+v, want one unauthenticated", c)
			}

			ans := tc.answer()
			h.send(signed(t, keys[ans.From()], stamped(ans, h.at.Add(time.Second))), time.Second)
			if q, _ := h.hs.Handshake(seq); q.State == HandshakePending {
				t.Fatalf("the same %s signed left the handshake pending: %+v", tc.name, q)
			}
		})
	}
}

// TestUnsignedRequestsLeaveRoomForSigned: unsigned requests, which anyone
// can send under as many names as it likes, hold at most half of the
// tracker's bound; a keyed agent's signed request is tracked however many
// there are.
func TestUnsignedRequestsLeaveRoomForSigned(t *testing.T) {
	h := newHSHarness(t)
	k := newEd25519(t)
	h.bindKey(hsOwner, k, h.at)
	h.catchUp()
	// Each made-up name opens its share of pairs up to the pair bound.
	for i := 0; i < HandshakesUnsignedMax+10; i++ {
		from := fmt.Sprintf("agent://made-up-%d.local", i/HandshakesPairMax)
		h.send(frame(from, hsWorker, protocol.TypeShutdownRequest, fmt.Sprintf(`{"request_id":"s-%d"}`, i)), time.Microsecond)
	}
	counts, pending := h.hs.Counts()
	if pending != HandshakesUnsignedMax || counts.Untracked != 10 {
		t.Fatalf("pending %d, untracked %d; want %d and 10", pending, counts.Untracked, HandshakesUnsignedMax)
	}
	req := frame(hsOwner, hsWorker, protocol.TypeShutdownRequest, `{"request_id":"mine"}`)
	e := h.send(signed(t, k, stamped(req, h.at.Add(time.Second))), time.Second)
	if q, ok := h.hs.Handshake(e.Seq); !ok || q.State != HandshakePending {
		t.Fatalf("a signed request past %d unsigned ones was not tracked", HandshakesUnsignedMax)
	}
}
