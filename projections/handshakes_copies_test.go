package projections

import (
	"crypto"
	"fmt"
	"testing"
	"time"

	"github.com/aglx/ledger/protocol"
	"github.com/aglx/ledger/reputation"
)

// TestSignedAnswerCopyEndsNothing: a signed answer sent again byte for
// byte (its signature still verifies within the window; the ID and
// IN-REPLY-TO headers are not signed) by anyone who holds a copy (the
// requester it was relayed to, any reader of the log) ends nothing, and
// the responder's real answer to the requester's next request ends that
// one. The copy ended the next pending request of the pair: for
// mentor.feedback the mentee's rating was lost, for credit.approve and
// credit.deny the tracker closed a request the ledger kept open
// (helper-96, helper-97).
func TestSignedAnswerCopyEndsNothing(t *testing.T) {
	const requester, responder = hsWorker, hsOwner
	tests := []struct {
		name              string
		request, answer   func(n int) *protocol.Frame
		fundResponder     bool
		mentorRegistered  bool
		checkScoreChanges bool
	}{
		{name: "mentor.feedback",
			request: func(n int) *protocol.Frame {
				return frame(requester, responder, protocol.TypeMentorRequest, fmt.Sprintf(`{"task_id":"t-%d"}`, n))
			},
			answer: func(n int) *protocol.Frame {
				return frame(responder, requester, protocol.TypeMentorFeedback, fmt.Sprintf(`{"score":0.9,"comment":"c-%d","reputation_delta":0.25}`, n))
			},
			mentorRegistered: true, checkScoreChanges: true},
		{name: "credit.approve",
			request: func(n int) *protocol.Frame {
				return frame(requester, responder, protocol.TypeCreditRequest, fmt.Sprintf(`{"requested_amount":5,"purpose":"p-%d"}`, n))
			},
			answer: func(n int) *protocol.Frame {
				return frame(responder, requester, protocol.TypeCreditApprove, fmt.Sprintf(`{"approved_amount":5,"transaction_id":"tx-%d"}`, n))
			},
			fundResponder: true},
		{name: "credit.deny",
			request: func(n int) *protocol.Frame {
				return frame(requester, responder, protocol.TypeCreditRequest, fmt.Sprintf(`{"requested_amount":5,"purpose":"p-%d"}`, n))
			},
			answer: func(n int) *protocol.Frame {
				return frame(responder, requester, protocol.TypeCreditDeny, fmt.Sprintf(`{"requested_amount":5,"reason":"r-%d"}`, n))
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHSHarness(t)
			reqKey, respKey := newEd25519(t), newEd25519(t)
			h.bindKey(requester, reqKey, h.at)
			keyResponder(t, h, responder, respKey, tc.mentorRegistered)
			if tc.fundResponder {
				h.send(signed(t, nodeKey, frame(testNode, responder, protocol.TypeCreditTransfer,
					fmt.Sprintf(`{"amount":100,"currency":"AGLX","transaction_id":"mint-1","timestamp":%q}`, ts(h.at)))), time.Second)
			}
			sign := func(k crypto.Signer, f *protocol.Frame) *protocol.Frame {
				return signed(t, k, stamped(f, h.at.Add(time.Second)))
			}
			r1 := h.send(sign(reqKey, tc.request(1)), time.Second)
			a1 := sign(respKey, tc.answer(1))
			h.send(a1, time.Second)
			if q, _ := h.hs.Handshake(r1.Seq); q.State == HandshakePending {
				t.Fatalf("the first answer did not end the first request: %+v", q)
			}
			once := h.scores.Score(requester)

			r2 := h.send(sign(reqKey, tc.request(2)), time.Second)
			// Someone else sends the first answer again, 20 s after it was
			// signed: well within the 5-minute window.
			copyEv := h.send(a1, 10*time.Second)
			if h.r.RefusedEvent(copyEv) || h.c.RefusedEvent(copyEv) {
				t.Logf("the copy was refused by a fold")
			}
			if q, _ := h.hs.Handshake(r2.Seq); q.State != HandshakePending {
				t.Errorf("a copy of the answer to request 1 ended request 2: state %s, answer_event %s (the copy is seq %d)", q.State, q.AnswerEvent, copyEv.Seq)
			}
			for _, rq := range h.c.L.Requests(0, 100) {
				if rq.Seq == r2.Seq {
					t.Logf("after the copy the ledger's record of request 2 is %q; the tracker's %q", rq.State, func() string { q, _ := h.hs.Handshake(r2.Seq); return q.State }())
				}
			}
			// The responder's real answer to request 2.
			h.send(sign(respKey, tc.answer(2)), time.Second)
			if q, _ := h.hs.Handshake(r2.Seq); q.State == HandshakePending || q.AnswerSeq == copyEv.Seq {
				t.Errorf("the real answer did not end request 2: state %s, answered by seq %d (the copy is %d)", q.State, q.AnswerSeq, copyEv.Seq)
			}
			if tc.checkScoreChanges {
				if got := h.scores.Score(requester); got == once || got == reputation.Default {
					t.Errorf("the mentor's real, signed, fresh feedback to request 2 moved nothing: score %d (after the first %d)", got, once)
				}
			}
		})
	}
}

