package projections

import (
	"crypto"
	"fmt"
	"testing"
	"time"

	"github.com/aglx/ledger/protocol"
	"github.com/aglx/ledger/reputation"
)

// repMentor registers uri as a mentor with key k, signed, at h's clock.
func repMentor(t *testing.T, h *hsHarness, uri string, k crypto.Signer) {
	t.Helper()
	h.bindKey(uri, k, h.at)
	h.catchUp()
	h.send(signed(t, k, stamped(frame(uri, testNode, protocol.TypeMentorRegister, `{"agent_name":"M","expertise":["x"],"available":true}`), h.at.Add(time.Second))), time.Second)
	if !h.r.IsMentor(uri) {
		t.Fatalf("%s is not in the mentor directory", uri)
	}
}

// feedback is a mentor.feedback from mentor to mentee with delta.
func feedback(mentor, mentee string, delta string) *protocol.Frame {
	return frame(mentor, mentee, protocol.TypeMentorFeedback, fmt.Sprintf(`{"score":0.9,"comment":"good","reputation_delta":%s}`, delta))
}

// TestFeedbackMovesReputationOnlyWhenItCounts: a mentor's
// reputation_delta moves the mentee's score only when it answers a
// pending request the mentee signed, is signed by the mentor's key, and
// the mentor is in the directory (docs/REPUTATION.md).
func TestFeedbackMovesReputationOnlyWhenItCounts(t *testing.T) {
	const mentor, mentee = hsOther, hsWorker
	tests := []struct {
		name       string
		asked      string // the mentee's mentor.request first: "signed", "unsigned" or none
		sign       string
		registered bool
		want       int64
	}{
		{name: "asked, signed, registered: counts", asked: "signed", sign: "key", registered: true, want: 562_500},
		{name: "advice nobody asked for", sign: "key", registered: true, want: reputation.Default},
		{name: "a request in the mentee's name it did not sign (helper-78)", asked: "unsigned", sign: "key", registered: true, want: reputation.Default},
		{name: "unsigned, from a mentor with a key (refused)", asked: "signed", sign: "none", registered: true, want: reputation.Default},
		{name: "a forged signature (refused)", asked: "signed", sign: "forged", registered: true, want: reputation.Default},
		{name: "a mentor not in the directory", asked: "signed", sign: "key", want: reputation.Default},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHSHarness(t)
			k, menteeKey := newEd25519(t), newEd25519(t)
			h.bindKey(mentee, menteeKey, h.at)
			keyResponder(t, h, mentor, k, tc.registered)
			switch tc.asked {
			case "signed":
				h.send(askFor(t, h, mentee, mentor, menteeKey, "t-1"), time.Second)
			case "unsigned":
				h.send(frame(mentee, mentor, protocol.TypeMentorRequest, `{"task_id":"t-1"}`), time.Second)
			}
			f := stamped(feedback(mentor, mentee, "0.25"), h.at.Add(time.Second))
			switch tc.sign {
			case "key":
				f = signed(t, k, f)
			case "forged":
				f = signed(t, newEd25519(t), f)
			}
			h.send(f, time.Second)
			if got := h.scores.Score(mentee); got != tc.want {
				t.Fatalf("the mentee's score is %d, want %d", got, tc.want)
			}
		})
	}
}

// askFor is the mentee's signed mentor.request to mentor.
func askFor(t *testing.T, h *hsHarness, mentee, mentor string, k crypto.Signer, task string) *protocol.Frame {
	t.Helper()
	return signed(t, k, stamped(frame(mentee, mentor, protocol.TypeMentorRequest, fmt.Sprintf(`{"task_id":%q}`, task)), h.at.Add(time.Second)))
}

// mentorAsked is a harness where mentee and mentor have keys, mentor is in
// the directory, and mentee has asked it for advice (task t-1); it returns
// the mentor's key and the mentee's.
func mentorAsked(t *testing.T, mentor, mentee string) (*hsHarness, crypto.Signer, crypto.Signer) {
	t.Helper()
	h := newHSHarness(t)
	k, menteeKey := newEd25519(t), newEd25519(t)
	h.bindKey(mentee, menteeKey, h.at)
	repMentor(t, h, mentor, k)
	h.send(askFor(t, h, mentee, mentor, menteeKey, "t-1"), time.Second)
	return h, k, menteeKey
}

