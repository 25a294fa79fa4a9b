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
// reputation_delta moves the mentee's score only when it answers the
// mentee's pending request, is signed by the mentor's key, and the mentor
// is in the directory (docs/REPUTATION.md).
func TestFeedbackMovesReputationOnlyWhenItCounts(t *testing.T) {
	const mentor, mentee = hsOther, hsWorker
	tests := []struct {
		name       string
		asked      bool // the mentee sent a mentor.request first
		sign       string
		registered bool
		want       int64
	}{
		{name: "asked, signed, registered: counts", asked: true, sign: "key", registered: true, want: 562_500},
		{name: "advice nobody asked for", sign: "key", registered: true, want: reputation.Default},
		{name: "unsigned, from a mentor with a key (refused)", asked: true, sign: "none", registered: true, want: reputation.Default},
		{name: "a forged signature (refused)", asked: true, sign: "forged", registered: true, want: reputation.Default},
		{name: "a mentor not in the directory", asked: true, sign: "key", want: reputation.Default},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHSHarness(t)
			k := newEd25519(t)
			if tc.registered {
				repMentor(t, h, mentor, k)
			} else {
				h.bindKey(mentor, k, h.at)
				h.catchUp()
			}
			if tc.asked {
				h.send(frame(mentee, mentor, protocol.TypeMentorRequest, `{"task_id":"t-1","context":"data.analyze"}`), time.Second)
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
	h.register(mentee, 3600, h.at)
	h.catchUp()
	if rep := join(); rep.Type != protocol.TypeZoneDeny {
		t.Fatalf("an agent nobody rated: %s %s, want zone.deny", rep.Type, rep.Body)
	}
	for i, mentor := range []string{"agent://m1.local", "agent://m2.local"} {
		k := newEd25519(t)
		repMentor(t, h, mentor, k)
		h.send(frame(mentee, mentor, protocol.TypeMentorRequest, fmt.Sprintf(`{"task_id":"t-%d"}`, i)), time.Second)
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
