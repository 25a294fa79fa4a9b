package ledger

import (
	"strings"

	"github.com/aglx/ledger/protocol"
)

// transfer applies a credit.transfer: FROM pays TO.
//
// Its transaction_id is its idempotency key for the life of the ledger:
// sent again with the same content it gets the first reply again and
// posts nothing; with other content it gets 409. Content is FROM, TO and
// the amount compared by value (3 and 3.0 are the same transfer); the
// reason, timestamp and signature are not content, because a sender that
// retries may rebuild them. If the transaction_id is that of a live
// approval from FROM to TO, the transfer pays from the hold (settles it).
func (l *Ledger) transfer(e *Event, p *protocol.CreditTransfer, o *Outcome) {
	if r := l.checkSender(e); r != nil {
		*o = *r
		return
	}
	if why := checkAmount("amount", p.Amount, positive); why != "" {
		*o = refuse(protocol.StatusBadRequest, "%s", why)
		return
	}
	if p.Currency != protocol.Currency {
		*o = refuse(protocol.StatusBadRequest, "field %q holds %s; the only currency is %q", "currency", quoteURI(p.Currency), protocol.Currency)
		return
	}
	if why := checkID("transaction_id", p.TransactionID); why != "" {
		*o = refuse(protocol.StatusBadRequest, "%s", why)
		return
	}
	// The id is looked up before the parties, though a refusal of theirs
	// comes first, so that the index reads, each likely a cache miss,
	// wait together; findTx changes nothing.
	txHash := l.txs.hash(p.TransactionID)
	ref, found := l.findTx(p.TransactionID, txHash)
	pt, why := l.resolve(e)
	if why != "" {
		*o = refuse(protocol.StatusBadRequest, "%s", why)
		return
	}
	amount := mustFixed(p.Amount.Decimal())
	if ref.posting != 0 {
		*o = l.repeat(e, ref.posting-1, kindTransfer, amount, "transaction_id "+quoteURI(p.TransactionID))
		return
	}
	m := move{parties: pt, kind: kindTransfer, txID: p.TransactionID, amount: amount}
	if found {
		h := l.holds.get(ref.hold - 1)
		if h.account != pt.fromID || !pt.fromOK || l.strs.get(h.party) != e.To {
			*o = refuse(protocol.StatusConflict, "transaction_id %s names an approval from %s to %s", quoteURI(p.TransactionID), quoteURI(l.uri(h.account)), quoteURI(l.strs.get(h.party)))
			return
		}
		m.txRef = ref.key
		if h.state == holdLive {
			m.settle = ref.hold
		}
	}
	if r := l.checkFunds(pt, amount, m.settle, "the transfer"); r != nil {
		*o = *r
		return
	}
	i, f, status, why := l.book(e, m)
	if status != 0 {
		*o = refuse(status, "%s", why)
		return
	}
	l.txPaid(ref, found, txHash, i)
	l.booked(e, i, f, o)
}

// reward applies a credit.reward: FROM pays TO for good work, from its own
// balance, or by issuance when FROM is the node.
//
// A reward has no transaction_id; its idempotency key is rewardKey, and its
// event id becomes its transaction id, the name a credit.adjust uses.
func (l *Ledger) reward(e *Event, p *protocol.CreditReward) Outcome {
	if o := l.checkSender(e); o != nil {
		return *o
	}
	if why := checkAmount("amount", p.Amount, positive); why != "" {
		return refuse(protocol.StatusBadRequest, "%s", why)
	}
	if p.TaskID != "" {
		if why := checkID("task_id", p.TaskID); why != "" {
			return refuse(protocol.StatusBadRequest, "%s", why)
		}
	}
	pt, why := l.resolve(e)
	if why != "" {
		return refuse(protocol.StatusBadRequest, "%s", why)
	}
	key, why := rewardKey(e, p)
	if why != "" {
		return refuse(protocol.StatusBadRequest, "%s", why)
	}
	amount := mustFixed(p.Amount.Decimal())
	if r := l.rewards.find(&l.strs, key); r != nil {
		return l.repeat(e, r.a-1, kindReward, amount, "the reward "+quoteURI(key))
	}
	txHash := l.txs.hash(e.EventID)
	if _, found := l.findTx(e.EventID, txHash); found {
		// Event ids are ULIDs the node makes; an agent would have to have
		// guessed one as its transaction_id.
		return refuse(protocol.StatusConflict, "the event id %s is already a transaction_id", quoteURI(e.EventID))
	}
	if o := l.checkFunds(pt, amount, 0, "the reward"); o != nil {
		return *o
	}
	i, f, status, why := l.book(e, move{parties: pt, kind: kindReward, amount: amount})
	if status != 0 {
		return refuse(status, "%s", why)
	}
	l.rewards.insert(&l.strs, key, i+1, 0)
	l.txs.insert(txHash, i+1, false)
	var o Outcome
	l.booked(e, i, f, &o)
	return o
}

