package ledger

import (
	"strings"
	"time"

	"github.com/aglx/ledger/protocol"
	"github.com/cockroachdb/apd/v3"
)

// Mismatch is one figure an agent claimed that the ledger's own figures
// contradict. The ledger's figures win; the list is kept for the HTTP API
// and the logs. The fields are in the order of their JSON names.
type Mismatch struct {
	// Account is the agent that made the claim.
	Account string `json:"account"`
	// Claimed is the figure as the agent wrote it; Ledger is the ledger's
	// figure, or "" where it has none (an unknown transaction).
	Claimed string    `json:"claimed"`
	EventID string    `json:"event_id"`
	Field   string    `json:"field"`
	Ledger  string    `json:"ledger"`
	Seq     uint64    `json:"seq"`
	Time    time.Time `json:"time"`
	// TransactionID is the transaction a credit.received names.
	TransactionID string `json:"transaction_id"`
	// Type is credit.received or credit.balance.
	Type string `json:"type"`
}

// Mismatches returns up to limit mismatches found by events after
// afterSeq, oldest first. limit is capped at EntriesLimitMax.
func (l *Ledger) Mismatches(afterSeq uint64, limit int) []Mismatch {
	return page(l.mismatches, func(m *Mismatch) uint64 { return m.Seq }, afterSeq, limit)
}

// claims collects the mismatches of one claim. It copies what it needs of
// the event rather than point to it, so that the event stays on Apply's
// stack.
type claims struct {
	from, eventID, typ, txID string
	seq                      uint64
	time                     time.Time
	found                    []Mismatch
}

func newClaims(e *Event, typ, txID string) claims {
	return claims{from: e.From, eventID: e.EventID, typ: typ, txID: txID, seq: e.Seq, time: e.Time}
}

func (c *claims) add(field, claimed, ledger string) {
	c.found = append(c.found, Mismatch{
		Account:       strings.Clone(c.from),
		Claimed:       strings.Clone(claimed),
		EventID:       strings.Clone(c.eventID),
		Field:         field,
		Ledger:        ledger,
		Seq:           c.seq,
		Time:          timeOf(unixNano(c.time)),
		TransactionID: strings.Clone(c.txID),
		Type:          c.typ,
	})
}

// figure compares a claimed figure, if given, with the ledger's.
func (c *claims) figure(field string, claimed *protocol.Amount, ledger *apd.Decimal) {
	if claimed != nil && !sameValue(claimed.Decimal(), ledger) {
		c.add(field, claimed.String(), ledger.Text('f'))
	}
}

// record keeps the mismatches found and says how many there were.
func (l *Ledger) record(c *claims) Outcome {
	l.mismatches = append(l.mismatches, c.found...)
	return Outcome{Status: protocol.StatusOK, Mismatches: len(c.found)}
}

// received checks a credit.received, the payee's (FROM's) claim that it
// got a transaction: that the transaction is booked, is paid to FROM, has
// that amount and, if a balance is claimed, left FROM's balance there.
func (l *Ledger) received(e *Event, p *protocol.CreditReceived) Outcome {
	if o := l.checkSender(e); o != nil {
		return *o
	}
	if why := checkID("transaction_id", p.TransactionID); why != "" {
		return refuse(protocol.StatusBadRequest, "%s", why)
	}
	if why := checkAmount("amount", p.Amount, positive); why != "" {
		return refuse(protocol.StatusBadRequest, "%s", why)
	}
	if p.Balance != nil {
		if why := checkAmount("balance", p.Balance, anySign); why != "" {
			return refuse(protocol.StatusBadRequest, "%s", why)
		}
	}
	if l.takenBefore(e) {
		return Outcome{Status: protocol.StatusOK, Replayed: true}
	}
	l.take(e)
	c := newClaims(e, protocol.TypeCreditReceived, p.TransactionID)
	ref, _ := l.findTx(p.TransactionID, l.txs.hash(p.TransactionID))
	if ref.posting == 0 {
		c.add("transaction_id", p.TransactionID, "")
		return l.record(&c)
	}
	post := l.postings.get(ref.posting - 1)
	if payee := l.uri(post.to); payee != e.From {
		c.add("to", e.From, payee)
		return l.record(&c)
	}
	f := l.figures(ref.posting - 1)
	c.figure("amount", p.Amount, dec(f.amount))
	c.figure("balance", p.Balance, dec(f.toBalance))
	return l.record(&c)
}

// balance handles a credit.balance. With an empty body addressed to the
// node it is a query, answered with FROM's figures (Outcome.View).
// Otherwise each figure it states is FROM's claim about its own account,
// compared with the ledger's as they stand.
func (l *Ledger) balance(e *Event, p *protocol.CreditBalance) Outcome {
	if o := l.checkSender(e); o != nil {
		return *o
	}
	for _, f := range [...]struct {
		name string
		a    *protocol.Amount
	}{{"balance", p.Balance}, {"earned_total", p.EarnedTotal}, {"spent_total", p.SpentTotal}, {"pending", p.Pending}} {
		if f.a != nil {
			if why := checkAmount(f.name, f.a, anySign); why != "" {
				return refuse(protocol.StatusBadRequest, "%s", why)
			}
		}
	}
	v, _ := l.Account(e.From)
	if !p.Claims() {
		if e.To != l.node {
			return Outcome{Status: protocol.StatusOK}
		}
		return Outcome{Status: protocol.StatusOK, Account: v.URI, Balance: v.Balance, Available: v.Available, View: &v}
	}
	if l.takenBefore(e) {
		// A copy of a signed claim, resent after the figures moved,
		// was recorded as a new claim, now false, against its sender
		// (helper-97).
		return Outcome{Status: protocol.StatusOK, Replayed: true}
	}
	l.take(e)
	c := newClaims(e, protocol.TypeCreditBalance, "")
	c.figure("balance", p.Balance, v.Balance.Decimal())
	c.figure("earned_total", p.EarnedTotal, v.EarnedTotal.Decimal())
	c.figure("spent_total", p.SpentTotal, v.SpentTotal.Decimal())
	c.figure("pending", p.Pending, v.Pending.Decimal())
	return l.record(&c)
}
