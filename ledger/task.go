package ledger

import (
	"strings"

	"github.com/aglx/ledger/protocol"
)

// taskAssign holds the CREDITS a task.assign offers: the owner (FROM)
// cannot spend them while the worker (TO) works. 402 if the owner's
// available balance does not cover them. Payment stays an explicit
// transfer; the hold ends when the task does (taskEnd) or after
// TaskHoldTTL of event time.
//
// The reference's task.assign has no task_id, so the hold is named by the
// event id of the task.assign and, if the body has one, by its task_id as
// well; a task.result, task.reject or task.cancel may use either. A second
// task.assign from the same owner with the same task_id repeats the first
// reply if it offers the same credits to the same worker, else gets 409.
// A task.assign without CREDITS is none of the ledger's business.
func (l *Ledger) taskAssign(e *Event, p *protocol.TaskAssign) Outcome {
	if e.Credits == nil {
		return Outcome{}
	}
	if o := l.checkSender(e); o != nil {
		return *o
	}
	if why := checkAmount("CREDITS", e.Credits, positive); why != "" {
		return refuse(protocol.StatusBadRequest, "%s", strings.Replace(why, `field "CREDITS"`, "the CREDITS header", 1))
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
	amount := mustFixed(e.Credits.Decimal())
	// A signed offer is one offer however often it is sent: without a
	// task_id each copy would place a hold of its own until the owner ran
	// out. Its name shares the task_id index, where no task_id can match
	// it (signedName).
	name := p.TaskID
	if name == "" {
		name = signedName(e)
	}
	if name != "" {
		if r := l.holds.tasks.find(&l.strs, taskKey(e.From, name)); r != nil {
			h := l.holds.get(r.a - 1)
			if party := l.strs.get(h.party); party != e.To || cmpFixed(h.amount, amount) != 0 {
				return refuse(protocol.StatusConflict, "task_id %s was assigned at seq %d to %s for %s credits; a message with the same key must have the same content",
					quoteURI(p.TaskID), h.seq, quoteURI(party), h.amount.text())
			}
			o := l.placed(r.a - 1)
			o.Replayed = true
			return o
		}
	}
	h := hold{kind: holdTask, amount: amount, expires: unixNano(e.Time.Add(TaskHoldTTL))}
	i, o := l.place(e, pt, h, holdText{party: e.To, taskID: p.TaskID})
	if o != nil {
		return *o
	}
	l.holds.tasks.insert(&l.strs, taskKey(e.From, e.EventID), i+1, 0)
	if name != "" {
		l.holds.tasks.insert(&l.strs, taskKey(e.From, name), i+1, 0)
	}
	return l.placed(i)
}

// taskEnd releases the hold of a task that ended: by a task.result or
// task.reject from its worker (addressed to the owner), or a task.cancel
// from its owner. Anything else (another sender, an unknown task, a hold
// already ended, a failed signature) leaves the state alone and gets the
// neutral outcome: task messages are not the ledger's to refuse.
func (l *Ledger) taskEnd(e *Event, taskID string, byOwner bool) Outcome {
	if e.Auth == AuthInvalid || e.Auth > AuthNode || (e.From == l.node && e.Auth != AuthNode) {
		return Outcome{}
	}
	owner, worker := e.To, e.From
	if byOwner {
		owner, worker = e.From, ""
	}
	r := l.holds.tasks.find(&l.strs, taskKey(owner, taskID))
	if r == nil {
		return Outcome{}
	}
	h := l.holds.get(r.a - 1)
	if h.state != holdLive || (worker != "" && l.strs.get(h.party) != worker) {
		return Outcome{}
	}
	l.release(e, r.a-1, holdReleased, unixNano(e.Time))
	a := l.accounts.get(h.account)
	return Outcome{Status: protocol.StatusOK, Account: a.name(&l.strs), Balance: amountOfFixed(a.balance), Available: l.available(a)}
}
