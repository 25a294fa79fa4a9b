package projections

import (
	"errors"
	"slices"
	"sync"

	"github.com/aglx/ledger/protocol"
)

// OutboxMax bounds the replies the outbox holds. A reply is taken within
// moments of being made, by the connection that waits for it, and kept
// after that for a resend of the same message (the bridge answers a
// duplicate with the first reply); the oldest are dropped first. During a
// replay at start nobody waits, and the oldest replies are dropped.
const OutboxMax = 1 << 16 // replies

// OutboxBytesMax bounds the bytes the outbox's replies hold
// (replyBytes), whatever their count. Counted by replies alone, a page of
// registry.list (up to about 110 KB, for a 98-byte registry.fetch anyone
// may send) kept 65,536 times was some 7 GB, and the log replays those
// fetches at every start, with nobody waiting (helper-98). At this bound a
// flood of the largest replies keeps some 600 of them: the ones waiting
// for a connection are taken within moments, and an older one dropped
// untaken is answered 202, its outcome in the state (ErrReplyDropped).
const OutboxBytesMax = 64 << 20 // bytes

// replyOverhead is what the outbox counts for a reply besides its body
// and type: its map entry, its place in the order and the Reply itself.
const replyOverhead = 96 // bytes

// replyBytes is what r counts towards OutboxBytesMax.
func replyBytes(r Reply) int { return len(r.Body) + len(r.Type) + replyOverhead }

// RefusalsMax bounds the refusals the outbox remembers after their replies
// are dropped: the sequences of the events a projection refused, 8 bytes
// each, 8 MiB at the bound. The relay asks for them long after the reply
// went (an addressee that was down for an hour, a restart that resumes the
// relay's cursor far behind the log's end); refusals are a small part of
// the log, so this covers far more of it than the replies do.
const RefusalsMax = 1 << 20 // refusals

// Reply is the node's answer to one message, decided by a projection when
// it applied the message: a registry.ack, a credit outcome, a refusal. It
// is a deterministic function of the log, like the rest of the state, so
// nothing about it needs storing.
type Reply struct {
	Type   string // e.g. "registry.ack", "ack", "error"
	Status protocol.Status
	Body   []byte // JSON
	// FirstOnly marks a body that holds a secret for the first copy's
	// sender alone: a zone.confirm's session token. The outbox keeps every
	// reply for resends, and anyone who read the zone.join from the log
	// could send it again under its FROM and ID and be handed the token;
	// a resend gets ForResend's refusal instead.
	FirstOnly bool
	// sign, when set, signs Body as the reply is taken (Outbox.Take), not
	// as a fold decides it: an auth.response's node signature cost the
	// fold 75 µs with an Ed25519 node key and 6.5 ms with an RSA one, live
	// and again for every auth.request in the log at each start, while
	// every reply waited on the fold (helper-87). A replay answers no one,
	// and a reply nobody takes is never signed.
	sign *lazySignature
}

// lazySignature signs a reply's body once, when it is first taken, and
// keeps the result for every later take: the copies of a Reply (the
// outbox's, the registry's memory of answered requests) share it, so a
// resend, which costs its sender nothing, does not cost the node a
// signature each time (helper-89).
//
// Only a signature is kept, not a failure to make one: the failure is
// answered 503, which asks for the message again, and kept it would have
// answered every resend with the same 503 (helper-90).
//
// A saved state cannot hold fn: it holds to, the addressee the body is
// signed for, from which Registry.authResponseSignature makes fn again
// with the node's key and URI (configuration), and body if it was signed.
// The outbox and the registry are saved apart, each with its own copies;
// a load makes the copies of one reply share one lazySignature again by
// what it signs (restoredSignatures, outbox_state.go).
type lazySignature struct {
	fn   func(body []byte) ([]byte, error)
	to   string // the reply's TO, for a saved state
	mu   sync.Mutex
	body []byte // nil until signed
}

// signed is r with its body signed, if it is to be (sign).
func (r Reply) signed() Reply {
	if r.sign == nil {
		return r
	}
	ls := r.sign
	ls.mu.Lock()
	if ls.body == nil {
		b, err := ls.fn(r.Body)
		if err != nil {
			ls.mu.Unlock()
			return ErrorReply(protocol.StatusUnavailable, "the node could not sign its answer: "+err.Error())
		}
		ls.body = b
	}
	r.Body, r.sign = ls.body, nil
	ls.mu.Unlock()
	return r
}

