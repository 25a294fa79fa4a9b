package projections

import (
	"container/heap"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aglx/ledger/protocol"
	"github.com/cockroachdb/apd/v3"
)

// handshakeBook holds the handshakes and the indexes answers find them by.
// Every index is a pure function of the events applied, so a replay builds
// the same book.
type handshakeBook struct {
	bySeq map[uint64]*Handshake
	// order lists the seqs of kept handshakes, ascending, for paging; a
	// seq whose handshake was let go stays until the next compaction.
	order []uint64
	// byKey finds a keyed handshake by family, requester (and responder,
	// for shutdown and plan: nameKey) and name (a task's event id too) to
	// its seq. Entries go with their handshake.
	byKey map[string]uint64
	// byPair lists the pending handshakes of a family from a requester to a
	// responder, oldest first: the per-pair bound, and what pair answers
	// match.
	byPair map[string][]uint64
	// byMessage finds a kept handshake by its request frame's ID or its
	// event id, for an answer that names it in IN-REPLY-TO.
	byMessage map[string]uint64
	// ended lists the ended handshakes in the order they ended; the oldest
	// are let go past HandshakesEndedMax. endedHead is the first kept.
	ended     []uint64
	endedHead int
	deadlines deadlineHeap
	pending   int
	// unsigned counts the pending handshakes whose request was not signed
	// (HandshakesUnsignedMax).
	unsigned int
	// byRequester counts each requester's pending handshakes.
	byRequester map[string]int
	// auth says whether a request's signature held, and, if it is a
	// keyHolder, whether its sender has a key (the registry).
	auth Authenticator
	// copies holds the signed requests opened lately, for open.
	copies signedCopies
	// answerCopies holds the signed answers and cancellations applied
	// lately (signedCopy), so that a copy of one ends nothing. A retry is
	// a request, and its copies are found in copies.
	answerCopies signedCopies
	// lastSeq is the highest seq applied: an event at or below it was
	// applied already (a log read twice) and is skipped.
	lastSeq uint64
	// now is the log's clock: the latest receive time applied. It never
	// goes back, although frames reach the log slightly out of receive
	// order.
	now    time.Time
	counts HandshakeCounts
	// endedByID is the id of the last event that ended a handshake as its
	// answer, and endedBySeq that handshake, for EndedBy.
	endedByID  string
	endedBySeq uint64
}

func newHandshakeBook() handshakeBook {
	return handshakeBook{
		bySeq: map[uint64]*Handshake{}, byKey: map[string]uint64{}, byPair: map[string][]uint64{}, byMessage: map[string]uint64{},
		byRequester: map[string]int{},
		counts:      HandshakeCounts{Ended: map[string]uint64{}, Unmatched: map[string]uint64{}},
	}
}

func indexKey(parts ...string) string { return strings.Join(parts, "\x00") }

// keyedByPair says whether a family's keys are the requester's per
// responder: a lead may send the same request_id to every teammate. A
// task's key is the owner's alone, since a retry may go to another worker.
func keyedByPair(family string) bool { return family == familyShutdown || family == familyPlan }

// nameKey is the byKey entry for a handshake of family that requester
// opened with responder under name.
func nameKey(family, requester, responder, name string) string {
	if keyedByPair(family) {
		return indexKey(family, requester, responder, name)
	}
	return indexKey(family, requester, name)
}

// advance moves the clock to t and expires the pending handshakes whose
// deadline is before it, at most HandshakesExpiryMax of them: whoever
// sends requests chooses when they expire, and expiring a quarter of a
// million in one event would hold the fold for a second. The rest expire
// with the events that follow, so a replay expires each at the same place.
func (b *handshakeBook) advance(t time.Time) {
	if t.After(b.now) {
		b.now = t.UTC()
	}
	b.copies.expire(b.now)
	b.answerCopies.expire(b.now)
	for n := 0; n < HandshakesExpiryMax && len(b.deadlines) > 0 && b.deadlines[0].Deadline.Before(b.now); n++ {
		b.close(b.deadlines[0], HandshakeExpired, "", "", 0, "")
	}
}

