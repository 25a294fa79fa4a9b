package projections

import (
	"bytes"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/aglx/ledger/protocol"
	"github.com/aglx/ledger/reputation"
	"pgregory.net/rapid"
)

const (
	hsOwner  = "agent://owner.local"
	hsWorker = "agent://worker.local"
	hsOther  = "agent://other.local"
)

// hsHarness folds frames through the registry, the ledger and the
// tracker, in the runner's order.
type hsHarness struct {
	*harness
	c      *Credits
	hs     *Handshakes
	rep    *Reputation
	scores *reputation.Model
	at     time.Time
	// applied counts the events the ledger and the tracker have had.
	applied int
}

func newHSHarness(t *testing.T, edit ...func(*RegistryConfig)) *hsHarness {
	scores := reputation.New()
	edit = append(edit, func(c *RegistryConfig) { c.Reputation = scores.Fraction })
	h := &hsHarness{harness: newHarness(t, edit...), at: regT0, scores: scores}
	h.c = NewCredits(testNode, h.r, nil)
	h.hs = NewHandshakes(h.r, h.r, h.c)
	h.rep = NewReputation(scores, h.r, h.hs)
	return h
}

// send applies f, received step after the previous frame, and returns its
// event.
func (h *hsHarness) send(f *protocol.Frame, step time.Duration) *Event {
	h.t.Helper()
	h.at = h.at.Add(step)
	e := h.event(f, h.at)
	h.applyEvent(e)
	h.catchUp()
	return e
}

// catchUp gives the ledger and the tracker the events only the registry
// has seen (the harness's key bindings and registrations).
func (h *hsHarness) catchUp() {
	for ; h.applied < len(h.events); h.applied++ {
		e := h.events[h.applied]
		h.c.Apply(e)
		h.hs.Apply(e)
		h.rep.Apply(e)
	}
}

// refold folds every event so far into fresh folds, as a rebuild does,
// and returns the snapshots of the tracker, the reputation model and the
// registry, one after the other.
func (h *hsHarness) refold() []byte {
	h.t.Helper()
	cfg := h.cfg
	cfg.Outbox = NewOutbox()
	f := NewFolds(cfg)
	for _, e := range h.events {
		for _, p := range f.All() {
			p.Apply(e)
		}
	}
	return joinSnapshots(h.t, f.Handshakes, f.Reputation, f.Registry)
}

// live is refold's bytes for the live folds.
func (h *hsHarness) live() []byte {
	h.t.Helper()
	return joinSnapshots(h.t, h.hs, h.rep, h.r)
}

func joinSnapshots(t *testing.T, ss ...Snapshotter) []byte {
	t.Helper()
	var out []byte
	for _, s := range ss {
		b, err := s.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		out = append(append(out, b...), '\n')
	}
	return out
}

func withHeader(f *protocol.Frame, name, value string) *protocol.Frame {
	f.Headers = append(f.Headers, protocol.Header{Name: name, Value: value})
	return f
}

