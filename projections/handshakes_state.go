package projections

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/aglx/ledger/ledger/statecodec"
	"github.com/aglx/ledger/protocol"
	"github.com/cockroachdb/apd/v3"
)

// The tracker's saved state, for projection snapshots. The whole book is
// saved, including what no page shows, for it decides later outcomes: the
// guard against an event applied twice and the log's clock; every kept
// handshake with its unexported parts (a pending credit request's exact
// amount, its pair, its index names); the deadline heap in its own order;
// the names answers find handshakes by; the signed requests and answers
// remembered within their window, so that a copy is still refused after a
// restart; the totals; and what the event last applied ended (EndedBy).
// The page order and the ended list are saved as kept, with the seqs let
// go that they have not yet compacted away, and the signed copies' queue
// with its dropped head: those decide no outcome, but the restored book
// is then the same to the last field, and compacts where the saved one
// would.
//
// What follows from the handshakes themselves is rebuilt rather than read,
// so that a file cannot make it disagree with them: the pending, unsigned
// and per-requester counts, the pending lists by pair (in seq order, the
// order open appends them in and close keeps), each handshake's place in
// the heap, and pendingNow. The tracker's auth and refusers are wiring
// from NewFolds, not state: the registry and the ledger save their own.

var _ StateSaver = (*Handshakes)(nil)

// handshakeSavedMin is the fewest bytes a saved handshake takes: one for
// each of the 22 values writeHandshake writes (a string's length, a
// number, a time's length, a boolean, the names' count).
const handshakeSavedMin = 22

// signedCopiesCompactAt is the head past which signedCopies.drop compacts
// its queue (when the head is also past half of it). A saved head beyond
// both could not have been kept, so a file claiming one is refused before
// it is allocated.
const signedCopiesCompactAt = 1024

// SaveState implements StateSaver. It does not change the tracker.
func (h *Handshakes) SaveState(w *statecodec.Writer) error {
	b := &h.book
	w.Uint(b.lastSeq)
	w.Time(b.now)
	c := &b.counts
	w.Uint(c.Opened)
	writeUintsByName(w, c.Ended)
	w.Uint(c.Late)
	writeUintsByName(w, c.Unmatched)
	w.Uint(c.Untracked)
	w.Uint(c.Repeated)
	w.Uint(c.Unauthenticated)
	w.String(b.endedByID)
	w.Uint(b.endedBySeq)

	seqs := slices.Sorted(maps.Keys(b.bySeq))
	w.Len(len(seqs))
	for _, seq := range seqs {
		if q := b.bySeq[seq]; q.Seq != seq {
			return fmt.Errorf("handshakes: saving: the handshake of seq %d is filed under %d", q.Seq, seq)
		}
		writeHandshake(w, b.bySeq[seq])
	}
	writeSeqs(w, b.order)
	writeSeqs(w, b.ended)
	w.Uint(uint64(b.endedHead))
	heapSeqs := []uint64(nil)
	if b.deadlines != nil {
		heapSeqs = make([]uint64, len(b.deadlines))
		for i, q := range b.deadlines {
			heapSeqs[i] = q.Seq
		}
	}
	writeSeqs(w, heapSeqs)
	writeUintsByName(w, b.byKey)
	writeUintsByName(w, b.byMessage)
	b.copies.save(w)
	b.answerCopies.save(w)
	return nil
}

// writeHandshake writes every field of q but heapIndex, which is its place
// in the heap, written with the heap.
func writeHandshake(w *statecodec.Writer, q *Handshake) {
	w.Uint(q.Seq)
	w.String(q.Kind)
	w.String(q.State)
	w.String(q.Requester)
	w.String(q.Responder)
	w.String(q.Key)
	w.String(q.MessageID)
	w.String(q.RequestEvent)
	w.String(q.Amount)
	// The amount itself, not Amount's text: Text('f') writes 1e3 as 1000,
	// which reads back with another exponent; String's scientific form
	// reads back as it was.
	w.Bool(q.amount != nil)
	if q.amount != nil {
		w.String(q.amount.String())
	}
	w.Int(q.Attempt)
	w.Time(q.Opened)
	w.Time(q.Deadline)
	w.Bool(q.Signed)
	w.String(q.Answer)
	w.String(q.AnswerEvent)
	w.Uint(q.AnswerSeq)
	w.String(q.Detail)
	w.Time(q.Ended)
	w.String(q.pair)
	w.Bool(q.names != nil)
	w.Len(len(q.names))
	for _, k := range q.names {
		w.String(k)
	}
}