// open starts a handshake for the request e. key names it for keyed
// families, alias is a second name (a task.assign's event id), amount a
// credit request's.
func (b *handshakeBook) open(e *Event, family, key, alias string, ttl time.Duration, attempt int64, amount *apd.Decimal) {
	requester, responder := e.From, e.To
	signed := b.auth != nil && b.auth.Authenticate(e).Auth == AuthValid
	if requester == "" || responder == "" || requester == responder || !signed && b.keyed(e) {
		// A keyed agent's requests are its signed ones: unsigned requests
		// in its name could be anyone's, and would fill its slots
		// (helper-78).
		b.counts.Untracked++
		return
	}
	if signed {
		// A signed request sent again, byte for byte, still verifies while
		// its timestamp is in the window; whoever holds a copy (its
		// addressee, a reader of the log) could fill the requester's slots
		// with it (helper-79). Only the first opens a handshake. It is
		// remembered whether or not it opens one: a task.retry that
		// cancelled its task's handshake and opened none (its pair full)
		// was not, and a copy of it, sent by whoever held one, cancelled
		// the task's next handshake in the owner's name (helper-137).
		copyKey := replayKey(e)
		if b.copies.seen(copyKey) {
			b.counts.Repeated++
			return
		}
		b.copies.add(copyKey, b.now.Add(signedCopyWindow))
	}
	if q := b.find(family, requester, responder, key); q != nil && q.State == HandshakePending {
		if !q.Deadline.Before(b.now) {
			b.counts.Repeated++
			return
		}
		// Past its deadline, not yet reached by the expiry bound: it
		// expires first, as answers, cancels and retries do, so that
		// whether a request under its key is tracked does not hang on how
		// many strangers' handshakes fell due at once (helper-137).
		b.close(q, HandshakeExpired, "", "", 0, "")
	}
	pair := indexKey(family, requester, responder)
	// So do the pair's other overdue requests, before its bound is
	// judged (at most HandshakesPairMax).
	b.expirePair(pair)
	if b.pending >= HandshakesPendingMax || len(b.byPair[pair]) >= HandshakesPairMax || b.byRequester[requester] >= HandshakesRequesterMax ||
		!signed && b.unsigned >= HandshakesUnsignedMax {
		b.counts.Untracked++
		return
	}
	opened := b.now
	q := &Handshake{
		Attempt: attempt, Deadline: opened.Add(ttl), Key: strings.Clone(key), Kind: e.Type,
		MessageID: strings.Clone(e.Header(protocol.HeaderID)), Opened: opened,
		RequestEvent: strings.Clone(e.ID), Requester: strings.Clone(requester), Responder: strings.Clone(responder),
		Seq: e.Seq, Signed: signed, State: HandshakePending, pair: pair,
	}
	if amount != nil {
		q.amount = new(apd.Decimal).Set(amount)
		q.Amount = amount.Text('f')
	}
	b.bySeq[e.Seq] = q
	b.order = append(b.order, e.Seq)
	for _, name := range []string{key, alias} {
		if name != "" {
			k := nameKey(family, requester, responder, name)
			b.byKey[k] = e.Seq
			q.names = append(q.names, k)
		}
	}
	// An answer's IN-REPLY-TO may name the request frame's ID or the
	// event id the node gave it.
	for _, id := range []string{q.MessageID, q.RequestEvent} {
		if id != "" {
			k := indexKey(family, requester, responder, id)
			b.byMessage[k] = e.Seq
			q.names = append(q.names, "\x01"+k)
		}
	}
	b.byPair[pair] = append(b.byPair[pair], e.Seq)
	b.byRequester[q.Requester]++
	heap.Push(&b.deadlines, q)
	b.pending++
	if !signed {
		b.unsigned++
	}
	b.counts.Opened++
}