// TestHandshakeLifecycles: each kind of request is ended by its answers as
// an operator reading /v1/handshakes expects, answers that name nothing
// pending are counted and change nothing, and time runs on the log's
// clock.
func TestHandshakeLifecycles(t *testing.T) {
	type step struct {
		f    *protocol.Frame
		wait time.Duration // before this frame
	}
	assign := func(taskID string) *protocol.Frame {
		body := `{"task":"analyze"}`
		if taskID != "" {
			body = fmt.Sprintf(`{"task":"analyze","task_id":%q}`, taskID)
		}
		return frame(hsOwner, hsWorker, protocol.TypeTaskAssign, body)
	}
	result := func(from, taskID string) *protocol.Frame {
		return frame(from, hsOwner, protocol.TypeTaskResult, fmt.Sprintf(`{"task_id":%q,"status":"SUCCESS"}`, taskID))
	}
	creditRequest := func(amount, id string) *protocol.Frame {
		return withHeader(frame(hsWorker, hsOwner, protocol.TypeCreditRequest,
			fmt.Sprintf(`{"requested_amount":%s,"purpose":"p","timestamp":"2026-11-01T10:00:00Z"}`, amount)), protocol.HeaderID, id)
	}
	deny := func(amount string) *protocol.Frame {
		return frame(hsOwner, hsWorker, protocol.TypeCreditDeny,
			fmt.Sprintf(`{"requested_amount":%s,"reason":"no budget","timestamp":"2026-11-01T10:00:00Z"}`, amount))
	}
	shutdown := frame(hsOwner, hsWorker, protocol.TypeShutdownRequest, `{"request_id":"s-1","reason":"done"}`)
	tests := []struct {
		name  string
		steps []step
		// want is the state of the handshake each step opened, by step.
		want      map[int]string
		answer    map[int]string // and the TYPE that ended it
		unmatched map[string]uint64
		late      uint64
	}{
		{name: "a task answered by its worker, named by task_id",
			steps: []step{{f: assign("t-1")}, {f: result(hsWorker, "t-1")}},
			want:  map[int]string{0: HandshakeApproved}, answer: map[int]string{0: protocol.TypeTaskResult}},
		{name: "a task without task_id, named by the assign's event id",
			steps: []step{{f: assign("")}, {f: result(hsWorker, "01JTEST0000000000000000001")}},
			want:  map[int]string{0: HandshakeApproved}},
		{name: "a result from someone else than the worker ends nothing",
			steps:     []step{{f: assign("t-1")}, {f: result(hsOther, "t-1")}},
			want:      map[int]string{0: HandshakePending},
			unmatched: map[string]uint64{protocol.TypeTaskResult: 1}},
		{name: "rejected by the worker",
			steps: []step{{f: assign("t-1")}, {f: frame(hsWorker, hsOwner, protocol.TypeTaskReject, `{"task_id":"t-1","reason":"busy"}`)}},
			want:  map[int]string{0: HandshakeRejected}},
		{name: "cancelled by the owner; the late result is counted",
			steps: []step{{f: assign("t-1")}, {f: frame(hsOwner, hsWorker, protocol.TypeTaskCancel, `{"task_id":"t-1"}`)}, {f: result(hsWorker, "t-1")}},
			want:  map[int]string{0: HandshakeCancelled}, late: 1},
		{name: "a task expires once the log's clock passes its deadline",
			steps: []step{{f: assign("t-1")}, {f: shutdown, wait: HandshakeTaskTTL + time.Second}, {f: result(hsWorker, "t-1")}},
			want:  map[int]string{0: HandshakeExpired, 1: HandshakePending}, late: 1},
		{name: "events before the deadline expire nothing",
			steps: []step{{f: shutdown}, {f: assign("t-9"), wait: HandshakeShutdownTTL - time.Second}},
			want:  map[int]string{0: HandshakePending}},
		{name: "a retry replaces the task's handshake, and the result ends the retry",
			steps: []step{{f: assign("t-1")}, {f: frame(hsWorker, hsOwner, protocol.TypeTaskReject, `{"task_id":"t-1","reason":"busy"}`)},
				{f: frame(hsOwner, hsOther, protocol.TypeTaskRetry, `{"original_task_id":"t-1","attempt":2}`)}, {f: result(hsOther, "t-1")}},
			want: map[int]string{0: HandshakeRejected, 2: HandshakeApproved}, answer: map[int]string{2: protocol.TypeTaskResult}},
		{name: "credit answers match the same amount first, as the ledger does",
			steps: []step{{f: creditRequest("5", "r-1")}, {f: creditRequest("7", "r-2")}, {f: deny("7")}},
			want:  map[int]string{0: HandshakePending, 1: HandshakeRejected}},
		{name: "IN-REPLY-TO names the request",
			steps: []step{{f: creditRequest("5", "r-1")}, {f: creditRequest("5", "r-2")}, {f: withHeader(deny("5"), protocol.HeaderInReplyTo, "r-2")}},
			want:  map[int]string{0: HandshakePending, 1: HandshakeRejected}},
		{name: "an IN-REPLY-TO naming an ended request ends no other (helper-77)",
			steps: []step{{f: creditRequest("5", "r-1")}, {f: creditRequest("5", "r-2")},
				{f: withHeader(deny("5"), protocol.HeaderInReplyTo, "r-1")}, {f: withHeader(deny("5"), protocol.HeaderInReplyTo, "r-1")}},
			want: map[int]string{0: HandshakeRejected, 1: HandshakePending}, late: 1},
		{name: "IN-REPLY-TO may name the request's event id",
			steps: []step{{f: creditRequest("5", "r-1")}, {f: creditRequest("5", "r-2")},
				{f: withHeader(deny("5"), protocol.HeaderInReplyTo, "01JTEST0000000000000000002")}},
			want: map[int]string{0: HandshakePending, 1: HandshakeRejected}},
		{name: "an IN-REPLY-TO naming nothing known ends nothing",
			steps:     []step{{f: creditRequest("5", "r-1")}, {f: withHeader(deny("5"), protocol.HeaderInReplyTo, "r-9")}},
			want:      map[int]string{0: HandshakePending},
			unmatched: map[string]uint64{protocol.TypeCreditDeny: 1}},
		{name: "one request_id sent to two teammates opens two handshakes (helper-77)",
			steps: []step{{f: shutdown}, {f: frame(hsOwner, hsOther, protocol.TypeShutdownRequest, `{"request_id":"s-1"}`)},
				{f: frame(hsOther, hsOwner, protocol.TypeShutdownResponse, `{"request_id":"s-1","approve":true}`)}},
			want: map[int]string{0: HandshakePending, 1: HandshakeApproved}},
		{name: "a denial with nothing pending is counted",
			steps:     []step{{f: deny("5")}},
			unmatched: map[string]uint64{protocol.TypeCreditDeny: 1}},
		{name: "mentor advice ends the oldest request of its pair",
			steps: []step{{f: frame(hsWorker, hsOther, protocol.TypeMentorRequest, `{"task_id":"t-9"}`)},
				{f: frame(hsWorker, hsOther, protocol.TypeMentorRequest, `{"task_id":"t-10"}`)},
				{f: frame(hsOther, hsWorker, protocol.TypeMentorFeedback, `{"score":0.9}`)}},
			want: map[int]string{0: HandshakeApproved, 1: HandshakePending}},
		{name: "a shutdown refused, a plan approved",
			steps: []step{{f: shutdown}, {f: frame(hsWorker, hsOwner, protocol.TypeShutdownResponse, `{"request_id":"s-1","approve":false,"reason":"busy"}`)},
				{f: frame(hsWorker, hsOwner, protocol.TypePlanApproval, `{"request_id":"p-1","plan":"migrate"}`)},
				{f: frame(hsOwner, hsWorker, protocol.TypePlanApprovalResponse, `{"request_id":"p-1","approve":true}`)}},
			want: map[int]string{0: HandshakeRejected, 2: HandshakeApproved}},
		{name: "the same request_id again while pending opens nothing",
			steps: []step{{f: shutdown}, {f: frame(hsOwner, hsWorker, protocol.TypeShutdownRequest, `{"request_id":"s-1"}`)}},
			want:  map[int]string{0: HandshakePending}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHSHarness(t)
			seqs := make([]uint64, len(tc.steps))
			for i, s := range tc.steps {
				seqs[i] = h.send(s.f, s.wait+time.Second).Seq
			}
			for i, want := range tc.want {
				q, ok := h.hs.Handshake(seqs[i])
				if !ok {
					t.Fatalf("step %d (%s) opened no handshake", i, tc.steps[i].f.Type())
				}
				if q.State != want {
					t.Errorf("step %d (%s): state %s, want %s (%+v)", i, tc.steps[i].f.Type(), q.State, want, q)
				}
				if a, ok := tc.answer[i]; ok && q.Answer != a {
					t.Errorf("step %d: answered by %s, want %s", i, q.Answer, a)
				}
			}
			counts, _ := h.hs.Counts()
			for typ, n := range tc.unmatched {
				if counts.Unmatched[typ] != n {
					t.Errorf("unmatched %s = %d, want %d", typ, counts.Unmatched[typ], n)
				}
			}
			if counts.Late != tc.late {
				t.Errorf("late = %d, want %d", counts.Late, tc.late)
			}
		})
	}
}

