package ledger

import (
	"container/heap"
	"slices"
	"time"

	"github.com/aglx/ledger/protocol"
)

// How long holds last, in event time. A hold always ends: paid, released,
// or expired; the ledger never keeps credits promised forever.
const (
	// TaskHoldTTL is how long the CREDITS of a task.assign stay held if no
	// task.result, task.reject or task.cancel ends the task first.
	TaskHoldTTL = 24 * time.Hour
	// ApprovalHoldTTL is how long a credit.approve without expires holds
	// the approved amount.
	ApprovalHoldTTL = 24 * time.Hour
	// HoldTTLMax bounds the expires of a credit.approve, counted from the
	// time the node received it. A later expiry is refused (400) rather
	// than shortened, so that the approver knows what it promised.
	HoldTTLMax = 30 * 24 * time.Hour
)

type holdKind uint8

const (
	holdApproval holdKind = iota + 1 // credit.approve
	holdTask                         // task.assign with CREDITS
)

func (k holdKind) String() string {
	if k == holdApproval {
		return "approval"
	}
	return "task"
}

// holdState is where a hold is in its life: live, then exactly one end.
type holdState uint8

const (
	holdLive     holdState = iota + 1
	holdSettled            // paid by the transfer that carried its transaction_id
	holdReleased           // its task ended (result, reject, cancel)
	holdExpired            // event time reached its expiry
)

func (s holdState) String() string {
	switch s {
	case holdLive:
		return "live"
	case holdSettled:
		return "settled"
	case holdReleased:
		return "released"
	case holdExpired:
		return "expired"
	}
	return "unknown"
}

// hold reserves credits of an account for a party: an approval for its
// requester, or a task's CREDITS for its worker. A live hold counts in the
// account's pending figure and so lowers what it can spend. Holds are never
// deleted: an ended one stays as the record of the promise.
type hold struct {
	kind    holdKind
	state   holdState
	account accountID // whose credits are held: the approver or task owner
	party   strRef    // the requester or worker
	amount  fixed
	expires int64 // Unix ns, event time
	// defaultExpiry is set when the approval gave no expires; two copies
	// of it then agree whatever their receive times.
	defaultExpiry bool
	seq           uint64 // the event that placed it
	endedSeq      uint64 // the event that ended it, 0 while live
	eventID       strRef // the event that placed it
	// txID is an approval's transaction_id; taskID a task's task_id,
	// empty if the task.assign had none.
	txID, taskID strRef
	// balance and pending are the holder's figures right after the hold
	// was placed: the reply a repeated message gets again.
	balance, pending fixed
	// livePos is the hold's position in holdTable.live while it is live,
	// so that ending it costs no search.
	livePos uint32
	// paid is the index + 1 of the posting of the transfer that carried
	// an approval's transaction_id, settling the hold or, after it ended,
	// as an ordinary transfer; 0 for none (see Ledger.findTx).
	paid uint32
}

// holdTable holds every hold and the indexes over the live ones.
type holdTable struct {
	rows   chunked[hold]
	expiry expiryHeap
	// live lists the live holds of each account that has any, for
	// AccountAt; the order inside a list does not matter.
	live map[accountID][]uint32
	// tasks maps "OWNER TASK" to the index + 1 of a task hold (a), where
	// TASK is the event id of the task.assign and, if it had one, its
	// task_id.
	tasks keyIndex
}

func newHoldTable() holdTable {
	return holdTable{live: make(map[accountID][]uint32), tasks: newKeyIndex()}
}

func (t *holdTable) get(i uint32) *hold { return t.rows.get(i) }

// end marks hold i ended. The account's pending figure is the caller's.
func (t *holdTable) end(i uint32, s holdState, seq uint64) {
	h := t.get(i)
	if h.state != holdLive || s == holdLive {
		panic("ledger: a hold can end only once")
	}
	h.state, h.endedSeq = s, seq
	list := t.live[h.account]
	last := list[len(list)-1]
	list[h.livePos] = last
	t.get(last).livePos = h.livePos
	list = list[:len(list)-1]
	if len(list) == 0 {
		delete(t.live, h.account)
	} else {
		t.live[h.account] = list
	}
}

// taskKey names a task hold in holdTable.tasks. A canonical URI holds no
// space, so the key splits unambiguously at its first one.
func taskKey(owner, task string) string { return owner + " " + task }

// holdText is the text of a hold about to be placed: the arena stores it
// only once the hold is placed, so that a refusal leaves nothing behind.
type holdText struct {
	party, txID, taskID string
}

// place puts h, filled in but for its bookkeeping and text, on the account
// of pt.from: if the account can cover it, the amount moves from available
// to pending. It changes nothing on refusal. The issuance account covers
// any hold.
func (l *Ledger) place(e *Event, pt parties, h hold, text holdText) (uint32, *Outcome) {
	if o := l.checkFunds(pt, h.amount, 0, "the hold"); o != nil {
		return 0, o
	}
	a := l.accounts.get(pt.fromID) // checkFunds refuses a holder without an account
	pending, ok := addMoney(l.ctx, a.pending, h.amount, false)
	if !ok {
		o := refuse(protocol.StatusBadRequest, "%s", tooManyDigits)
		return 0, &o
	}
	a.pending = pending
	a.touch(e)
	i, row := l.holds.rows.add()
	*row = h
	row.state, row.account, row.seq = holdLive, pt.fromID, e.Seq
	row.eventID, row.party = l.strs.put(e.EventID), l.strs.put(text.party)
	row.txID, row.taskID = l.strs.put(text.txID), l.strs.put(text.taskID)
	row.balance, row.pending = a.balance, a.pending
	heap.Push(&l.holds.expiry, expiryItem{row.expires, i})
	row.livePos = uint32(len(l.holds.live[pt.fromID]))
	l.holds.live[pt.fromID] = append(l.holds.live[pt.fromID], i)
	return i, nil
}

