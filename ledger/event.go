package ledger

import (
	"fmt"
	"time"

	"github.com/aglx/ledger/protocol"
)

// Auth is what the caller found when it checked an event's signature. The
// ledger does not verify signatures itself, because the keys live in the
// registry projection; it only decides what each result allows.
type Auth uint8

// The results of a signature check.
//
// The zero value is AuthInvalid on purpose: an Event whose caller forgot to
// say how it was checked is refused (401), never taken as unsigned.
const (
	// AuthInvalid: the sender has a key and the signature is missing or
	// does not verify. Value-moving messages get 401.
	AuthInvalid Auth = iota
	// AuthUnsigned: the sender has no key registered, so an unsigned
	// message is accepted (AGLX-NOTES.md section 4).
	AuthUnsigned
	// AuthValid: the signature verifies against the sender's current key.
	AuthValid
	// AuthNode: the signature verifies against the node's own key. Only
	// with it may a message from the node's URI issue credits or carry a
	// credit.adjust.
	AuthNode
)

// String names the result for logs and test failures.
func (a Auth) String() string {
	switch a {
	case AuthInvalid:
		return "invalid"
	case AuthUnsigned:
		return "unsigned"
	case AuthValid:
		return "valid"
	case AuthNode:
		return "node"
	}
	return "unknown"
}

// Event is one message of the log as the ledger reads it: the envelope's
// facts, the decoded payload, and the result of the signature check. The
// caller builds it from an events.Envelope and protocol.Parse; the ledger
// imports neither the log nor the clock.
type Event struct {
	// Seq is the stream sequence. Apply requires it to grow strictly.
	Seq uint64
	// EventID is the ULID the node gave the message on receipt. Postings
	// name it, and it keys the hold of a task.assign.
	EventID string
	// Time is when the node received the message (Envelope.ReceivedAt). It
	// is the ledger's only clock: holds expire by it.
	Time time.Time
	// From and To are the canonical URIs (protocol.URI.String()).
	From, To string
	// MessageID is the frame's ID header, or "" if it had none. It names an
	// unsigned credit.reward without task_id for idempotency.
	MessageID string
	// SignedName names a signed message by what its signature covers (a
	// hash of the signing input: FROM, TO, TYPE, CREDITS and the canonical
	// body), or is "". The caller sets it where NamedBySignature says so:
	// those messages carry no key of their own in the signed body, and the
	// ID header is not signed, so anyone holding a copy (the addressee, to
	// whom it was relayed) could send it again under a new ID and have it
	// paid again. Named by its signed content, a signed message takes
	// effect once.
	SignedName string
	// Credits is the CREDITS header of a task.assign, or nil.
	Credits *protocol.Amount
	// Auth is the result of the signature check.
	Auth Auth
	// Payload is the typed body, e.g. *protocol.CreditTransfer. The ledger
	// switches on its type; payloads it does not handle leave the state
	// unchanged.
	Payload protocol.Payload
}

// Outcome is what Apply did with one event.
//
// Status is zero when the event is none of the ledger's business (an
// ack, a registry message, a task message that places or ends no hold):
// the caller replies as it would without a ledger. Status 200 means
// applied or recorded; for a task message (a hold placed or released) the
// caller still replies as it would for the task. Anything else is a
// refusal, with Reason written for the sender, and a refusal never changes
// the state (holds that expire by the event's time still expire: that is
// time passing, not the event).
//
// The TransactionID, Account, Balance and Available of the reply are the
// sender's, also for a credit.adjust, whose sender is the node: the
// adjusted account's figures are in Posting. A credit.approve or a
// task.assign with CREDITS answers with the holder's figures after the
// hold (TransactionID is empty for a task).
type Outcome struct {
	Status protocol.Status
	Reason string

	// TransactionID, Balance and Available are the reply to an applied
	// credit.transfer, credit.reward, credit.adjust or credit.approve:
	// the transaction, and the figures of Account, the sender, right
	// after it was applied. A repeated message gets the figures of the
	// first time again, not today's. A reward's transaction id is its
	// event id; an adjustment's is the transaction it corrects.
	TransactionID string
	Account       string
	Balance       protocol.Amount
	Available     protocol.Amount

	// Replayed is set when the event repeated a message already applied
	// (same idempotency key, same content): nothing changed and the reply
	// fields are those of the first time.
	Replayed bool
	// Posting is the posting the event made; Posting.Seq is zero if it
	// made none. An event makes at most one posting.
	Posting Entry
	// View is set for a credit.balance query (an empty body addressed to
	// the node): the sender's figures for the reply.
	View *AccountView
	// Mismatches counts the disagreements found in an agent's claim
	// (credit.received, credit.balance); see Ledger.Mismatches.
	Mismatches int
}

// Posted reports whether the event made a posting.
func (o *Outcome) Posted() bool { return o.Posting.Seq != 0 }

// refuse builds a refusal.
func refuse(status protocol.Status, format string, args ...any) Outcome {
	return Outcome{Status: status, Reason: fmt.Sprintf(format, args...)}
}

// NamedBySignature says whether the ledger names e by SignedName, so the
// caller knows when to compute that hash: a credit.reward, credit.adjust,
// credit.request, credit.deny, a claim (credit.received, credit.balance
// with figures) or a task.assign with CREDITS whose signature held (or
// which the node signed). Transfers and approvals are
// named by their signed transaction_id and need no hash. The rule lives
// here, beside the folds that use the name, so that a type cannot be
// named in one place and looked up by its ID in the other.
func (e *Event) NamedBySignature() bool {
	if e.Auth != AuthValid && e.Auth != AuthNode {
		return false
	}
	switch p := e.Payload.(type) {
	case *protocol.CreditReward, *protocol.CreditAdjust, *protocol.CreditRequest, *protocol.CreditDeny, *protocol.CreditReceived:
		return true
	case *protocol.CreditBalance:
		return p.Claims()
	case *protocol.TaskAssign:
		return e.Credits != nil
	}
	return false
}