// TestHandshakesLeaveRefusedEventsOut: a task.assign the ledger refuses
// (the owner cannot fund its CREDITS) was never relayed, so it is not a
// handshake the worker owes an answer to; a result with a forged
// signature from a keyed worker ends nothing.
func TestHandshakesLeaveRefusedEventsOut(t *testing.T) {
	h := newHSHarness(t)
	unfunded := withHeader(frame(hsOwner, hsWorker, protocol.TypeTaskAssign, `{"task":"analyze","task_id":"t-1"}`), protocol.HeaderCredits, "1000")
	if e := h.send(unfunded, time.Second); !h.c.RefusedEvent(e) {
		t.Fatal("the ledger did not refuse an unfunded task.assign; the test needs it to")
	} else if _, ok := h.hs.Handshake(e.Seq); ok {
		t.Fatal("a refused task.assign opened a handshake")
	}

	k := newEd25519(t)
	h.register(hsWorker, 3600, h.at)
	h.bindKey(hsWorker, k, h.at)
	a := h.send(frame(hsOwner, hsWorker, protocol.TypeTaskAssign, `{"task":"analyze","task_id":"t-2"}`), time.Second)
	forged := signed(t, newEd25519(t), frame(hsWorker, hsOwner, protocol.TypeTaskResult, `{"task_id":"t-2","status":"SUCCESS"}`))
	h.send(forged, time.Second)
	if q, _ := h.hs.Handshake(a.Seq); q.State != HandshakePending {
		t.Fatalf("a forged result ended the handshake: %+v", q)
	}
	h.send(signed(t, k, frame(hsWorker, hsOwner, protocol.TypeTaskResult, fmt.Sprintf(`{"task_id":"t-2","status":"SUCCESS","timestamp":%q}`, ts(h.at)))), time.Second)
	if q, _ := h.hs.Handshake(a.Seq); q.State != HandshakeApproved {
		t.Fatalf("the signed result did not end the handshake: %+v", q)
	}
	// An unsigned request in the keyed worker's name could be anyone's: it
	// is not tracked, and so cannot fill the worker's slots (helper-78).
	u := h.send(frame(hsWorker, hsOther, protocol.TypeMentorRequest, `{"task_id":"t-3"}`), time.Second)
	if _, ok := h.hs.Handshake(u.Seq); ok {
		t.Fatal("an unsigned request in a keyed agent's name opened a handshake")
	}
	req := signed(t, k, stamped(frame(hsWorker, hsOther, protocol.TypeMentorRequest, `{"task_id":"t-4"}`), h.at.Add(time.Second)))
	s := h.send(req, time.Second)
	if q, ok := h.hs.Handshake(s.Seq); !ok || !q.Signed {
		t.Fatalf("its signed request: %+v, %v; want a signed handshake", q, ok)
	}
	// The same signed request again, which still verifies, is a copy: it
	// opens nothing, so whoever holds one cannot fill the worker's slots
	// with it (helper-79).
	before, _ := h.hs.Counts()
	c := h.send(req, time.Second)
	after, _ := h.hs.Counts()
	if _, ok := h.hs.Handshake(c.Seq); ok || after.Repeated != before.Repeated+1 {
		t.Fatalf("a copy of a signed request: opened %v, repeated %d -> %d", ok, before.Repeated, after.Repeated)
	}
}

