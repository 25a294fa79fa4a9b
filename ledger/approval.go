package ledger

import (
	"strings"
	"time"

	"github.com/aglx/ledger/protocol"
	"github.com/cockroachdb/apd/v3"
)

// approve applies a credit.approve from the approver (FROM) to the
// requester (TO): approved_amount is held on the approver until expires,
// so that the transfer that later carries the same transaction_id is sure
// to be covered (see transfer). 402 if the approver's available balance
// does not cover the hold.
//
// The transaction_id is the idempotency key, shared with transfers: sent
// again with the same content (approver, requester, amount by value, and
// expires as an instant or absent both times) the approval gets its first
// reply; otherwise 409.
func (l *Ledger) approve(e *Event, p *protocol.CreditApprove) Outcome {
	if o := l.checkSender(e); o != nil {
		return *o
	}
	if why := checkAmount("approved_amount", p.ApprovedAmount, positive); why != "" {
		return refuse(protocol.StatusBadRequest, "%s", why)
	}
	if why := checkID("transaction_id", p.TransactionID); why != "" {
		return refuse(protocol.StatusBadRequest, "%s", why)
	}
	pt, why := l.resolve(e)
	if why != "" {
		return refuse(protocol.StatusBadRequest, "%s", why)
	}
	expires, given := e.Time.Add(ApprovalHoldTTL), !p.Expires.IsZero()
	if given {
		expires = p.Expires.Time
	}
	amount := mustFixed(p.ApprovedAmount.Decimal())
	// A resend gets its first reply even if its expiry has passed since.
	txHash := l.txs.hash(p.TransactionID)
	switch ref, found := l.findTx(p.TransactionID, txHash); {
	case ref.hold != 0:
		return l.repeatApproval(e, ref.hold-1, amount, expires, given)
	case found:
		return refuse(protocol.StatusConflict, "transaction_id %s names a booked transaction, not an approval", quoteURI(p.TransactionID))
	}
	switch {
	case given && !expires.After(e.Time):
		return refuse(protocol.StatusBadRequest, "field %q is %s, not after %s when the node received the approval", "expires", p.Expires, e.Time.UTC().Format(time.RFC3339Nano))
	case given && expires.Sub(e.Time) > HoldTTLMax:
		return refuse(protocol.StatusBadRequest, "field %q is %s, more than %s after the node received the approval", "expires", p.Expires, HoldTTLMax)
	}
	h := hold{kind: holdApproval, amount: amount, expires: unixNano(expires), defaultExpiry: !given}
	i, o := l.place(e, pt, h, holdText{party: e.To, txID: p.TransactionID})
	if o != nil {
		return *o
	}
	l.txs.insert(txHash, i+1, true)
	l.requests.resolve(e, requestApproved, p.ApprovedAmount.Decimal(), p.TransactionID)
	return l.placed(i)
}

// repeatApproval answers a credit.approve whose transaction_id already
// names approval hold i.
func (l *Ledger) repeatApproval(e *Event, i uint32, amount fixed, expires time.Time, given bool) Outcome {
	h := l.holds.get(i)
	holder, party := l.uri(h.account), l.strs.get(h.party)
	same := holder == e.From && party == e.To && cmpFixed(h.amount, amount) == 0 &&
		given == !h.defaultExpiry && (!given || time.Unix(0, h.expires).Equal(expires))
	if !same {
		return refuse(protocol.StatusConflict, "transaction_id %s was approved at seq %d for %s from %s to %s; a message with the same key must have the same content",
			quoteURI(l.strs.get(h.txID)), h.seq, h.amount.text(), quoteURI(holder), quoteURI(party))
	}
	o := l.placed(i)
	o.Replayed = true
	return o
}

// placed is the reply to the message that placed hold i: the holder's
// figures right after.
func (l *Ledger) placed(i uint32) Outcome {
	h := l.holds.get(i)
	return Outcome{
		Status:        protocol.StatusOK,
		TransactionID: l.strs.get(h.txID),
		Account:       l.uri(h.account),
		Balance:       amountOfFixed(h.balance),
		Available:     l.availableOf(h.balance, h.pending),
	}
}

// request records a credit.request from the requester (FROM) to the one
// asked (TO). No money moves; the record stays open until a credit.approve
// or credit.deny between the two answers it.
func (l *Ledger) request(e *Event, p *protocol.CreditRequest) Outcome {
	if o := l.checkSender(e); o != nil {
		return *o
	}
	if why := checkAmount("requested_amount", p.RequestedAmount, positive); why != "" {
		return refuse(protocol.StatusBadRequest, "%s", why)
	}
	if p.TaskID != "" {
		if why := checkID("task_id", p.TaskID); why != "" {
			return refuse(protocol.StatusBadRequest, "%s", why)
		}
	}
	if _, why := l.resolve(e); why != "" {
		return refuse(protocol.StatusBadRequest, "%s", why)
	}
	if l.takenBefore(e) {
		return Outcome{Status: protocol.StatusOK, Replayed: true}
	}
	if len(l.requests.byPair[e.From+" "+e.To]) >= requestsOpenMax {
		return refuse(protocol.StatusTooManyRequests, "%s has %d requests open with %s; wait for answers, then sign the request again (a signed message refused once is refused again, unchanged)", quoteURI(e.From), requestsOpenMax, quoteURI(e.To))
	}
	l.requests.open(e, p.RequestedAmount.Decimal(), p.TaskID)
	l.take(e)
	return Outcome{Status: protocol.StatusOK}
}