// TestOverduePairHeadDoesNotTakeTheAnswer: an answer matched by its pair
// (mentor.feedback, credit.approve/deny without IN-REPLY-TO) ends the
// pair's live request whether or not an overdue one ahead of it has been
// reached by the expiry bound (HandshakesExpiryMax an event). It took the
// oldest of the pair even when overdue, counted itself late and left the
// live request pending, so what an answer ended hung on how many
// strangers' handshakes (anyone can open 50,000 unsigned ones) fell due at
// once, and the mentee lost its mentor's rating (helper-96).
func TestOverduePairHeadDoesNotTakeTheAnswer(t *testing.T) {
	const mentor, mentee = hsOther, hsWorker
	for _, fillers := range []int{0, HandshakesExpiryMax + 44} {
		t.Run(fmt.Sprintf("%d other handshakes due", fillers), func(t *testing.T) {
			h := newHSHarness(t)
			k, menteeKey := newEd25519(t), newEd25519(t)
			h.bindKey(mentee, menteeKey, h.at)
			repMentor(t, h, mentor, k)
			for i := 0; i < fillers; i++ {
				from := fmt.Sprintf("agent://made-up-%d.local", i/HandshakesPairMax)
				h.send(frame(from, hsOwner, protocol.TypePlanApproval, fmt.Sprintf(`{"request_id":"p-%d","plan":"x"}`, i)), time.Microsecond)
			}
			// sendAt sends f signed by key, stamped at its arrival, step on.
			sendAt := func(key crypto.Signer, f *protocol.Frame, step time.Duration) *Event {
				return h.send(signed(t, key, stamped(f, h.at.Add(step))), step)
			}
			ask := func(task string) *protocol.Frame {
				return frame(mentee, mentor, protocol.TypeMentorRequest, fmt.Sprintf(`{"task_id":%q}`, task))
			}
			r1 := sendAt(menteeKey, ask("t-1"), time.Second)
			r2 := sendAt(menteeKey, ask("t-2"), 23*time.Hour)
			if q, ok := h.hs.Handshake(r2.Seq); !ok || q.State != HandshakePending {
				t.Fatalf("r2 not opened: %+v", q)
			}
			// The first event after r1's deadline: the mentor answers r2.
			sendAt(k, feedback(mentor, mentee, "0.25"), time.Hour+2*time.Second)
			q1, _ := h.hs.Handshake(r1.Seq)
			q2, _ := h.hs.Handshake(r2.Seq)
			if q1.State != HandshakeExpired || q2.State != HandshakeApproved {
				t.Errorf("r1 %s, r2 %s; want r1 expired and r2 approved by the feedback", q1.State, q2.State)
			}
			if got := h.scores.Score(mentee); got == reputation.Default {
				t.Errorf("the mentor's signed feedback to the mentee's live request moved nothing (score %d)", got)
			}
		})
	}
}

// TestSignedRetryCopyKeepsItsHandshake: a copy of a signed task.retry
// (same bytes, within the signature window; anyone who holds it can send
// it) changes nothing. It cancelled the task's pending handshake, which
// the retry itself had opened, and then opened nothing, since open counts
// it as a repeated signed request: the task was left with no pending
// handshake, and the worker's signed result was counted late (helper-96).
func TestSignedRetryCopyKeepsItsHandshake(t *testing.T) {
	for _, copied := range []bool{false, true} {
		t.Run(fmt.Sprintf("copy sent: %v", copied), func(t *testing.T) {
			h := newHSHarness(t)
			ownerKey, workerKey := newEd25519(t), newEd25519(t)
			h.bindKey(hsOwner, ownerKey, h.at)
			h.bindKey(hsOther, workerKey, h.at)
			h.catchUp()
			sign := func(k crypto.Signer, f *protocol.Frame) *protocol.Frame {
				return signed(t, k, stamped(f, h.at.Add(time.Second)))
			}
			h.send(sign(ownerKey, frame(hsOwner, hsWorker, protocol.TypeTaskAssign, `{"task":"analyze","task_id":"t-1"}`)), time.Second)
			retry := sign(ownerKey, frame(hsOwner, hsOther, protocol.TypeTaskRetry, `{"original_task_id":"t-1","attempt":2,"reason":"slow"}`))
			r := h.send(retry, time.Second)
			if q, ok := h.hs.Handshake(r.Seq); !ok || q.State != HandshakePending {
				t.Fatalf("the retry opened %+v", q)
			}
			if copied {
				h.send(withID(retry, "another-id"), 5*time.Second)
			}
			if q, _ := h.hs.Handshake(r.Seq); q.State != HandshakePending {
				t.Errorf("after the copy the retry's handshake is %s (%s); want pending", q.State, q.Detail)
			}
			h.send(sign(workerKey, frame(hsOther, hsOwner, protocol.TypeTaskResult, `{"task_id":"t-1","status":"SUCCESS"}`)), time.Second)
			if q, _ := h.hs.Handshake(r.Seq); q.State != HandshakeApproved {
				c, _ := h.hs.Counts()
				t.Errorf("the worker's signed result left the retried task %s (late %d); want approved", q.State, c.Late)
			}
		})
	}
}