// authentic reports whether e may speak for its sender: the sender has no
// key (then its name is anyone's, as everywhere for unsigned messages), or
// e's signature verified with it. An answer, a cancellation or a retry in
// a keyed agent's name that is not signed ends nothing: the signature
// policy does not require mentor, shutdown and plan answers or task.retry
// signed, so anyone could otherwise close a handshake in that agent's
// name, and a forged mentor.feedback would end the mentee's request
// before the mentor's signed one came, which then moved no reputation.
func (b *handshakeBook) authentic(e *Event) bool {
	if !b.keyed(e) {
		return true
	}
	v := b.auth.Authenticate(e).Auth
	return v == AuthValid || v == AuthNode
}

// keyed reports whether e's sender had a key bound when e was sent.
func (b *handshakeBook) keyed(e *Event) bool {
	k, ok := b.auth.(keyHolder)
	return ok && k.HasKey(e.From, e.Seq)
}

// find returns the kept handshake of family that requester opened with
// responder under name.
func (b *handshakeBook) find(family, requester, responder, name string) *Handshake {
	if name == "" {
		return nil
	}
	seq, ok := b.byKey[nameKey(family, requester, responder, name)]
	if !ok {
		return nil
	}
	return b.bySeq[seq]
}

// answerKeyed ends the handshake an answer names by key: the answer goes
// from the responder (FROM) to the requester (TO).
func (b *handshakeBook) answerKeyed(e *Event, family, key, state, detail string) {
	b.answer(e, b.find(family, e.To, e.From, key), state, detail)
}

// answerPair ends the handshake an answer names by IN-REPLY-TO; without
// one, the oldest pending one of its pair, and for credit preferably the
// oldest for the same amount, as the ledger matches its requests. An
// IN-REPLY-TO that names no request the tracker keeps ends nothing: the
// sender said which request it answers, and guessing another would end a
// request it did not answer.
func (b *handshakeBook) answerPair(e *Event, family, state, detail string, amount *apd.Decimal) {
	requester, responder := e.To, e.From
	if id := e.Header(protocol.HeaderInReplyTo); id != "" {
		var q *Handshake
		if seq, ok := b.byMessage[indexKey(family, requester, responder, id)]; ok {
			q = b.bySeq[seq]
		}
		b.answer(e, q, state, detail)
		return
	}
	pair := indexKey(family, requester, responder)
	// The pair's requests past their deadline that the expiry bound has
	// not reached yet expire first, as they would have with fewer others
	// due: the oldest of the pair was taken even when overdue, and the
	// answer counted late while the pair's live request stayed pending,
	// so what an answer ended hung on how many strangers' handshakes fell
	// due at once (helper-96).
	b.expirePair(pair)
	open := b.byPair[pair]
	if len(open) == 0 {
		b.answer(e, nil, state, detail)
		return
	}
	pick := open[0]
	if amount != nil {
		for _, seq := range open {
			if a := b.bySeq[seq].amount; a != nil && a.Cmp(amount) == 0 {
				pick = seq
				break
			}
		}
	}
	b.answer(e, b.bySeq[pick], state, detail)
}

// expirePair closes the pair's pending requests past their deadline that
// the expiry bound (HandshakesExpiryMax) has not reached yet. At most
// HandshakesPairMax.
func (b *handshakeBook) expirePair(pair string) {
	var due []*Handshake
	for _, seq := range b.byPair[pair] {
		if q := b.bySeq[seq]; q.Deadline.Before(b.now) {
			due = append(due, q)
		}
	}
	for _, q := range due {
		b.close(q, HandshakeExpired, "", "", 0, "")
	}
}