// release ends live hold i without paying it: its amount goes back from
// pending to available. at is the event time the hold ended.
func (l *Ledger) release(e *Event, i uint32, s holdState, at int64) {
	h := l.holds.get(i)
	a := l.accounts.get(h.account)
	pending, ok := addMoney(l.ctx, a.pending, h.amount, true)
	if !ok {
		// pending is a sum that includes this hold, at an exponent no
		// larger than its own: taking it out again is exact.
		panic("ledger: releasing a hold of " + h.amount.text() + " from pending " + a.pending.text())
	}
	a.pending = pending
	a.updated = max(a.updated, at)
	a.seq = e.Seq
	l.holds.end(i, s, e.Seq)
}

// expire releases every live hold whose expiry is at or before the time of
// e. It runs before each event, so an event sees the holds as they stand at
// its own time, and a hold's end depends only on the log.
func (l *Ledger) expire(e *Event) {
	now := unixNano(e.Time)
	q := &l.holds.expiry
	for q.Len() > 0 && (*q)[0].expires <= now {
		it := heap.Pop(q).(expiryItem)
		if l.holds.get(it.hold).state == holdLive {
			l.release(e, it.hold, holdExpired, it.expires)
		}
	}
}

// pendingAt returns what the account's pending figure will be at the time
// at if no event comes before, and the latest expiry among the holds that
// lapse by then. It takes the lapsing holds out of the pending figure, as
// release would, so the result has the exponent an expiry would give it.
func (l *Ledger) pendingAt(id accountID, at int64) (fixed, int64) {
	pending, lapsed := l.accounts.get(id).pending, int64(0)
	for _, i := range l.holds.live[id] {
		h := l.holds.get(i)
		if h.expires > at {
			continue
		}
		lapsed = max(lapsed, h.expires)
		var ok bool
		if pending, ok = addMoney(l.ctx, pending, h.amount, true); !ok {
			panic("ledger: taking a hold out of pending " + pending.text())
		}
	}
	return pending, lapsed
}

// expiryItem is one hold in the expiry queue. It carries its expiry, so
// ordering reads no hold; ties go by index, so the order is total and
// every replay releases holds in the same order.
type expiryItem struct {
	expires int64
	hold    uint32
}

// expiryHeap is a min-heap of holds by expiry (container/heap). Ended
// holds stay in it until they come to the top, where expire skips them.
type expiryHeap []expiryItem

func (q expiryHeap) Len() int { return len(q) }
func (q expiryHeap) Less(i, j int) bool {
	if q[i].expires != q[j].expires {
		return q[i].expires < q[j].expires
	}
	return q[i].hold < q[j].hold
}
func (q expiryHeap) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *expiryHeap) Push(x any)   { *q = append(*q, x.(expiryItem)) }
func (q *expiryHeap) Pop() any {
	old := *q
	it := old[len(old)-1]
	*q = old[:len(old)-1]
	return it
}

// HoldView is a hold as the HTTP API and Snapshot show it. The fields are
// in the order of their JSON names.
type HoldView struct {
	// Account is whose credits are held.
	Account string          `json:"account"`
	Amount  protocol.Amount `json:"amount"`
	// EndedSeq is the event that ended the hold; 0 while it is live.
	EndedSeq uint64    `json:"ended_seq"`
	EventID  string    `json:"event_id"`
	Expires  time.Time `json:"expires"`
	// ExpiresDefault is set when the expiry is the default, not given.
	ExpiresDefault bool `json:"expires_default"`
	// Kind is approval or task.
	Kind string `json:"kind"`
	// Party is the requester of an approval or the worker of a task.
	Party string `json:"party"`
	// ReplyBalance and ReplyPending are the holder's figures right after
	// the hold was placed, repeated to a resent message.
	ReplyBalance protocol.Amount `json:"reply_balance"`
	ReplyPending protocol.Amount `json:"reply_pending"`
	// Seq is the event that placed the hold.
	Seq uint64 `json:"seq"`
	// State is live, settled, released or expired.
	State         string `json:"state"`
	TaskID        string `json:"task_id"`
	TransactionID string `json:"transaction_id"`
}

func (l *Ledger) holdView(h *hold) HoldView {
	return HoldView{
		Account:        l.uri(h.account),
		Amount:         amountOfFixed(h.amount),
		EndedSeq:       h.endedSeq,
		EventID:        l.strs.get(h.eventID),
		Expires:        timeOf(h.expires),
		ExpiresDefault: h.defaultExpiry,
		Kind:           h.kind.String(),
		Party:          l.strs.get(h.party),
		ReplyBalance:   amountOfFixed(h.balance),
		ReplyPending:   amountOfFixed(h.pending),
		Seq:            h.seq,
		State:          h.state.String(),
		TaskID:         l.strs.get(h.taskID),
		TransactionID:  l.strs.get(h.txID),
	}
}

// Holds returns the live holds on uri's account, oldest first.
func (l *Ledger) Holds(uri string) []HoldView {
	id, ok := l.lookup(uri)
	if !ok {
		return nil
	}
	idx := slices.Clone(l.holds.live[id])
	slices.Sort(idx)
	out := make([]HoldView, 0, len(idx))
	for _, i := range idx {
		out = append(out, l.holdView(l.holds.get(i)))
	}
	return out
}