// writeSeqs writes a list of seqs, and whether it is nil: the book's lists
// start nil and are never made nil again, and a restored book must be the
// same to the last field.
func writeSeqs(w *statecodec.Writer, seqs []uint64) {
	w.Bool(seqs != nil)
	w.Len(len(seqs))
	for _, seq := range seqs {
		w.Uint(seq)
	}
}

// save writes the remembered copies: whether any were ever remembered (the
// map and the queue are made by the first add), the queue's head, and the
// entries from the head on. The entries before the head were dropped and
// are zero; the head is written so that the queue compacts where the
// saved one would have. until holds the same entries as the queue from its
// head on, so it is rebuilt from them.
func (c *signedCopies) save(w *statecodec.Writer) {
	w.Bool(c.queue != nil)
	w.Uint(uint64(c.head))
	live := c.queue[c.head:]
	w.Len(len(live))
	for _, e := range live {
		w.String(e.key)
		w.Time(e.until)
	}
}

// LoadState implements StateSaver. A book the tracker could not have kept
// is refused: one that would panic it later (a pending handshake missing
// from the heap or listed twice, an ended one missing from the book, a
// seq at or after which the guard would let an event open a handshake
// again over a kept one) or that breaks its bounds or orders.
func (h *Handshakes) LoadState(r *statecodec.Reader) error {
	b := newHandshakeBook()
	b.auth = h.book.auth
	b.lastSeq = r.Uint()
	b.now = r.Time()
	b.counts.Opened = r.Uint()
	b.counts.Ended = readUintsByName(r, "the ended counts")
	b.counts.Late = r.Uint()
	b.counts.Unmatched = readUintsByName(r, "the unmatched counts")
	b.counts.Untracked = r.Uint()
	b.counts.Repeated = r.Uint()
	b.counts.Unauthenticated = r.Uint()
	b.endedByID = r.String()
	b.endedBySeq = r.Uint()

	n := r.Len(handshakeSavedMin)
	seqs := make([]uint64, 0, n)
	for i := 0; i < n && r.Err() == nil; i++ {
		q := readHandshake(r)
		if r.Err() != nil {
			break
		}
		if i > 0 && q.Seq <= seqs[i-1] {
			stateFailf(r, "handshake %d is out of order", q.Seq)
			break
		}
		b.bySeq[q.Seq] = q
		seqs = append(seqs, q.Seq)
	}
	b.order = readSeqs(r, "the page order")
	b.ended = readSeqs(r, "the ended list")
	endedHead := r.Uint()
	heapSeqs := readSeqs(r, "the deadline heap")
	b.byKey = readUintsByName(r, "the names")
	b.byMessage = readUintsByName(r, "the message ids")
	b.copies = readSignedCopies(r, "the signed requests remembered")
	b.answerCopies = readSignedCopies(r, "the signed answers remembered")
	if r.Err() == nil {
		b.restore(r, seqs, endedHead, heapSeqs)
	}
	if err := r.Err(); err != nil {
		return fmt.Errorf("handshakes: loading the saved state: %w", err)
	}
	h.book = b
	h.pendingNow.Store(int64(b.pending))
	return nil
}

