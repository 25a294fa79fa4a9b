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
	// byKey finds a keyed handshake: family, requester and key (a task's
	// event id too) to its seq. Entries go with their handshake.
	byKey map[string]uint64
	// byPair lists the pending handshakes of a family from a requester to a
	// responder, oldest first: the per-pair bound, and what pair answers
	// match.
	byPair map[string][]uint64
	// byMessage finds a pending handshake by its request frame's ID, for
	// an answer that names it in IN-REPLY-TO.
	byMessage map[string]uint64
	// ended lists the ended handshakes in the order they ended; the oldest
	// are let go past HandshakesEndedMax. endedHead is the first kept.
	ended     []uint64
	endedHead int
	deadlines deadlineHeap
	pending   int
	// now is the log's clock: the latest receive time applied. It never
	// goes back, although frames reach the log slightly out of receive
	// order.
	now    time.Time
	counts HandshakeCounts
}

func newHandshakeBook() handshakeBook {
	return handshakeBook{
		bySeq: map[uint64]*Handshake{}, byKey: map[string]uint64{}, byPair: map[string][]uint64{}, byMessage: map[string]uint64{},
		counts: HandshakeCounts{Ended: map[string]uint64{}, Unmatched: map[string]uint64{}},
	}
}

func indexKey(parts ...string) string { return strings.Join(parts, "\x00") }

// advance moves the clock to t and expires every pending handshake whose
// deadline is before it.
func (b *handshakeBook) advance(t time.Time) {
	if !t.After(b.now) {
		return
	}
	b.now = t.UTC()
	for len(b.deadlines) > 0 && b.deadlines[0].Deadline.Before(b.now) {
		b.close(b.deadlines[0], HandshakeExpired, "", "", 0, "")
	}
}

// open starts a handshake for the request e. key names it for keyed
// families, alias is a second name (a task.assign's event id), amount a
// credit request's.
func (b *handshakeBook) open(e *Event, family, key, alias string, ttl time.Duration, attempt int64, amount *apd.Decimal) {
	requester, responder := e.From, e.To
	if requester == "" || responder == "" || requester == responder {
		b.counts.Untracked++
		return
	}
	if key != "" {
		if q := b.find(family, requester, key); q != nil && q.State == HandshakePending {
			b.counts.Repeated++
			return
		}
	}
	pair := indexKey(family, requester, responder)
	if b.pending >= HandshakesPendingMax || len(b.byPair[pair]) >= HandshakesPairMax {
		b.counts.Untracked++
		return
	}
	opened := b.now
	q := &Handshake{
		Attempt: attempt, Deadline: opened.Add(ttl), Key: strings.Clone(key), Kind: e.Type,
		MessageID: strings.Clone(e.Header(protocol.HeaderID)), Opened: opened,
		RequestEvent: strings.Clone(e.ID), Requester: strings.Clone(requester), Responder: strings.Clone(responder),
		Seq: e.Seq, State: HandshakePending,
	}
	if amount != nil {
		q.amount = new(apd.Decimal).Set(amount)
		q.Amount = amount.Text('f')
	}
	if _, dup := b.bySeq[e.Seq]; dup {
		return // a log read twice; never for the node's own
	}
	b.bySeq[e.Seq] = q
	b.order = append(b.order, e.Seq)
	if key != "" {
		b.byKey[indexKey(family, requester, key)] = e.Seq
	}
	if alias != "" && alias != key {
		b.byKey[indexKey(family, requester, alias)] = e.Seq
	}
	b.byPair[pair] = append(b.byPair[pair], e.Seq)
	if q.MessageID != "" {
		b.byMessage[indexKey(family, requester, q.MessageID)] = e.Seq
	}
	heap.Push(&b.deadlines, q)
	b.pending++
	b.counts.Opened++
}

