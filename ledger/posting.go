package ledger

import (
	"github.com/aglx/ledger/protocol"
)

// kind is the message that made a posting.
type kind uint8

const (
	kindTransfer kind = iota + 1 // credit.transfer, a settlement included
	kindReward                   // credit.reward
	kindAdjust                   // credit.adjust
)

func (k kind) String() string {
	switch k {
	case kindTransfer:
		return "transfer"
	case kindReward:
		return "reward"
	case kindAdjust:
		return "adjust"
	}
	return "unknown"
}

// postingsMax bounds the postings of one ledger so that a 32-bit index
// never wraps. At about 100 bytes a posting, memory runs out long before.
const postingsMax = 1<<32 - 2 // postings

// posting moves amount from one account to another. It is never changed
// once made. It holds the running balance of both sides, so an account's
// history can be shown and audited without replaying anything.
//
// It is 72 bytes: every posting ever made stays in memory, so each byte
// counts a million times. The figures are packed (packed.go), the event id
// is kept as a ULID's value where it is one (ulid.go), and the kind rides
// in spare bits of the transaction id's reference rather than take 8 more
// bytes with its padding.
type posting struct {
	seq   uint64 // the event that made it
	time  int64  // that event's time, Unix ns
	event eventRef
	// tx is the strRef of the transaction the posting belongs to, with
	// the kind in its spare bits (see txID and kind): the transfer's
	// transaction_id, the reward's event id, or the transaction an
	// adjustment corrects.
	tx          strRef
	from, to    accountID
	amount      packed // always positive
	fromBalance packed // balance of from after the posting
	toBalance   packed // balance of to after the posting
}

// txID returns the strRef of the transaction id.
func (p *posting) txID() strRef { return p.tx &^ strRefSpare }

// kind returns the message that made the posting.
func (p *posting) kind() kind { return kind(p.tx >> strRefSpareShift & 3) }

// The three kinds fit the two spare bits used.
var _ [3 - kindAdjust]struct{}

// postingFigures are a posting's figures unpacked, with the one it keeps
// for a repeated message: pending is the sender's pending figure right
// after the posting, so that a repeat gets the available figure of the
// first reply. The sender is from, except for an adjustment, whose sender
// is the node.
type postingFigures struct {
	amount, fromBalance, toBalance, pending fixed
}

// figures returns the figures of posting i. The pending figure is kept in
// l.replyPending, and only where it is not the zero fixed: most senders
// hold nothing, and a posting has no room to spare.
func (l *Ledger) figures(i uint32) postingFigures {
	p := l.postings.get(i)
	return postingFigures{
		amount:      l.unpack(p.amount),
		fromBalance: l.unpack(p.fromBalance),
		toBalance:   l.unpack(p.toBalance),
		pending:     l.replyPending[i],
	}
}

// parties are the two accounts of a message that moves credits, looked up
// once: their URIs, ids, and whether each has an account yet.
type parties struct {
	from, to     string
	fromID, toID accountID
	fromOK, toOK bool
}

// resolve looks up FROM and TO of a message that moves or reserves
// credits, and returns them or a refusal reason. A URI without an account
// must be canonical to get one later.
func (l *Ledger) resolve(e *Event) (parties, string) {
	p := parties{from: e.From, to: e.To}
	switch {
	case e.From == "":
		return p, "the message has no FROM"
	case e.To == "":
		return p, "the message has no TO"
	case e.From == e.To:
		return p, "FROM and TO are the same account; credits cannot move to where they are"
	}
	// Both lookups first, so that their cache misses overlap.
	p.fromID, p.fromOK = l.lookup(e.From)
	p.toID, p.toOK = l.lookup(e.To)
	if !p.fromOK {
		if why := l.checkNewURI("FROM", e.From); why != "" {
			return p, why
		}
	}
	if !p.toOK {
		if why := l.checkNewURI("TO", e.To); why != "" {
			return p, why
		}
	}
	return p, ""
}

// swap turns the parties around: an adjustment's direction follows its
// sign.
func (p parties) swap() parties {
	return parties{from: p.to, to: p.from, fromID: p.toID, toID: p.fromID, fromOK: p.toOK, toOK: p.fromOK}
}