// cancel ends a keyed handshake at its requester's word.
func (b *handshakeBook) cancel(e *Event, family, key, reason string) {
	if !b.authentic(e) {
		b.counts.Unauthenticated++
		return
	}
	if b.signedCopy(e) {
		b.counts.Repeated++
		return
	}
	q := b.find(family, e.From, e.To, key)
	if q == nil || q.Responder != e.To {
		b.counts.Unmatched[e.Type]++
		return
	}
	if q.State == HandshakePending && q.Deadline.Before(b.now) {
		b.close(q, HandshakeExpired, "", "", 0, "")
	}
	if q.State != HandshakePending {
		b.counts.Late++
		return
	}
	b.end(q, e, HandshakeCancelled, reason)
}

// answer ends q, which e answers, if the responder sent e and q is
// pending; otherwise it counts e. A handshake past its deadline that the
// expiry bound has not reached yet (HandshakesExpiryMax) expires here,
// and the answer is late, as it would have been had it come later still.
func (b *handshakeBook) answer(e *Event, q *Handshake, state, detail string) {
	switch {
	case !b.authentic(e):
		b.counts.Unauthenticated++
	case b.signedCopy(e):
		b.counts.Repeated++
	case q == nil || q.Responder != e.From:
		b.counts.Unmatched[e.Type]++
	case q.State == HandshakePending && q.Deadline.Before(b.now):
		b.close(q, HandshakeExpired, "", "", 0, "")
		b.counts.Late++
	case q.State != HandshakePending:
		b.counts.Late++
	default:
		b.end(q, e, state, detail)
	}
}

// signedCopy reports whether e, a signed answer or cancellation, is a
// copy of one applied within its signature window, and remembers it if
// not. A signed message sent again byte for byte still verifies in the
// window, and its ID and IN-REPLY-TO are not signed: whoever held a copy
// of a mentor's feedback (the mentee it was relayed to, any reader of the
// log) could send it again, aimed at the mentee's next request, end that
// request in the mentor's name, and leave the mentor's real answer to it
// matching nothing, its rating lost (helper-96). So the first of identical
// signed answers counts and the rest end nothing; a mentor answering two
// requests with the same words in the same second must vary them (or name
// each request in IN-REPLY-TO with bodies that differ). Unsigned messages
// are anyone's to forge anyway (authentic decides whether they count).
func (b *handshakeBook) signedCopy(e *Event) bool {
	if b.auth == nil {
		return false
	}
	if v := b.auth.Authenticate(e).Auth; v != AuthValid && v != AuthNode {
		return false
	}
	k := replayKey(e)
	if b.answerCopies.seen(k) {
		return true
	}
	b.answerCopies.add(k, b.now.Add(signedCopyWindow))
	return false
}

// end closes q with e as its answer.
func (b *handshakeBook) end(q *Handshake, e *Event, state, detail string) {
	b.close(q, state, e.Type, e.ID, e.Seq, detail)
	b.endedByID, b.endedBySeq = e.ID, q.Seq
}

func (b *handshakeBook) close(q *Handshake, state, answer, answerEvent string, answerSeq uint64, detail string) {
	open := b.byPair[q.pair]
	for i, seq := range open {
		if seq == q.Seq {
			open = append(open[:i], open[i+1:]...)
			break
		}
	}
	if len(open) == 0 {
		delete(b.byPair, q.pair)
	} else {
		b.byPair[q.pair] = open
	}
	if b.byRequester[q.Requester]--; b.byRequester[q.Requester] <= 0 {
		delete(b.byRequester, q.Requester)
	}
	heap.Remove(&b.deadlines, q.heapIndex)
	q.State, q.Answer, q.AnswerEvent, q.AnswerSeq = state, answer, strings.Clone(answerEvent), answerSeq
	q.Detail, q.Ended, q.amount = clip(detail, HandshakeDetailMax), b.now, nil
	b.pending--
	if !q.Signed {
		b.unsigned--
	}
	b.counts.Ended[state]++
	b.ended = append(b.ended, q.Seq)
	if len(b.ended)-b.endedHead > HandshakesEndedMax {
		b.letGo(b.bySeq[b.ended[b.endedHead]])
		b.endedHead++
		if b.endedHead > HandshakesEndedMax {
			b.ended = append(b.ended[:0], b.ended[b.endedHead:]...)
			b.endedHead = 0
		}
	}
}