// readHandshake reads what writeHandshake wrote; heapIndex is -1 until
// restore finds it in the heap.
func readHandshake(r *statecodec.Reader) *Handshake {
	q := &Handshake{Seq: r.Uint(), Kind: r.String(), State: r.String(), Requester: r.String(), Responder: r.String(),
		Key: r.String(), MessageID: r.String(), RequestEvent: r.String(), Amount: r.String(), heapIndex: -1}
	if r.Bool() {
		q.amount = readHandshakeAmount(r)
	}
	q.Attempt = r.Int()
	q.Opened = r.Time()
	q.Deadline = r.Time()
	q.Signed = r.Bool()
	q.Answer = r.String()
	q.AnswerEvent = r.String()
	q.AnswerSeq = r.Uint()
	q.Detail = r.String()
	q.Ended = r.Time()
	q.pair = r.String()
	kept := r.Bool()
	n := r.Len(1)
	if kept {
		q.names = make([]string, 0, n)
	} else if n > 0 {
		stateFailf(r, "handshake %d has %d names in a list that is nil", q.Seq, n)
	}
	for i := 0; i < n && r.Err() == nil; i++ {
		q.names = append(q.names, r.String())
	}
	switch {
	case r.Err() != nil:
	case q.Seq == 0:
		stateFailf(r, "a handshake of seq 0, which no event in the log has")
	case !slices.Contains(handshakeStates, q.State):
		stateFailf(r, "handshake %d is in the state %q", q.Seq, q.State)
	}
	return q
}

// readHandshakeAmount reads a pending credit request's amount, within the
// bounds of a protocol.Amount as the request's was: a number without
// them (a huge exponent) would make matching an answer to it slow.
func readHandshakeAmount(r *statecodec.Reader) *apd.Decimal {
	s := r.String()
	if r.Err() != nil {
		return nil
	}
	d, _, err := apd.NewFromString(s)
	if err == nil {
		_, err = protocol.NewAmount(d)
	}
	if err != nil {
		stateFailf(r, "the amount %q: %v", s, err)
		return nil
	}
	return d
}

// readSeqs reads what writeSeqs wrote.
func readSeqs(r *statecodec.Reader, what string) []uint64 {
	kept := r.Bool()
	n := r.Len(1)
	if !kept {
		if n > 0 {
			stateFailf(r, "%s: %d seqs in a list that is nil", what, n)
		}
		return nil
	}
	seqs := make([]uint64, 0, n)
	for i := 0; i < n && r.Err() == nil; i++ {
		seqs = append(seqs, r.Uint())
	}
	return seqs
}

// readSignedCopies reads what signedCopies.save wrote, and refuses what add
// and drop could not have left: more than SignedCopiesMax entries, a key
// twice, times out of order, a head past where drop compacts.
func readSignedCopies(r *statecodec.Reader, what string) signedCopies {
	kept := r.Bool()
	head := r.Uint()
	n := r.Len(2) // a key's length and a time's: 2 bytes
	switch {
	case r.Err() != nil:
		return signedCopies{}
	case !kept && (head > 0 || n > 0):
		stateFailf(r, "%s: a head of %d and %d entries, and never any added", what, head, n)
		return signedCopies{}
	case !kept:
		return signedCopies{}
	case n > SignedCopiesMax:
		stateFailf(r, "%s: %d entries, more than %d", what, n, SignedCopiesMax)
		return signedCopies{}
	case head > uint64(max(signedCopiesCompactAt, n)):
		stateFailf(r, "%s: a head of %d, past where the queue compacts", what, head)
		return signedCopies{}
	}
	c := signedCopies{until: make(map[string]time.Time, n), queue: make([]signedCopy, int(head), int(head)+n), head: int(head)}
	for i := 0; i < n && r.Err() == nil; i++ {
		e := signedCopy{key: r.String(), until: r.Time()}
		switch {
		case r.Err() != nil:
		case c.seen(e.key):
			stateFailf(r, "%s: a key twice", what)
		case i > 0 && e.until.Before(c.queue[len(c.queue)-1].until):
			stateFailf(r, "%s: times out of order", what)
		}
		c.until[e.key] = e.until
		c.queue = append(c.queue, e)
	}
	return c
}

