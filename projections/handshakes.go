package projections

import (
	"maps"
	"sync/atomic"
	"time"

	"github.com/aglx/ledger/ledger"
	"github.com/aglx/ledger/protocol"
	"github.com/cockroachdb/apd/v3"
)

// Handshakes tracks the request/response pairs between agents: a task
// handed to a worker, credits asked of an owner, advice asked of a mentor,
// a shutdown or a plan put to a teammate or a lead. Each request opens a
// handshake, pending until its answer ends it approved or rejected, its
// requester cancels it, or its deadline passes and it expires
// (AGLX-NOTES.md section 3: one correlation tracker, with a deadline and
// an expired end state). Operators read it to see who owes whom an answer,
// and since when.
//
// It records; it does not refuse. An answer that matches no pending
// handshake is still relayed and only counted: agents may have agreed on
// things the node never saw (a request sent before the node's log
// began, or directly). Events another fold refused (a bad signature, a
// task.assign the owner cannot fund) are left out, as the relay
// withholds them: a handshake the responder never saw is not pending.
//
// Time is the log's: a handshake expires when an event received after its
// deadline is applied (at most HandshakesExpiryMax with one event), so a
// replay expires it at the same place. Everything kept is bounded
// (HandshakesPendingMax, HandshakesRequesterMax, HandshakesPairMax,
// HandshakesEndedMax); the log keeps the rest.
type Handshakes struct {
	refusers []EventRefuser
	book     handshakeBook
	// pendingNow is book.pending for readers outside the fold's lock
	// (/metrics).
	pendingNow atomic.Int64
}

// keyHolder says whether an agent has a key bound (the registry).
type keyHolder interface {
	HasKey(uri string, seq uint64) bool
}

// EventRefuser is a fold that may refuse the event it applies; the
// tracker asks the folds applied before it.
type EventRefuser interface {
	RefusedEvent(e *Event) bool
}

// Handshake states. A handshake is pending until exactly one of the other
// four ends it.
const (
	HandshakePending   = "pending"
	HandshakeApproved  = "approved"  // the responder agreed: a task.result, credit.approve, mentor.feedback, approve: true
	HandshakeRejected  = "rejected"  // the responder declined: task.reject, credit.deny, approve: false
	HandshakeCancelled = "cancelled" // the requester withdrew: task.cancel, or a task.retry that replaced it
	HandshakeExpired   = "expired"   // no answer before the deadline
)

// How long, in event time, a request waits for its answer. A task waits
// as long as the ledger holds its credits (ledger.TaskHoldTTL), so the
// hold and the handshake expire together; a shutdown is a question for
// now, a credit request, a plan or a mentor's advice one for a day.
const (
	HandshakeTaskTTL     = ledger.TaskHoldTTL
	HandshakeCreditTTL   = 24 * time.Hour
	HandshakeMentorTTL   = 24 * time.Hour
	HandshakePlanTTL     = 24 * time.Hour
	HandshakeShutdownTTL = 10 * time.Minute
)

// Bounds on what the tracker keeps. A request over a bound is not tracked
// (counted as untracked); it is still stored and relayed.
const (
	// HandshakesPendingMax bounds the pending handshakes of all agents:
	// with their index entries about 0.8 KB each with short names, 2.5 KB
	// with the longest URIs and ids, so at most 250 MB.
	HandshakesPendingMax = 100_000 // handshakes
	// HandshakesUnsignedMax bounds the pending handshakes opened by
	// unsigned requests: half of HandshakesPendingMax. FROM costs nothing
	// to vary on an unsigned message, so one sender can open handshakes
	// under as many names as it likes; without this bound it could take
	// all of HandshakesPendingMax, and then no signed request was tracked,
	// and no mentor's feedback moved a score, for a day. Signed requests
	// come from agents with keys, one name each, each held to
	// HandshakesRequesterMax.
	HandshakesUnsignedMax = HandshakesPendingMax / 2 // handshakes
	// HandshakesRequesterMax bounds one requester's pending handshakes,
	// so that one sender cannot take them all under one name.
	HandshakesRequesterMax = 10_000 // handshakes
	// HandshakesPairMax bounds the pending handshakes one requester has
	// with one responder, so one pair cannot take the whole of
	// HandshakesPendingMax and matching an answer stays cheap.
	HandshakesPairMax = 100 // handshakes
	// HandshakesEndedMax bounds the ended handshakes kept for reading; the
	// oldest ended go first.
	HandshakesEndedMax = 1 << 16 // handshakes
	// HandshakesExpiryMax bounds the handshakes one event expires; the
	// rest expire with the next events.
	HandshakesExpiryMax = 256 // handshakes
	// HandshakeDetailMax bounds the answer's words kept with a handshake
	// (a reason, a feedback, a task's status).
	HandshakeDetailMax = 256 // bytes
)