// TestHandshakePairBound: past HandshakesPairMax pending requests from one
// requester to one responder, further requests are counted, not tracked;
// an answer makes room again.
func TestHandshakePairBound(t *testing.T) {
	h := newHSHarness(t)
	for i := range HandshakesPairMax + 5 {
		h.send(frame(hsOwner, hsWorker, protocol.TypeShutdownRequest, fmt.Sprintf(`{"request_id":"s-%d"}`, i)), time.Millisecond)
	}
	counts, pending := h.hs.Counts()
	if pending != HandshakesPairMax || counts.Untracked != 5 {
		t.Fatalf("pending %d, untracked %d; want %d and 5", pending, counts.Untracked, HandshakesPairMax)
	}
	h.send(frame(hsWorker, hsOwner, protocol.TypeShutdownResponse, `{"request_id":"s-0","approve":true}`), time.Millisecond)
	e := h.send(frame(hsOwner, hsWorker, protocol.TypeShutdownRequest, `{"request_id":"s-new"}`), time.Millisecond)
	if _, ok := h.hs.Handshake(e.Seq); !ok {
		t.Fatal("an answer did not make room for a new request")
	}
}

// TestHandshakeExpiriesAreSpread: however many handshakes share a
// deadline, one event expires at most HandshakesExpiryMax of them, and the
// events after it the rest (helper-77: a quarter of a million expiring in
// one event held the fold for seconds).
func TestHandshakeExpiriesAreSpread(t *testing.T) {
	h := newHSHarness(t)
	const n = HandshakesExpiryMax*2 + 10
	for i := range n {
		teammate := fmt.Sprintf("agent://t%d.local", i/HandshakesPairMax)
		h.send(frame(hsOwner, teammate, protocol.TypeShutdownRequest, fmt.Sprintf(`{"request_id":"s-%d"}`, i)), 0)
	}
	for i, want := range []int{n - HandshakesExpiryMax, n - 2*HandshakesExpiryMax, 0, 0} {
		step := time.Duration(0)
		if i == 0 {
			step = HandshakeShutdownTTL + time.Second
		}
		h.send(frame(hsWorker, hsOwner, protocol.TypeTaskResult, `{"task_id":"x","status":"ok"}`), step)
		if _, pending := h.hs.Counts(); pending != want {
			t.Fatalf("after event %d past the deadline: %d pending, want %d", i+1, pending, want)
		}
	}
}