// letGo forgets an ended handshake, and its names with it.
func (b *handshakeBook) letGo(q *Handshake) {
	delete(b.bySeq, q.Seq)
	for _, k := range q.names {
		index := b.byKey
		if strings.HasPrefix(k, "\x01") {
			index, k = b.byMessage, k[1:]
		}
		if index[k] == q.Seq {
			delete(index, k)
		}
	}
	if len(b.order) > 2*len(b.bySeq)+1024 {
		kept := b.order[:0]
		for _, seq := range b.order {
			if _, ok := b.bySeq[seq]; ok {
				kept = append(kept, seq)
			}
		}
		b.order = kept
	}
}

// clip cuts s to at most n bytes, at a character boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return strings.Clone(s)
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return strings.Clone(s[:n])
}

// deadlineHeap holds the pending handshakes by deadline, then by seq, so
// that a replay expires them in the same order. A handshake leaves it when
// it ends, so it holds no more than HandshakesPendingMax.
type deadlineHeap []*Handshake

func (h deadlineHeap) Len() int { return len(h) }
func (h deadlineHeap) Less(i, j int) bool {
	if c := h[i].Deadline.Compare(h[j].Deadline); c != 0 {
		return c < 0
	}
	return h[i].Seq < h[j].Seq
}
func (h deadlineHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIndex, h[j].heapIndex = i, j
}
func (h *deadlineHeap) Push(x any) {
	q := x.(*Handshake)
	q.heapIndex = len(*h)
	*h = append(*h, q)
}
func (h *deadlineHeap) Pop() any {
	old := *h
	q := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	q.heapIndex = -1
	return q
}

// signedCopyWindow is how long, in event time, a signed request is
// remembered: a copy verifies while its timestamp is within the signature
// window of its arrival, and the window is at most signatureWindowMax
// either side, so a copy arriving two windows after the first no longer
// verifies, whatever the node's configuration.
const signedCopyWindow = 2 * signatureWindowMax

// SignedCopiesMax bounds the signed requests remembered, and apart from
// them the signed answers; past it the oldest are forgotten early, and a
// copy of one of them could open or end a handshake again.
const SignedCopiesMax = 100_000 // messages, in each of the two

// signedCopies remembers the signed requests opened lately, by their
// replay key, until their copies can no longer verify.
type signedCopies struct {
	until map[string]time.Time
	queue []signedCopy // in the order added, which is until's order: the clock never goes back
	head  int
}

type signedCopy struct {
	key   string
	until time.Time
}

func (c *signedCopies) seen(key string) bool {
	_, ok := c.until[key]
	return ok
}

func (c *signedCopies) add(key string, until time.Time) {
	if c.until == nil {
		c.until = map[string]time.Time{}
	}
	c.until[key] = until
	c.queue = append(c.queue, signedCopy{key, until})
	for len(c.queue)-c.head > SignedCopiesMax {
		c.drop()
	}
}

// expire forgets what can no longer be copied: the entries at the front
// of the queue whose time has passed.
func (c *signedCopies) expire(now time.Time) {
	for c.head < len(c.queue) && c.queue[c.head].until.Before(now) {
		c.drop()
	}
}

func (c *signedCopies) drop() {
	e := c.queue[c.head]
	if c.until[e.key].Equal(e.until) {
		delete(c.until, e.key)
	}
	c.queue[c.head] = signedCopy{}
	c.head++
	if c.head > len(c.queue)/2 && c.head > 1024 {
		c.queue = append(c.queue[:0], c.queue[c.head:]...)
		c.head = 0
	}
}
