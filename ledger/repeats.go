package ledger

import "github.com/aglx/ledger/protocol"

// Repeats reports whether Apply would answer e as a message already taken:
// its idempotency key (a transfer's booked transaction_id, an approval's
// transaction_id, a reward's or an adjustment's key, a signed request's,
// denial's or offer's name) names what an earlier event did, so that
// Apply changes nothing for it but to answer it again (or refuse it with
// 409, for other content under the same key), beyond the hold expiry that
// every event's time brings. Nothing here ever answers true for a message
// Apply would book or hold anew: the keys it looks up are never removed,
// and each is the one Apply's own repeat check finds first
// (TestRepeatsChangesNothing). The caller sets SignedName as for Apply
// (NamedBySignature).
//
// The memory of refused signed messages (projections) asks it before it
// refuses a sealed sender's message: a resend of a message that was
// taken, whose reply was lost, was refused (429), and signed again it
// was taken twice (helper-112).
func (l *Ledger) Repeats(e Event) bool {
	switch p := e.Payload.(type) {
	case *protocol.CreditTransfer:
		// A transaction_id that names an approval's hold only would
		// settle it: that is not a repeat.
		ref, _ := l.findTx(p.TransactionID, l.txs.hash(p.TransactionID))
		return ref.posting != 0
	case *protocol.CreditApprove:
		_, found := l.findTx(p.TransactionID, l.txs.hash(p.TransactionID))
		return found
	case *protocol.CreditReward:
		key, why := rewardKey(&e, p)
		return why == "" && l.rewards.find(&l.strs, key) != nil
	case *protocol.CreditAdjust:
		key, why := messageKey(&e)
		return why == "" && l.adjusts.find(&l.strs, key) != nil
	case *protocol.CreditRequest, *protocol.CreditDeny:
		return l.takenBefore(&e)
	case *protocol.TaskAssign:
		if e.Credits == nil {
			return false
		}
		name := p.TaskID
		if name == "" {
			name = signedName(&e)
		}
		return name != "" && l.holds.tasks.find(&l.strs, taskKey(e.From, name)) != nil
	}
	return false
}