// TestAnAnswerPastTheDeadlineIsLate: while more handshakes are due than
// one event expires, an answer to one still pending past its deadline
// expires it and is counted late, as if it had come after the expiry
// (helper-78: it ended the handshake, and a late mentor's feedback moved
// a score).
func TestAnAnswerPastTheDeadlineIsLate(t *testing.T) {
	h := newHSHarness(t)
	const n = HandshakesExpiryMax + 10
	last := uint64(0)
	for i := range n {
		teammate := fmt.Sprintf("agent://t%d.local", i/HandshakesPairMax)
		last = h.send(frame(hsOwner, teammate, protocol.TypeShutdownRequest, fmt.Sprintf(`{"request_id":"s-%d"}`, i)), 0).Seq
	}
	lastTeammate := fmt.Sprintf("agent://t%d.local", (n-1)/HandshakesPairMax)
	h.send(frame(lastTeammate, hsOwner, protocol.TypeShutdownResponse, fmt.Sprintf(`{"request_id":"s-%d","approve":true}`, n-1)),
		HandshakeShutdownTTL+time.Second)
	q, _ := h.hs.Handshake(last)
	if counts, _ := h.hs.Counts(); q.State != HandshakeExpired || counts.Late != 1 {
		t.Fatalf("an answer past the deadline: state %s, late %d; want expired and 1", q.State, counts.Late)
	}
}