// find returns the kept handshake of family that requester named key.
func (b *handshakeBook) find(family, requester, key string) *Handshake {
	if key == "" {
		return nil
	}
	seq, ok := b.byKey[indexKey(family, requester, key)]
	if !ok {
		return nil
	}
	return b.bySeq[seq]
}

// answerKeyed ends the handshake an answer names by key: the answer goes
// from the responder (FROM) to the requester (TO).
func (b *handshakeBook) answerKeyed(e *Event, family, key, state, detail string) {
	q := b.find(family, e.To, key)
	b.answer(e, q, state, detail)
}

// answerPair ends the handshake an answer names by IN-REPLY-TO, or else
// the oldest pending one of its pair; for credit, preferably the oldest
// for the same amount, as the ledger matches its requests.
func (b *handshakeBook) answerPair(e *Event, family, state, detail string, amount *apd.Decimal) {
	requester, responder := e.To, e.From
	if id := e.Header(protocol.HeaderInReplyTo); id != "" {
		if seq, ok := b.byMessage[indexKey(family, requester, id)]; ok {
			if q := b.bySeq[seq]; q != nil && q.Responder == responder {
				b.answer(e, q, state, detail)
				return
			}
		}
	}
	open := b.byPair[indexKey(family, requester, responder)]
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

// cancel ends a keyed handshake at its requester's word.
func (b *handshakeBook) cancel(e *Event, family, key, reason string) {
	q := b.find(family, e.From, key)
	if q == nil || q.Responder != e.To {
		b.counts.Unmatched[e.Type]++
		return
	}
	if q.State != HandshakePending {
		b.counts.Late++
		return
	}
	b.end(q, e, HandshakeCancelled, reason)
}

// answer ends q, which e answers, if the responder sent e and q is
// pending; otherwise it counts e.
func (b *handshakeBook) answer(e *Event, q *Handshake, state, detail string) {
	switch {
	case q == nil || q.Responder != e.From:
		b.counts.Unmatched[e.Type]++
	case q.State != HandshakePending:
		b.counts.Late++
	default:
		b.end(q, e, state, detail)
	}
}

// end closes q with e as its answer.
func (b *handshakeBook) end(q *Handshake, e *Event, state, detail string) {
	b.close(q, state, e.Type, e.ID, e.Seq, detail)
}

func (b *handshakeBook) close(q *Handshake, state, answer, answerEvent string, answerSeq uint64, detail string) {
	family := familyOf(q.Kind)
	pair := indexKey(family, q.Requester, q.Responder)
	open := b.byPair[pair]
	for i, seq := range open {
		if seq == q.Seq {
			open = append(open[:i], open[i+1:]...)
			break
		}
	}
	if len(open) == 0 {
		delete(b.byPair, pair)
	} else {
		b.byPair[pair] = open
	}
	if q.MessageID != "" {
		k := indexKey(family, q.Requester, q.MessageID)
		if b.byMessage[k] == q.Seq {
			delete(b.byMessage, k)
		}
	}
	heap.Remove(&b.deadlines, q.heapIndex)
	q.State, q.Answer, q.AnswerEvent, q.AnswerSeq = state, answer, strings.Clone(answerEvent), answerSeq
	q.Detail, q.Ended, q.amount = clip(detail, HandshakeDetailMax), b.now, nil
	b.pending--
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
	family := familyOf(q.Kind)
	for _, name := range []string{q.Key, q.RequestEvent} {
		k := indexKey(family, q.Requester, name)
		if name != "" && b.byKey[k] == q.Seq {
			delete(b.byKey, k)
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

// familyOf is the family of a request TYPE.
func familyOf(kind string) string {
	switch kind {
	case protocol.TypeTaskAssign, protocol.TypeTaskRetry:
		return familyTask
	case protocol.TypeCreditRequest:
		return familyCredit
	case protocol.TypeMentorRequest:
		return familyMentor
	case protocol.TypeShutdownRequest:
		return familyShutdown
	}
	return familyPlan
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