// restore checks the book read against itself and rebuilds what follows
// from its handshakes (the heap's places, the pending tallies and pairs),
// failing r at the first disagreement. seqs are the handshakes' seqs, in
// order.
func (b *handshakeBook) restore(r *statecodec.Reader, seqs []uint64, endedHead uint64, heapSeqs []uint64) {
	fail := func(format string, args ...any) { stateFailf(r, format, args...) }
	// The guard skips an event at or below lastSeq: one above a kept seq
	// would let an event open a handshake over it, and its old place in
	// the ended list then let the new one go while it was pending.
	last := b.endedBySeq
	for _, list := range [][]uint64{seqs, b.order, b.ended} {
		for _, seq := range list {
			last = max(last, seq)
		}
	}
	if last > b.lastSeq {
		fail("seq %d is after the last applied, %d", last, b.lastSeq)
		return
	}

	if heapSeqs != nil {
		b.deadlines = make(deadlineHeap, 0, len(heapSeqs))
	}
	for i, seq := range heapSeqs {
		q := b.bySeq[seq]
		if q == nil || q.State != HandshakePending || q.heapIndex != -1 {
			fail("the deadline heap lists %d, which is not a pending handshake or is listed twice", seq)
			return
		}
		q.heapIndex = i
		b.deadlines = append(b.deadlines, q)
	}
	for i := 1; i < len(b.deadlines); i++ {
		if b.deadlines.Less(i, (i-1)/2) {
			fail("the deadline heap is out of order at %d", i)
			return
		}
	}

	endedKept := 0
	for _, seq := range seqs { // in seq order, as open appended the pairs' lists
		q := b.bySeq[seq]
		if q.State != HandshakePending {
			endedKept++
			continue
		}
		if q.heapIndex < 0 {
			fail("pending handshake %d is not in the deadline heap", seq)
			return
		}
		b.pending++
		if !q.Signed {
			b.unsigned++
		}
		b.byRequester[q.Requester]++
		b.byPair[q.pair] = append(b.byPair[q.pair], seq)
		if len(b.byPair[q.pair]) > HandshakesPairMax || b.byRequester[q.Requester] > HandshakesRequesterMax {
			fail("more handshakes pending than a pair or a requester may have, at %d", seq)
			return
		}
	}
	if b.pending > HandshakesPendingMax || b.unsigned > HandshakesUnsignedMax {
		fail("%d handshakes pending (%d unsigned), past the bounds", b.pending, b.unsigned)
		return
	}

	// Ended handshakes are let go from the ended list's head, so every one
	// kept is listed after it, once, and nothing else is.
	if endedHead > uint64(len(b.ended)) || endedHead > HandshakesEndedMax || len(b.ended)-int(endedHead) > HandshakesEndedMax {
		fail("the ended list's head %d of %d is out of range", endedHead, len(b.ended))
		return
	}
	b.endedHead = int(endedHead)
	listed := make(map[uint64]bool, len(b.ended)-b.endedHead)
	for _, seq := range b.ended[b.endedHead:] {
		if q := b.bySeq[seq]; q == nil || q.State == HandshakePending || listed[seq] {
			fail("the ended list holds %d, which is not a kept ended handshake or is listed twice", seq)
			return
		}
		listed[seq] = true
	}
	if len(listed) != endedKept {
		fail("%d ended handshakes kept, %d listed as ended", endedKept, len(listed))
		return
	}

	// Pages search the order, which holds every kept seq.
	inOrder := 0
	for i, seq := range b.order {
		if i > 0 && seq <= b.order[i-1] {
			fail("the page order is out of order at %d", seq)
			return
		}
		if _, ok := b.bySeq[seq]; ok {
			inOrder++
		}
	}
	if inOrder != len(b.bySeq) {
		fail("the page order holds %d of the %d handshakes kept", inOrder, len(b.bySeq))
		return
	}

	// A name is its handshake's, and goes with it (letGo).
	for _, index := range []struct {
		m      map[string]uint64
		prefix string
	}{{b.byKey, ""}, {b.byMessage, "\x01"}} {
		for k, seq := range index.m {
			if q := b.bySeq[seq]; q == nil || !slices.Contains(q.names, index.prefix+k) {
				fail("a name points to handshake %d, which does not hold it", seq)
				return
			}
		}
	}
}