// ForResend is the reply to a resend of the message r answered (a copy
// with the same FROM and ID inside the log's duplicate window): r itself,
// unless it is FirstOnly.
func (r Reply) ForResend() Reply {
	if !r.FirstOnly {
		return r
	}
	return ErrorReply(protocol.StatusConflict, "this message was answered before with a "+r.Type+
		" whose secret (a session token) goes to the first copy only; to get a new one, send a new zone.join with a fresh timestamp and ID (an agent with a key ends its session with a signed zone.leave first)")
}

// Outbox passes replies from the projections to the connections waiting
// for them, by sequence. Exactly one projection answers any given TYPE.
type Outbox struct {
	mu    sync.Mutex
	bySeq map[uint64]Reply
	order []uint64 // insertion order, for eviction
	bytes int      // replyBytes of what bySeq holds
	// evicted is the highest sequence whose reply was dropped untaken.
	// Replies are put in log order, so any reply at or below it that is
	// not here may have been dropped.
	evicted uint64
	// refusals holds the sequences of refused events, ascending, and
	// refusalsEvicted the highest one dropped to keep RefusalsMax: above
	// it, an event not in refusals was not refused.
	refusals        []uint64
	refusalsEvicted uint64
}

// NewOutbox returns an empty outbox.
func NewOutbox() *Outbox { return &Outbox{bySeq: map[uint64]Reply{}} }

// Put records the reply to the event at seq, unless one is there already.
func (o *Outbox) Put(seq uint64, r Reply) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.bySeq[seq]; ok {
		return
	}
	o.bySeq[seq] = r
	o.order = append(o.order, seq)
	o.bytes += replyBytes(r)
	if r.Type == protocol.TypeError {
		o.addRefusal(seq)
	}
	// The newest reply stays, however large: it is the one a connection
	// is about to take.
	for len(o.bySeq) > OutboxMax || (o.bytes > OutboxBytesMax && len(o.order) > 1) {
		oldest := o.order[0]
		o.bytes -= replyBytes(o.bySeq[oldest])
		delete(o.bySeq, oldest)
		o.evicted = max(o.evicted, oldest)
		o.order = o.order[1:]
	}
}

// Take returns the reply to the event at seq, and keeps it for a resend of
// the same message: until 2026-11-30 it removed it, the bridge answered a
// resend with a plain ack, and a transfer the ledger had refused (402) was
// answered 200 the second time. It fails with ErrReplyDropped when there
// is none but one may have been dropped to keep the bound: "no reply" must
// not be mistaken for "no reply decided", which the bridge answers with a
// plain ack, when the dropped reply was, say, a refusal.
func (o *Outbox) Take(seq uint64) (Reply, bool, error) {
	o.mu.Lock()
	r, ok := o.bySeq[seq]
	evicted := o.evicted
	o.mu.Unlock()
	if !ok && seq <= evicted {
		return Reply{}, false, ErrReplyDropped
	}
	return r.signed(), ok, nil // off the lock: a signature takes its time
}

// addRefusal records that the event at seq was refused. Replies come in
// log order, so it is appended; one out of order (never expected) is put
// in its place, so the search stays right. Past RefusalsMax the oldest
// eighth is dropped at once, which keeps the cost of dropping constant
// per refusal.
func (o *Outbox) addRefusal(seq uint64) {
	if seq <= o.refusalsEvicted {
		return // older than what the record can vouch for anyway
	}
	i, found := slices.BinarySearch(o.refusals, seq)
	if found {
		return
	}
	o.refusals = slices.Insert(o.refusals, i, seq)
	if len(o.refusals) > RefusalsMax {
		drop := len(o.refusals) - RefusalsMax + RefusalsMax/8
		o.refusalsEvicted = o.refusals[drop-1]
		o.refusals = append(o.refusals[:0], o.refusals[drop:]...)
	}
}

// Refused reports whether the node refused the event at seq (a projection
// answered it with an error), and whether the outbox knows: an event it
// has a refusal for, or one applied and newer than the last refusal it
// let go of, is known; below that, a refusal may have been dropped. The
// caller must ask only about applied events: for one not yet applied it
// answers "not refused", as no reply has been made.
func (o *Outbox) Refused(seq uint64) (refused, known bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, found := slices.BinarySearch(o.refusals, seq); found {
		return true, true
	}
	return false, seq > o.refusalsEvicted
}

// ErrReplyDropped is Take's failure for a reply the outbox may have
// dropped: more than OutboxMax newer replies, or OutboxBytesMax of them,
// came before it was taken.
var ErrReplyDropped = errors.New("projections: the reply was dropped from the outbox before it was taken; its outcome is in the state")