// TestARetryPastTheDeadlineFindsItExpired: a task.retry of a task past its
// deadline, which the expiry bound has not reached yet, finds it expired,
// as a later retry would, and does not record it cancelled (helper-79).
func TestARetryPastTheDeadlineFindsItExpired(t *testing.T) {
	h := newHSHarness(t)
	const n = HandshakesExpiryMax + 10
	for i := range n {
		worker := fmt.Sprintf("agent://w%d.local", i/HandshakesPairMax)
		h.send(frame(hsOwner, worker, protocol.TypeTaskAssign, fmt.Sprintf(`{"task":"a","task_id":"t-%d"}`, i)), 0)
	}
	last := h.hs.book.byKey[nameKey(familyTask, hsOwner, "", fmt.Sprint("t-", n-1))]
	h.send(frame(hsOwner, hsOther, protocol.TypeTaskRetry, fmt.Sprintf(`{"original_task_id":"t-%d","attempt":2}`, n-1)), HandshakeTaskTTL+time.Second)
	if q, _ := h.hs.Handshake(last); q.State != HandshakeExpired {
		t.Fatalf("the retried task past its deadline is %s, want expired", q.State)
	}
}

// TestHandshakePageAfterTheEnd: a page after the last seq is empty, also
// for an after= too large for a seq, which pageOf makes the largest one
// (helper-77: it wrapped around to the first page).
func TestHandshakePageAfterTheEnd(t *testing.T) {
	h := newHSHarness(t)
	e := h.send(frame(hsOwner, hsWorker, protocol.TypeShutdownRequest, `{"request_id":"s-1"}`), time.Second)
	for _, after := range []uint64{e.Seq, ^uint64(0)} {
		if p := h.hs.Page(HandshakeFilter{After: after}); len(p.Handshakes) != 0 || p.Next != 0 {
			t.Errorf("after=%d: %+v, want an empty page", after, p)
		}
	}
	if p := h.hs.Page(HandshakeFilter{After: e.Seq - 1}); len(p.Handshakes) != 1 {
		t.Errorf("after=%d: %d handshakes, want 1", e.Seq-1, len(p.Handshakes))
	}
}

// TestHandshakesSkipAnEventAppliedTwice: the same event applied again
// (a log read twice) opens nothing a second time, even after its first
// handshake was let go (helper-77: its seq went into the page order twice).
func TestHandshakesSkipAnEventAppliedTwice(t *testing.T) {
	h := newHSHarness(t)
	e := h.send(frame(hsOwner, hsWorker, protocol.TypeShutdownRequest, `{"request_id":"s-1"}`), time.Second)
	h.send(frame(hsWorker, hsOwner, protocol.TypeShutdownResponse, `{"request_id":"s-1","approve":true}`), time.Second)
	delete(h.hs.book.bySeq, e.Seq) // as if let go
	h.hs.Apply(e)
	if _, ok := h.hs.Handshake(e.Seq); ok {
		t.Fatal("an event applied twice opened its handshake again")
	}
}

// TestHandshakesEndedAreLetGo: the ended handshakes kept are bounded; the
// oldest go first, with their names, and a page still walks what is kept.
func TestHandshakesEndedAreLetGo(t *testing.T) {
	if testing.Short() {
		t.Skip("folds some 140,000 events")
	}
	h := newHSHarness(t)
	first := uint64(0)
	for i := range HandshakesEndedMax + 10 {
		e := h.send(frame(hsOwner, hsWorker, protocol.TypeShutdownRequest, fmt.Sprintf(`{"request_id":"s-%d"}`, i)), time.Millisecond)
		if i == 0 {
			first = e.Seq
		}
		h.send(frame(hsWorker, hsOwner, protocol.TypeShutdownResponse, fmt.Sprintf(`{"request_id":"s-%d","approve":true}`, i)), time.Millisecond)
		h.events, h.applied = h.events[:0], 0 // no refold here; keep memory down
	}
	if _, ok := h.hs.Handshake(first); ok {
		t.Fatal("the oldest ended handshake is still kept")
	}
	if n := len(h.hs.book.bySeq); n != HandshakesEndedMax {
		t.Fatalf("%d handshakes kept, want %d", n, HandshakesEndedMax)
	}
	if n := len(h.hs.book.byKey); n != HandshakesEndedMax {
		t.Fatalf("%d names kept, want %d", n, HandshakesEndedMax)
	}
	total := 0
	for f := (HandshakeFilter{}); ; {
		p := h.hs.Page(f)
		total += len(p.Handshakes)
		if p.Next == 0 {
			break
		}
		f.After = p.Next
	}
	if total != HandshakesEndedMax {
		t.Fatalf("paging walked %d handshakes, want %d", total, HandshakesEndedMax)
	}
}