// Handshake is one request and what became of it. The fields are in the
// order of their JSON names, as Snapshot writes them.
type Handshake struct {
	// Answer is the TYPE that ended the handshake (or task.retry, for one
	// it replaced); empty while pending and for an expired one.
	// Amount is a credit.request's requested_amount, as a decimal string.
	Amount      string    `json:"amount,omitempty"`
	Answer      string    `json:"answer,omitempty"`
	AnswerEvent string    `json:"answer_event,omitempty"`
	AnswerSeq   uint64    `json:"answer_seq,omitempty"`
	Attempt     int64     `json:"attempt,omitempty"` // a task.retry's
	Deadline    time.Time `json:"deadline"`
	// Detail is the answer's own words, at most HandshakeDetailMax bytes:
	// a task.result's status, a reason, a feedback, a transaction_id.
	Detail string    `json:"detail,omitempty"`
	Ended  time.Time `json:"ended,omitzero"`
	// Key is what answers name the handshake by: a task's task_id (or the
	// task.assign's event id, when it has none), a request_id; empty for a
	// credit or mentor request, which answers find by their pair.
	Key string `json:"key,omitempty"`
	// Kind is the request's TYPE.
	Kind string `json:"kind"`
	// MessageID is the request frame's ID header, which an answer may name
	// in IN-REPLY-TO.
	MessageID    string    `json:"message_id,omitempty"`
	Opened       time.Time `json:"opened"`
	RequestEvent string    `json:"request_event"`
	Requester    string    `json:"requester"`
	Responder    string    `json:"responder"`
	Seq          uint64    `json:"seq"` // the request's, which names the handshake
	// Signed says the request's signature verified with its requester's
	// key: the requester, not just its name, asked. Reputation moves only
	// for a signed request.
	Signed bool   `json:"signed,omitempty"`
	State  string `json:"state"`

	amount    *apd.Decimal // a credit.request's requested_amount, to match answers as the ledger does
	heapIndex int          // its place in the deadline heap while pending
	pair      string       // its byPair key, made once
	// names are its byKey entries, and its byMessage entries marked by a
	// leading 0x01, made once and dropped when it is let go.
	names []string
}

// HandshakeCounts are the tracker's running totals since the log began.
type HandshakeCounts struct {
	Opened uint64            `json:"opened"`
	Ended  map[string]uint64 `json:"ended"` // by end state
	// Late counts answers to a handshake that had already ended (most
	// often expired); Unmatched, by TYPE, answers to none the tracker
	// knows of.
	Late      uint64            `json:"late"`
	Unmatched map[string]uint64 `json:"unmatched"`
	// Untracked counts requests not tracked: a bound was reached, the
	// request had no FROM or TO or was its sender's to itself, or it was
	// unsigned in the name of an agent with a key.
	Untracked uint64 `json:"untracked"`
	// Repeated counts requests that named a handshake already pending
	// (the same task_id or request_id again).
	Repeated uint64 `json:"repeated"`
	// Unauthenticated counts answers, cancellations and retries that
	// ended nothing because they were unsigned in the name of an agent
	// with a key.
	Unauthenticated uint64 `json:"unauthenticated"`
}

// NewHandshakes returns an empty tracker. auth says whether a request's
// signature held (the registry: Handshake.Signed); refusers are the folds
// applied before it whose refusals it leaves out (the registry and the
// ledger).
func NewHandshakes(auth Authenticator, refusers ...EventRefuser) *Handshakes {
	b := newHandshakeBook()
	b.auth = auth
	return &Handshakes{refusers: refusers, book: b}
}

// Name implements Projection.
func (h *Handshakes) Name() string { return "handshakes" }