// takenBefore reports whether a signed message with e's signed content was
// taken already (Ledger.signed); take records e as taken.
func (l *Ledger) takenBefore(e *Event) bool {
	name := signedName(e)
	return name != "" && l.signed.find(&l.strs, name) != nil
}

func (l *Ledger) take(e *Event) {
	if name := signedName(e); name != "" {
		lo, hi := splitSeq(e.Seq)
		l.signed.insert(&l.strs, name, lo, hi)
	}
}

// splitSeq keeps an event's sequence in a key record's a and b, low half
// first; joinSeq reads it back.
func splitSeq(seq uint64) (lo, hi uint32) { return uint32(seq), uint32(seq >> 32) }

func joinSeq(lo, hi uint32) uint64 { return uint64(hi)<<32 | uint64(lo) }

// deny records a credit.deny from the one asked (FROM) to the requester
// (TO). It closes their oldest open request for the same amount, or else
// their oldest open request; with none open it is recorded on its own.
// No money moves.
func (l *Ledger) deny(e *Event, p *protocol.CreditDeny) Outcome {
	if o := l.checkSender(e); o != nil {
		return *o
	}
	if why := checkAmount("requested_amount", p.RequestedAmount, positive); why != "" {
		return refuse(protocol.StatusBadRequest, "%s", why)
	}
	if _, why := l.resolve(e); why != "" {
		return refuse(protocol.StatusBadRequest, "%s", why)
	}
	if l.takenBefore(e) {
		return Outcome{Status: protocol.StatusOK, Replayed: true}
	}
	l.requests.resolve(e, requestDenied, p.RequestedAmount.Decimal(), "")
	l.take(e)
	return Outcome{Status: protocol.StatusOK}
}

// requestsOpenMax bounds the open requests of one requester to one
// approver, and so the work of matching an answer to them.
const requestsOpenMax = 100 // requests

// Request states.
const (
	requestOpen     = "open"
	requestApproved = "approved"
	requestDenied   = "denied"
)

// Request is the record of a credit.request and its answer, as the HTTP
// API and Snapshot show it. A credit.deny that answered no open request
// has a record of its own, with the deny's event as both ends. The fields
// are in the order of their JSON names.
type Request struct {
	// Amount is the requested_amount.
	Amount   protocol.Amount `json:"amount"`
	Approver string          `json:"approver"`
	EventID  string          `json:"event_id"`
	// Requester asked; Approver was asked.
	Requester string `json:"requester"`
	// ResolvedBy and ResolvedSeq name the credit.approve or credit.deny
	// that answered; empty and 0 while open.
	ResolvedBy  string `json:"resolved_by"`
	ResolvedSeq uint64 `json:"resolved_seq"`
	Seq         uint64 `json:"seq"`
	// State is open, approved or denied.
	State  string    `json:"state"`
	TaskID string    `json:"task_id"`
	Time   time.Time `json:"time"`
	// TransactionID is the approval's, once approved.
	TransactionID string `json:"transaction_id"`
}

// requestLog keeps every request record, and the open ones by pair.
type requestLog struct {
	all []Request
	// byPair maps "REQUESTER APPROVER" to the indices of that pair's open
	// requests, oldest first.
	byPair map[string][]int
}

func newRequestLog() requestLog { return requestLog{byPair: make(map[string][]int)} }

func (r *requestLog) open(e *Event, amount *apd.Decimal, taskID string) {
	r.all = append(r.all, Request{
		Amount:    amountOf(amount),
		Approver:  strings.Clone(e.To),
		EventID:   strings.Clone(e.EventID),
		Requester: strings.Clone(e.From),
		Seq:       e.Seq,
		State:     requestOpen,
		TaskID:    strings.Clone(taskID),
		Time:      timeOf(unixNano(e.Time)),
	})
	key := e.From + " " + e.To
	r.byPair[key] = append(r.byPair[key], len(r.all)-1)
}

// resolve closes an open request of the pair answered by e (FROM is the
// approver, TO the requester): preferably the oldest for the same amount,
// else the oldest. A denial with nothing to close is recorded on its own;
// an approval with nothing to close stands on its hold alone.
func (r *requestLog) resolve(e *Event, state string, amount *apd.Decimal, txID string) {
	key := e.To + " " + e.From
	open := r.byPair[key]
	k := 0
	for j, i := range open {
		if sameValue(r.all[i].Amount.Decimal(), amount) {
			k = j
			break
		}
	}
	if len(open) == 0 {
		if state == requestDenied {
			r.all = append(r.all, Request{
				Amount:    amountOf(amount),
				Approver:  strings.Clone(e.From),
				EventID:   strings.Clone(e.EventID),
				Requester: strings.Clone(e.To),
				Seq:       e.Seq,
				Time:      timeOf(unixNano(e.Time)),
			})
			r.close(len(r.all)-1, e, state, txID)
		}
		return
	}
	r.close(open[k], e, state, txID)
	open = append(open[:k], open[k+1:]...)
	if len(open) == 0 {
		delete(r.byPair, key)
	} else {
		r.byPair[key] = open
	}
}

func (r *requestLog) close(i int, e *Event, state, txID string) {
	q := &r.all[i]
	q.State, q.ResolvedBy, q.ResolvedSeq, q.TransactionID = state, strings.Clone(e.EventID), e.Seq, strings.Clone(txID)
}

// Requests returns up to limit request records made after afterSeq, oldest
// first. limit is capped at EntriesLimitMax.
func (l *Ledger) Requests(afterSeq uint64, limit int) []Request {
	return page(l.requests.all, func(q *Request) uint64 { return q.Seq }, afterSeq, limit)
}