// move is a posting about to be made: everything book needs to know.
type move struct {
	parties
	kind kind
	// txID is the transaction's id, stored on success; txRef, if not 0,
	// names one the arena already holds. A reward's is its event id.
	txID   string
	txRef  strRef
	amount fixed
	// settle is the index + 1 of the approval hold the transfer pays
	// from, or 0; the hold ends with the posting.
	settle uint32
}

// book makes the posting for m, and returns its index and figures, or the
// status and reason of a refusal. It checks everything a posting needs except the
// sender's funds and rights, which are the message's rules, and it changes
// nothing unless it succeeds: all new figures are computed first.
func (l *Ledger) book(e *Event, m move) (uint32, postingFigures, protocol.Status, string) {
	if m.from == m.to || m.amount.sign() <= 0 {
		panic("ledger: book: a posting needs two accounts and a positive amount")
	}
	if l.postings.len() >= postingsMax || l.accounts.len()+2 > accountsMax || l.bigFigures.len()+3 > bigFiguresMax {
		return 0, postingFigures{}, protocol.StatusTooLarge, "the ledger holds the most postings or accounts it can"
	}
	// A side without an account yet has zero figures. Only the figures
	// are copied, not the rows: the rows are written only once all the
	// new figures are known to be valid.
	var from, to struct{ balance, spent, earned, pending fixed }
	if m.fromOK {
		a := l.accounts.get(m.fromID)
		from.balance, from.spent, from.pending = a.balance, a.spent, a.pending
	}
	if m.toOK {
		a := l.accounts.get(m.toID)
		to.balance, to.earned = a.balance, a.earned
	}
	var ok [5]bool
	from.balance, ok[0] = addMoney(l.ctx, from.balance, m.amount, true)
	from.spent, ok[1] = addMoney(l.ctx, from.spent, m.amount, false)
	to.balance, ok[2] = addMoney(l.ctx, to.balance, m.amount, false)
	to.earned, ok[3] = addMoney(l.ctx, to.earned, m.amount, false)
	ok[4] = true
	if m.settle != 0 {
		from.pending, ok[4] = addMoney(l.ctx, from.pending, l.holds.get(m.settle-1).amount, true)
	}
	if ok != [5]bool{true, true, true, true, true} {
		return 0, postingFigures{}, protocol.StatusBadRequest, tooManyDigits
	}

	// Commit: nothing below can fail.
	if !m.fromOK {
		m.fromID = l.create(m.from)
	}
	if !m.toOK {
		m.toID = l.create(m.to)
	}
	fa, ta := l.accounts.get(m.fromID), l.accounts.get(m.toID)
	fa.balance, fa.spent, fa.pending = from.balance, from.spent, from.pending
	ta.balance, ta.earned = to.balance, to.earned
	if m.settle != 0 {
		l.holds.end(m.settle-1, holdSettled, e.Seq)
	}
	fa.touch(e)
	ta.touch(e)

	i, p := l.postings.add()
	*p = posting{
		seq: e.Seq, time: unixNano(e.Time), event: l.putEvent(e.EventID),
		from: m.fromID, to: m.toID,
		amount: l.pack(m.amount), fromBalance: l.pack(fa.balance), toBalance: l.pack(ta.balance),
	}
	switch {
	case m.kind == kindReward:
		p.tx = l.strs.put(e.EventID)
	case m.txRef != 0:
		p.tx = m.txRef
	default:
		p.tx = l.strs.put(m.txID)
	}
	p.tx |= strRef(m.kind) << strRefSpareShift
	f := postingFigures{amount: m.amount, fromBalance: fa.balance, toBalance: ta.balance, pending: fa.pending}
	if m.kind == kindAdjust {
		f.pending = l.accounts.get(issuance).pending
	}
	if f.pending != (fixed{}) {
		l.replyPending[i] = f.pending
	}
	l.addEntry(fa, i)
	l.addEntry(ta, i)
	return i, f, 0, ""
}