// Apply implements Projection.
func (h *Handshakes) Apply(e *Event) {
	if e.Foreign != nil || e.Msg == nil {
		return
	}
	h.book.endedByID, h.book.endedBySeq = "", 0 // EndedBy speaks of this event only
	if e.Seq != 0 && e.Seq <= h.book.lastSeq {
		return // applied already: a log read twice
	}
	if e.Seq != 0 { // an event without a sequence (a test's) must not reset the guard
		h.book.lastSeq = e.Seq
	}
	defer func() { h.pendingNow.Store(int64(h.book.pending)) }()
	h.book.advance(e.ReceivedAt)
	if e.Msg.Info.Group == protocol.GroupRegistry || e.Msg.Info.Group == protocol.GroupSecurity {
		return // the node answers these itself, at once
	}
	for _, r := range h.refusers {
		if r.RefusedEvent(e) {
			return
		}
	}
	b := &h.book
	switch p := e.Msg.Payload.(type) {
	case *protocol.TaskAssign:
		key := p.TaskID
		if key == "" {
			key = e.ID
		}
		b.open(e, familyTask, key, e.ID, HandshakeTaskTTL, 0, nil)
	case *protocol.TaskRetry:
		// A retry replaces the task's handshake, whatever became of it,
		// and may go to another worker; one not authentic (authentic)
		// neither ends nor opens one.
		if !b.authentic(e) {
			b.counts.Unauthenticated++
			return
		}
		if b.auth != nil && b.auth.Authenticate(e).Auth == AuthValid && b.copies.seen(replayKey(e)) {
			// A copy of a signed retry that opened its handshake
			// already: it cancelled the very handshake the retry had
			// opened before open saw it was a copy (helper-96).
			b.counts.Repeated++
			return
		}
		if q := b.find(familyTask, e.From, "", p.OriginalTaskID); q != nil && q.State == HandshakePending {
			if q.Deadline.Before(b.now) {
				// Past its deadline, not yet reached by the expiry bound.
				b.close(q, HandshakeExpired, "", "", 0, "")
			} else {
				b.end(q, e, HandshakeCancelled, "a task.retry replaced it")
			}
		}
		var attempt int64
		if p.Attempt != nil {
			attempt = *p.Attempt
		}
		b.open(e, familyTask, p.OriginalTaskID, "", HandshakeTaskTTL, attempt, nil)
	case *protocol.TaskResult:
		b.answerKeyed(e, familyTask, p.TaskID, HandshakeApproved, p.Status)
	case *protocol.TaskReject:
		b.answerKeyed(e, familyTask, p.TaskID, HandshakeRejected, p.Reason)
	case *protocol.TaskCancel:
		b.cancel(e, familyTask, p.TaskID, p.Reason)
	case *protocol.CreditRequest:
		b.open(e, familyCredit, "", "", HandshakeCreditTTL, 0, p.RequestedAmount.Decimal())
	case *protocol.CreditApprove:
		b.answerPair(e, familyCredit, HandshakeApproved, p.TransactionID, p.ApprovedAmount.Decimal())
	case *protocol.CreditDeny:
		b.answerPair(e, familyCredit, HandshakeRejected, p.Reason, p.RequestedAmount.Decimal())
	case *protocol.MentorRequest:
		b.open(e, familyMentor, "", "", HandshakeMentorTTL, 0, nil)
	case *protocol.MentorFeedback:
		b.answerPair(e, familyMentor, HandshakeApproved, p.Comment, nil)
	case *protocol.ShutdownRequest:
		b.open(e, familyShutdown, p.RequestID, "", HandshakeShutdownTTL, 0, nil)
	case *protocol.ShutdownResponse:
		b.answerKeyed(e, familyShutdown, p.RequestID, approval(p.Approve), p.Reason)
	case *protocol.PlanApproval:
		b.open(e, familyPlan, p.RequestID, "", HandshakePlanTTL, 0, nil)
	case *protocol.PlanApprovalResponse:
		b.answerKeyed(e, familyPlan, p.RequestID, approval(p.Approve), p.Feedback)
	}
}

// approval is the end state an "approve" member names; Parse has made
// sure it is there.
func approval(approve *bool) string {
	if approve != nil && *approve {
		return HandshakeApproved
	}
	return HandshakeRejected
}

// The families of handshakes. A family's answers look for their request
// among the family's handshakes only.
const (
	familyTask     = "task"
	familyCredit   = "credit"
	familyMentor   = "mentor"
	familyShutdown = "shutdown"
	familyPlan     = "plan"
)

// Handshake returns the handshake opened by the event at seq.
func (h *Handshakes) Handshake(seq uint64) (Handshake, bool) {
	q, ok := h.book.bySeq[seq]
	if !ok {
		return Handshake{}, false
	}
	return *q, true
}

// EndedBy returns the handshake that e, the event being applied, ended as
// its answer or its requester's withdrawal, if it ended one: the folds
// after the tracker learn from it what e answered.
func (h *Handshakes) EndedBy(e *Event) (Handshake, bool) {
	if e.ID == "" || e.ID != h.book.endedByID {
		return Handshake{}, false
	}
	q, ok := h.book.bySeq[h.book.endedBySeq]
	if !ok {
		return Handshake{}, false // let go at once: HandshakesEndedMax of 0
	}
	return *q, true
}

// Pending is how many handshakes are pending, as of the last event
// applied; safe to call without the runner's lock.
func (h *Handshakes) Pending() int64 { return h.pendingNow.Load() }

// Counts returns the running totals and how many handshakes are pending.
func (h *Handshakes) Counts() (HandshakeCounts, int) {
	c := h.book.counts
	c.Ended = maps.Clone(c.Ended)
	c.Unmatched = maps.Clone(c.Unmatched)
	return c, h.book.pending
}
