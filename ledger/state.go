package ledger

import (
	"fmt"
	"slices"

	"github.com/aglx/ledger/ledger/statecodec"
)

// The ledger's saved state (projection snapshots): SaveState writes what
// the ledger folded, LoadState puts it back into a ledger fresh from New,
// so that a start takes the ledger up where a stop left it instead of
// replaying the log from its first event.
//
// What is written is the primary data, as it is: the arena of strings
// byte for byte (rows name strings by their offsets in it), the account
// rows, the postings, their big and reply figures, the key records, the
// holds, the expiry queue (which keeps ended holds until they come to its
// top, so it cannot be derived from the holds), the requests and the
// mismatches. What is derived from them is rebuilt on load rather than
// written (state_rebuild.go): the hash indexes (accounts by URI,
// transaction ids, the four key indexes), each account's history and its
// blocks, the live holds of each account, and the open requests by pair.
// Rebuilding costs an insert a key and two a posting, keeps the file
// smaller, and leaves nothing in them to validate: an index built from the
// rows cannot name a row that does not exist, nor two rows one slot.
//
// The hash indexes are rebuilt under a fresh seed (hashIndex: random per
// index, so that nobody can choose keys that collide), so their slots lie
// elsewhere than in the ledger saved: a replay from the log has always
// given other slots too. No result depends on where a key lies, since
// every lookup compares the key itself (hashIndex), and the one walk over
// the slots (Snapshot's transactions) is sorted after. The tests compare
// the indexes by what they hold, and the rest field for field.
//
// Everything read is checked before the ledger uses it, so that a
// damaged or crafted state is refused by LoadState and never panics later
// (a string reference outside the arena, a row index outside its table, a
// figure that is not a valid amount, a pending figure that is not the sum
// of the account's live holds, which releasing one would panic on).

// The fewest bytes a row takes in the saved state (a varint, a boolean and
// a string's length take one at least, a figure two, a Fixed64 eight):
// Reader.Len refuses a count of rows the input cannot hold, so a crafted
// count never allocates. Each must not exceed the true least, or a real
// state would be refused.
const (
	accountMinBytes  = 11 // URI, 4 figures, updated, seq
	postingMinBytes  = 24 // seq, time, event (2 Fixed64), tx, from, to, 3 figures
	holdMinBytes     = 20
	requestMinBytes  = 12
	mismatchMinBytes = 9
)

// SaveState writes the ledger's state for LoadState. It changes nothing.
func (l *Ledger) SaveState(w *statecodec.Writer) error {
	w.Uint(l.seq)
	w.Len(len(l.strs.chunks))
	for _, c := range l.strs.chunks {
		w.Blob(c)
	}

	w.Len(l.accounts.len())
	for i := range l.accounts.len() {
		a := l.accounts.get(accountID(i))
		w.Uint(uint64(a.uri))
		if a.uri <= uriShortMax {
			w.Blob(a.short[:a.uri])
		}
		putFixed(w, a.balance)
		putFixed(w, a.pending)
		putFixed(w, a.earned)
		putFixed(w, a.spent)
		w.Int(a.updated)
		w.Uint(a.seq)
	}

	w.Len(l.bigFigures.len())
	for i := range l.bigFigures.len() {
		putFixed(w, *l.bigFigures.get(uint32(i)))
	}
	w.Len(l.postings.len())
	for i := range l.postings.len() {
		p := l.postings.get(uint32(i))
		w.Uint(p.seq)
		w.Int(p.time)
		w.Fixed64(p.event.hi)
		w.Fixed64(p.event.lo)
		w.Uint(uint64(p.tx))
		w.Uint(uint64(p.from))
		w.Uint(uint64(p.to))
		w.Uint(uint64(p.amount))
		w.Uint(uint64(p.fromBalance))
		w.Uint(uint64(p.toBalance))
	}
	keys := slices.Sorted(func(yield func(uint32) bool) {
		for k := range l.replyPending {
			if !yield(k) {
				return
			}
		}
	})
	w.Len(len(keys))
	for _, k := range keys {
		w.Uint(uint64(k))
		putFixed(w, l.replyPending[k])
	}

	saveKeyRecs(w, &l.rewards)
	saveKeyRecs(w, &l.adjusts)
	saveKeyRecs(w, &l.signed)

	w.Len(l.holds.rows.len())
	for i := range l.holds.rows.len() {
		h := l.holds.get(uint32(i))
		w.Uint(uint64(h.kind))
		w.Uint(uint64(h.state))
		w.Uint(uint64(h.account))
		w.Uint(uint64(h.party))
		putFixed(w, h.amount)
		w.Int(h.expires)
		w.Bool(h.defaultExpiry)
		w.Uint(h.seq)
		w.Uint(h.endedSeq)
		w.Uint(uint64(h.eventID))
		w.Uint(uint64(h.txID))
		w.Uint(uint64(h.taskID))
		putFixed(w, h.balance)
		putFixed(w, h.pending)
		w.Uint(uint64(h.livePos))
		w.Uint(uint64(h.paid))
	}
	w.Len(len(l.holds.expiry))
	if len(l.holds.expiry) == 0 {
		// Empty, the queue is nil until the first hold and an empty
		// slice once it has been emptied: the same to every use, but the
		// fold restored is to be the one saved.
		w.Bool(l.holds.expiry == nil)
	}
	for _, it := range l.holds.expiry {
		w.Int(it.expires)
		w.Uint(uint64(it.hold))
	}
	saveKeyRecs(w, &l.holds.tasks)

	w.Len(len(l.requests.all))
	for i := range l.requests.all {
		q := &l.requests.all[i]
		state := slices.Index(requestStates[:], q.State)
		amount, ok := fixedOf(q.Amount.Decimal())
		if state < 0 || !ok {
			return fmt.Errorf("ledger: saving request %d (seq %d): state %q, amount %s", i, q.Seq, q.State, q.Amount.String())
		}
		putFixed(w, amount)
		w.String(q.Approver)
		w.String(q.EventID)
		w.String(q.Requester)
		w.String(q.ResolvedBy)
		w.Uint(q.ResolvedSeq)
		w.Uint(q.Seq)
		w.Uint(uint64(state))
		w.String(q.TaskID)
		w.Int(unixNano(q.Time))
		w.String(q.TransactionID)
	}

	w.Len(len(l.mismatches))
	for i := range l.mismatches {
		m := &l.mismatches[i]
		w.String(m.Account)
		w.String(m.Claimed)
		w.String(m.EventID)
		w.String(m.Field)
		w.String(m.Ledger)
		w.Uint(m.Seq)
		w.Int(unixNano(m.Time))
		w.String(m.TransactionID)
		w.String(m.Type)
	}
	return nil
}

// requestStates numbers a request's states in the saved state.
var requestStates = [...]string{requestOpen, requestApproved, requestDenied}

func putFixed(w *statecodec.Writer, f fixed) {
	w.Uint(f.lo)
	w.Uint(f.hi)
}

func saveKeyRecs(w *statecodec.Writer, x *keyIndex) {
	w.Len(x.len())
	for i := range x.len() {
		r := x.recs.get(uint32(i))
		w.Uint(uint64(r.key))
		w.Uint(uint64(r.a))
		w.Uint(uint64(r.b))
	}
}