// TestHandshakesProperties folds random handshake traffic between three
// agents (one with a key, so that some answers are forged and refused),
// with a receive clock that jumps past deadlines and steps back. After
// every event the tracker's books agree with themselves; at the end a
// rebuild from the log gives the same tracker, byte for byte.
func TestHandshakesProperties(t *testing.T) {
	agents := []string{hsOwner, hsWorker, hsOther}
	rapid.Check(t, func(rt *rapid.T) {
		h := newHSHarness(t)
		k := newEd25519(t)
		h.register(hsOther, 3600, h.at)
		h.bindKey(hsOther, k, h.at)
		for range rapid.IntRange(1, 80).Draw(rt, "events") {
			from := rapid.SampledFrom(agents).Draw(rt, "from")
			to := rapid.SampledFrom(agents).Draw(rt, "to")
			id := rapid.IntRange(0, 3).Draw(rt, "id")
			amount := rapid.SampledFrom([]string{"1", "2"}).Draw(rt, "amount")
			var f *protocol.Frame
			step := time.Duration(rapid.SampledFrom([]int64{-30, 1, 60, 700, 90_000}).Draw(rt, "step seconds")) * time.Second
			switch rapid.IntRange(0, 14).Draw(rt, "kind") {
			case 0:
				f = frame(from, to, protocol.TypeTaskAssign, fmt.Sprintf(`{"task":"a","task_id":"t-%d"}`, id))
			case 1:
				f = frame(from, to, protocol.TypeTaskResult, fmt.Sprintf(`{"task_id":"t-%d","status":"SUCCESS"}`, id))
			case 2:
				f = frame(from, to, protocol.TypeTaskReject, fmt.Sprintf(`{"task_id":"t-%d","reason":"r"}`, id))
			case 3:
				f = frame(from, to, protocol.TypeTaskCancel, fmt.Sprintf(`{"task_id":"t-%d"}`, id))
			case 4:
				f = frame(from, to, protocol.TypeTaskRetry, fmt.Sprintf(`{"original_task_id":"t-%d","attempt":2}`, id))
			case 5:
				f = withHeader(frame(from, to, protocol.TypeCreditRequest, fmt.Sprintf(`{"requested_amount":%s,"timestamp":"2026-11-01T10:00:00Z"}`, amount)),
					protocol.HeaderID, fmt.Sprintf("m-%d", id))
			case 6:
				f = frame(from, to, protocol.TypeCreditDeny, fmt.Sprintf(`{"requested_amount":%s,"reason":"no","timestamp":"2026-11-01T10:00:00Z"}`, amount))
				if rapid.Bool().Draw(rt, "in-reply-to") {
					f = withHeader(f, protocol.HeaderInReplyTo, fmt.Sprintf("m-%d", id))
				}
			case 7:
				f = frame(from, to, protocol.TypeMentorRequest, `{"task_id":"t"}`)
			case 8:
				f = frame(from, to, protocol.TypeMentorFeedback, `{"score":0.5}`)
			case 9:
				f = frame(from, to, protocol.TypeShutdownRequest, fmt.Sprintf(`{"request_id":"s-%d"}`, id))
			case 10:
				f = frame(from, to, protocol.TypeShutdownResponse, fmt.Sprintf(`{"request_id":"s-%d","approve":%v}`, id, rapid.Bool().Draw(rt, "approve")))
			case 11:
				f = frame(from, to, protocol.TypePlanApprovalResponse, fmt.Sprintf(`{"request_id":"s-%d","approve":true}`, id))
			case 12:
				f = frame(from, testNode, protocol.TypeMentorRegister, `{"agent_name":"M","expertise":["x"],"available":true}`)
			case 13:
				f = frame(from, to, protocol.TypePlanApproval, fmt.Sprintf(`{"request_id":"s-%d","plan":"p"}`, id))
			default:
				f = frame(from, to, protocol.TypeMentorFeedback, fmt.Sprintf(`{"score":0.5,"reputation_delta":%.2f}`,
					float64(rapid.IntRange(-20, 20).Draw(rt, "delta"))/20))
			}
			if from == hsOther && rapid.Bool().Draw(rt, "sign") {
				signer := k
				if rapid.Bool().Draw(rt, "forged") {
					signer = newEd25519(t)
				}
				f = signed(t, signer, stamped(f, h.at.Add(step)))
			}
			h.send(f, step)
			checkHandshakeBook(rt, &h.hs.book)
		}
		if live, again := h.live(), h.refold(); !bytes.Equal(live, again) {
			rt.Fatalf("the rebuilt tracker, scores or registry differ:\n got %s\nwant %s", again, live)
		}
	})
}