// TestFeedbackCountsOnce: the same signed feedback sent again, to answer
// the mentee's next request, moves nothing the second time and leaves that
// request to the mentor's own answer; nor does an event applied twice, or
// a feedback under the id of one that ended a handshake, count (helper-78).
func TestFeedbackCountsOnce(t *testing.T) {
	const mentor, mentee = hsOther, hsWorker
	h, k, menteeKey := mentorAsked(t, mentor, mentee)
	praise := signed(t, k, stamped(feedback(mentor, mentee, "0.25"), h.at.Add(time.Second)))
	h.send(praise, time.Second)
	once := h.scores.Score(mentee)
	if once == reputation.Default {
		t.Fatal("the feedback moved nothing; the test needs it to")
	}
	h.send(askFor(t, h, mentee, mentor, menteeKey, "t-2"), time.Second)
	h.send(praise, time.Second) // the same signed body, within its window
	if got := h.scores.Score(mentee); got != once {
		t.Fatalf("the same feedback sent again moved the score from %d to %d", once, got)
	}
	// The copy ended nothing, so the mentee's second request waits for
	// the mentor's own answer, which counts (helper-96: the copy ended it,
	// and the real answer matched nothing).
	ended := h.send(signed(t, k, stamped(feedback(mentor, mentee, "0.25"), h.at.Add(time.Second))), time.Second)
	now := h.scores.Score(mentee)
	if now == once {
		t.Fatal("the mentor's answer to the second request moved nothing: the copy before it took the request")
	}
	// The mentor's later, unsolicited feedback under the id of the event
	// that last ended a handshake: it ends nothing, so it counts nothing
	// (helper-78: EndedBy handed back the earlier ending).
	e := h.event(signed(t, k, stamped(feedback(mentor, mentee, "0.5"), h.at.Add(2*time.Second))), h.at.Add(2*time.Second))
	e.ID = ended.ID
	h.applyEvent(e)
	h.catchUp()
	if got := h.scores.Score(mentee); got != now {
		t.Fatalf("unsolicited feedback under a reused event id moved the score from %d to %d", now, got)
	}
}

// TestReputationSkipsAnEventAppliedTwice: the reputation fold, given the
// same event again (a log read twice), counts it once, whatever the
// tracker says of it. Two rules hold this, either enough alone: the fold
// skips a seq it has applied, and the model refuses a rating not stamped
// after the pair's last.
func TestReputationSkipsAnEventAppliedTwice(t *testing.T) {
	const mentor, mentee = hsOther, hsWorker
	h, k, _ := mentorAsked(t, mentor, mentee)
	first := h.send(signed(t, k, stamped(feedback(mentor, mentee, "0.25"), h.at.Add(time.Second))), time.Second)
	once := h.scores.Score(mentee)
	h.rep.Apply(first) // the tracker still names first's handshake as ended by it
	if got := h.scores.Score(mentee); got != once {
		t.Fatalf("an event applied twice moved the score from %d to %d", once, got)
	}
}

// TestReputationAdmitsToAZone: a zone that asks for 0.6 denies an agent
// nobody has rated (0.5) and admits it once two mentors it asked have
// praised it; the agent's entry shows the score.
func TestReputationAdmitsToAZone(t *testing.T) {
	const mentee = hsWorker
	h := newHSHarness(t, func(c *RegistryConfig) {
		c.Zones = append(c.Zones[:len(c.Zones):len(c.Zones)], Zone{ID: "reputable", Secret: testZoneSecretA, MinReputation: 0.6, Role: "member"})
	})
	join := func() Reply {
		t.Helper()
		e := h.send(hmacSigned(t, testZoneSecretA, frame(mentee, testNode, protocol.TypeZoneJoin,
			fmt.Sprintf(`{"zone_id":"reputable","agent_id":"w","timestamp":%q}`, ts(h.at.Add(time.Second))))), time.Second)
		rep, _, _ := h.out.Take(e.Seq)
		return rep
	}
	menteeKey := newEd25519(t)
	h.register(mentee, 3600, h.at)
	h.bindKey(mentee, menteeKey, h.at)
	h.catchUp()
	if rep := join(); rep.Type != protocol.TypeZoneDeny {
		t.Fatalf("an agent nobody rated: %s %s, want zone.deny", rep.Type, rep.Body)
	}
	for i, mentor := range []string{"agent://m1.local", "agent://m2.local"} {
		k := newEd25519(t)
		repMentor(t, h, mentor, k)
		h.send(askFor(t, h, mentee, mentor, menteeKey, fmt.Sprint("t-", i)), time.Second)
		h.send(signed(t, k, stamped(feedback(mentor, mentee, "1"), h.at.Add(time.Second))), time.Second)
	}
	// 0.5, then + 0.2 (1 x 0.5 x 0.5 = 0.25, cut to one mentor's share), then
	// + 0.15 (1, weighted by the second mentor's 0.5 and the room left, 0.3).
	if got := h.scores.Score(mentee); got != 850_000 {
		t.Fatalf("score %d, want 850000", got)
	}
	if rep := join(); rep.Type != protocol.TypeZoneConfirm {
		t.Fatalf("after praise: %s %s, want zone.confirm", rep.Type, rep.Body)
	}
	if a, _ := h.r.Agent(mentee); a.Reputation != 0.85 {
		t.Fatalf("the agent's entry says reputation %v, want 0.85", a.Reputation)
	}
}

// keyResponder binds k to uri, and registers uri as a mentor in the
// directory if mentor is set.
func keyResponder(t *testing.T, h *hsHarness, uri string, k crypto.Signer, mentor bool) {
	t.Helper()
	if mentor {
		repMentor(t, h, uri, k)
		return
	}
	h.bindKey(uri, k, h.at)
	h.catchUp()
}
