package ledger

import (
	"github.com/aglx/ledger/protocol"
)

// adjust applies a credit.adjust: the node corrects a booked transaction by
// moving the exact adjustment between TO and the issuance account. A
// positive adjustment credits TO, a negative one debits it, with no funds
// check: a correction may leave TO in debt, and an account in debt cannot
// spend until it is above zero again (checkFunds).
//
// The transaction_id names the transaction corrected, not the correction,
// so one transaction may be corrected several times (a duplicate payment
// is refunded to the payer and taken back from the payee: two adjustments
// of one transaction). The idempotency key of an adjustment is therefore
// the message's own name (messageKey); its content is the transaction_id,
// TO and the adjustment by value.
func (l *Ledger) adjust(e *Event, p *protocol.CreditAdjust) Outcome {
	if e.From != l.node || e.Auth != AuthNode {
		return refuse(protocol.StatusForbidden, "credit.adjust is accepted only from the node's URI %s, signed with the node's key", l.node)
	}
	if why := checkAmount("adjustment", p.Adjustment, nonZero); why != "" {
		return refuse(protocol.StatusBadRequest, "%s", why)
	}
	if why := checkID("transaction_id", p.TransactionID); why != "" {
		return refuse(protocol.StatusBadRequest, "%s", why)
	}
	pt, why := l.resolve(e)
	if why != "" {
		return refuse(protocol.StatusBadRequest, "%s", why)
	}
	key, why := messageKey(e)
	if why != "" {
		return refuse(protocol.StatusBadRequest, "%s", why)
	}
	adj := mustFixed(p.Adjustment.Decimal())
	if r := l.adjusts.find(&l.strs, key); r != nil {
		return l.repeatAdjust(e, r.a-1, p.TransactionID, adj)
	}
	ref, _ := l.findTx(p.TransactionID, l.txs.hash(p.TransactionID))
	if ref.posting == 0 {
		return refuse(protocol.StatusNotFound, "transaction_id %s names no booked transaction", quoteURI(p.TransactionID))
	}
	// The posting names the transaction by the string the arena already
	// holds, not by a new copy.
	m := move{parties: pt, kind: kindAdjust, txRef: ref.key, amount: adj}
	if adj.neg() {
		m.parties, m.amount = pt.swap(), packFixed(adj.mag(), adj.exp(), false)
	}
	i, f, status, why := l.book(e, m)
	if status != 0 {
		return refuse(status, "%s", why)
	}
	l.adjusts.insert(&l.strs, key, i+1, 0)
	var o Outcome
	l.booked(e, i, f, &o)
	return o
}

// repeatAdjust answers a credit.adjust whose key is already booked as
// posting i: the first reply again if it corrects the same transaction of
// the same account by the same amount, else 409.
func (l *Ledger) repeatAdjust(e *Event, i uint32, txID string, adj fixed) Outcome {
	p, amount := l.postings.get(i), l.figures(i).amount
	target, signed := p.to, amount
	if p.to == issuance {
		target, signed = p.from, packFixed(amount.mag(), amount.exp(), true)
	}
	uri, booked := l.uri(target), l.strs.get(p.txID())
	if booked != txID || uri != e.To || cmpFixed(signed, adj) != 0 {
		return refuse(protocol.StatusConflict, "this credit.adjust was booked at seq %d as %s to %s for transaction_id %s; a message with the same key must have the same content",
			p.seq, signed.text(), quoteURI(uri), quoteURI(booked))
	}
	return l.replayed(i)
}