// rewardKey is the idempotency key of a credit.reward: one reward per task
// from one account to another when it names its task_id; otherwise the
// message's own name (see messageKey).
func rewardKey(e *Event, p *protocol.CreditReward) (string, string) {
	if p.TaskID != "" {
		return "task " + e.From + " " + e.To + " " + p.TaskID, ""
	}
	return messageKey(e)
}

// messageKey names a message for idempotency when its body carries no
// key. A signed message is named by what its signature covers
// (Event.SignedName), so that a copy sent under another ID, or none, is
// the same message. An unsigned one (from an agent without a key, which
// anyone may send in its name anyway) is named by FROM and its ID header,
// which a resend keeps, or else by its event id, which makes every copy a
// new message. The log already folds resends with one ID inside its
// duplicate window (docs/EVENTS.md); this key keeps them folded forever.
func messageKey(e *Event) (string, string) {
	if name := signedName(e); name != "" {
		return name, ""
	}
	if e.MessageID == "" {
		return "event " + e.EventID, ""
	}
	if why := checkID("ID", e.MessageID); why != "" {
		return "", "the ID header" + strings.TrimPrefix(why, `field "ID"`)
	}
	return "id " + e.From + " " + e.MessageID, ""
}

// signedName is the idempotency name of a signed message, or "" for an
// unsigned one. It has a space, which no ID or task_id may hold, so it
// can never be taken for one.
func signedName(e *Event) string {
	if e.SignedName == "" || (e.Auth != AuthValid && e.Auth != AuthNode) {
		return ""
	}
	return "signed " + e.SignedName
}

// repeat answers a message whose idempotency key is already booked as
// posting i: the first reply again if the content is the same, else 409.
func (l *Ledger) repeat(e *Event, i uint32, k kind, amount fixed, name string) Outcome {
	p, f := l.postings.get(i), l.figures(i)
	from, to := l.uri(p.from), l.uri(p.to)
	if p.kind() != k || from != e.From || to != e.To || cmpFixed(f.amount, amount) != 0 {
		return refuse(protocol.StatusConflict, "%s was booked at seq %d as a %s of %s from %s to %s; a message with the same key must have the same content",
			name, p.seq, p.kind(), f.amount.text(), quoteURI(from), quoteURI(to))
	}
	return l.replayed(i)
}

// replayed is the reply to a repeat of the message that made posting i:
// the transaction and the sender's figures right after the posting, as
// the first reply had them, and no posting.
func (l *Ledger) replayed(i uint32) Outcome {
	var o Outcome
	l.reply(l.postings.get(i), l.figures(i), &o)
	o.Replayed = true
	return o
}

// booked fills in o, a zero Outcome, the reply to the message e that made
// posting i, whose figures f book returned: the reply, with the posting.
// The event id is e's own, which the posting holds (formatting it again
// would cost a string). It writes in place because an Outcome is 352
// bytes, and returning one copies it at every call it passes through.
func (l *Ledger) booked(e *Event, i uint32, f postingFigures, o *Outcome) {
	p := l.postings.get(i)
	l.reply(p, f, o)
	l.entryOf(p, f, e.EventID, &o.Posting)
}

// reply fills in the reply fields of o, a zero Outcome, for posting p with
// figures f: the transaction and the sender's figures right after it.
func (l *Ledger) reply(p *posting, f postingFigures, o *Outcome) {
	sender, balance := p.from, f.fromBalance
	if p.kind() == kindAdjust {
		sender = issuance
		if p.to == issuance {
			balance = f.toBalance
		}
	}
	o.Status = protocol.StatusOK
	o.TransactionID = l.strs.get(p.txID())
	o.Account = l.uri(sender)
	balance.decimal(o.Balance.Decimal())
	diffDecimal(l.wide, o.Available.Decimal(), balance, f.pending)
}

// checkFunds refuses (402) a payment or hold of amount by the sender of pt
// that its available balance does not cover. settle is the index + 1 of a
// live hold of the sender's that the payment settles, whose amount is
// available to it. The issuance account has no limit; an account in debt
// can pay nothing.
func (l *Ledger) checkFunds(pt parties, amount fixed, settle uint32, what string) *Outcome {
	if pt.fromOK && pt.fromID == issuance {
		return nil
	}
	var none account // no account: no credits
	a := &none
	if pt.fromOK {
		a = l.accounts.get(pt.fromID)
	}
	var extra fixed
	if settle != 0 {
		extra = l.holds.get(settle - 1).amount
	}
	if l.covers(a, extra, amount) {
		return nil
	}
	avail := l.available(a)
	o := refuse(protocol.StatusPaymentRequired, "%s has %s credits available; %s needs %s", quoteURI(pt.from), avail.String(), what, amount.text())
	return &o
}