// stamped puts a "timestamp" of at into f's body, as a signed message
// needs one within minutes of its arrival.
func stamped(f *protocol.Frame, at time.Time) *protocol.Frame {
	stamp := fmt.Sprintf(`"timestamp":%q`, ts(at))
	if old := stampRE.Find(f.Body); old != nil {
		f.Body = bytes.Replace(f.Body, old, []byte(stamp), 1)
	} else {
		f.Body = append([]byte("{"+stamp+","), f.Body[1:]...)
	}
	return f
}

var stampRE = regexp.MustCompile(`"timestamp":"[^"]*"`)

// checkHandshakeBook checks what must hold between the book's parts.
func checkHandshakeBook(rt *rapid.T, b *handshakeBook) {
	pending, unsigned := 0, 0
	for seq, q := range b.bySeq {
		if q.Seq != seq {
			rt.Fatalf("handshake %d filed under %d", q.Seq, seq)
		}
		if q.State == HandshakePending {
			pending++
			if !q.Signed {
				unsigned++
			}
			if q.heapIndex < 0 || q.heapIndex >= len(b.deadlines) || b.deadlines[q.heapIndex] != q {
				rt.Fatalf("pending handshake %d is not in the deadline heap", seq)
			}
			// At most HandshakesExpiryMax expire with one event; this
			// test never has that many due at once.
			if q.Deadline.Before(b.now) {
				rt.Fatalf("handshake %d pending past its deadline %s (clock %s)", seq, q.Deadline, b.now)
			}
		} else if q.Ended.Before(q.Opened) {
			rt.Fatalf("handshake %d ended before it opened", seq)
		}
	}
	if pending != b.pending || len(b.deadlines) != pending || unsigned != b.unsigned {
		rt.Fatalf("%d pending (%d unsigned), counted %d (%d), %d in the heap", pending, unsigned, b.pending, b.unsigned, len(b.deadlines))
	}
	inPairs := 0
	for pair, seqs := range b.byPair {
		if len(seqs) > HandshakesPairMax {
			rt.Fatalf("pair %q holds %d pending", pair, len(seqs))
		}
		for _, seq := range seqs {
			if q := b.bySeq[seq]; q == nil || q.State != HandshakePending {
				rt.Fatalf("pair %q lists handshake %d, which is not pending", pair, seq)
			}
		}
		inPairs += len(seqs)
	}
	if inPairs != pending {
		rt.Fatalf("the pairs list %d pending, there are %d", inPairs, pending)
	}
	var ended uint64
	for _, n := range b.counts.Ended {
		ended += n
	}
	if b.counts.Opened != ended+uint64(pending) {
		rt.Fatalf("opened %d, ended %d, pending %d", b.counts.Opened, ended, pending)
	}
}
