package projections

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/aglx/ledger/ledger"
	"github.com/aglx/ledger/protocol"
)

// Authenticator decides whether a message's signature holds, as of its
// place in the log. The registry is the real one; it must be applied before
// any projection that asks it about the same event.
type Authenticator interface {
	Authenticate(e *Event) Verdict
}

// Credits folds credit and task messages into the ledger and answers the
// ones whose outcome the sender waits for: an applied transfer, reward or
// adjustment gets 200 with the sender's figures, a refusal gets its status
// and reason, a balance query gets the ledger's credit.balance.
type Credits struct {
	L      *ledger.Ledger
	auth   Authenticator
	outbox *Outbox // nil: no replies (an audit)
	// Observe, if set, sees every outcome; `aglx audit` checks each posting
	// with it.
	Observe func(e *Event, out ledger.Outcome)

	warm []ledger.Event // Warm's scratch
	// refusedID is the id of the last event the ledger refused.
	refusedID string
	// refused remembers refused signed messages, so that a copy is not
	// booked later (refused.go); window is the signature window it keeps
	// them for.
	refused *refusedCopies
	window  time.Duration
}

// NewCredits returns the ledger projection for the node at nodeURI. The
// signature window is auth's (the registry's), or SignatureWindowDefault.
func NewCredits(nodeURI string, auth Authenticator, outbox *Outbox) *Credits {
	c := &Credits{L: ledger.New(nodeURI), auth: auth, outbox: outbox, refused: newRefusedCopies(), window: SignatureWindowDefault}
	if a, ok := auth.(interface{ SignatureWindow() time.Duration }); ok {
		c.window = a.SignatureWindow()
	}
	return c
}

// Name implements Projection.
func (c *Credits) Name() string { return "ledger" }

// Snapshot implements Snapshotter.
func (c *Credits) Snapshot() ([]byte, error) { return c.L.Snapshot() }

// AnswersCredits lists the TYPEs whose reply the ledger may decide.
var AnswersCredits = []string{
	protocol.TypeCreditTransfer, protocol.TypeCreditReward, protocol.TypeCreditAdjust,
	protocol.TypeCreditApprove, protocol.TypeCreditBalance, protocol.TypeCreditRequest,
	protocol.TypeCreditDeny, protocol.TypeCreditReceived, protocol.TypeTaskAssign,
}

// Warm implements Warmer: the ledger reads the rows the stretch's credit
// and task messages will touch before the runner applies them.
func (c *Credits) Warm(evs []*Event) {
	buf := c.warm[:0]
	for _, e := range evs {
		if e.Msg == nil {
			continue
		}
		switch e.Msg.Info.Group {
		case protocol.GroupCredit, protocol.GroupTask:
			buf = append(buf, ledger.Event{From: e.From, To: e.To, Payload: e.Msg.Payload})
		}
	}
	c.L.Warm(buf)
	clear(buf) // keep no payload alive
	c.warm = buf[:0]
}

// Apply implements Projection.
func (c *Credits) Apply(e *Event) {
	if e.Msg == nil {
		return
	}
	switch e.Msg.Info.Group {
	case protocol.GroupCredit, protocol.GroupTask:
	default:
		return
	}
	verdict := c.verdict(e)
	signed := verdict.Auth == AuthValid || verdict.Auth == AuthNode
	var name string // e's replayKey, once made
	ev := ledger.Event{
		Seq: e.Seq, EventID: e.ID, Time: e.ReceivedAt,
		From: e.From, To: e.To, MessageID: e.Header(protocol.HeaderID),
		Credits: e.Msg.Credits, Auth: verdict.Auth, Payload: e.Msg.Payload,
	}
	if ev.NamedBySignature() {
		name = replayKey(e)
		ev.SignedName = name
	}
	c.refused.advance(e, c.window)
	if signed {
		// A copy of a refused message is refused here, and the ledger
		// never sees it: deterministic all the same, since the memory
		// is a fold of the log too (refused.go). A sealed sender's
		// message that the ledger would answer as one already taken (a
		// resend whose reply was lost) goes on to the ledger, which
		// changes nothing for it: refused, and signed again, it was
		// taken twice (helper-112).
		if out, copied := c.refused.copyOf(e, &name); copied && !(out.Status == protocol.StatusTooManyRequests && c.L.Repeats(ev)) {
			// The copy is a credit event all the same: the ledger sees
			// its time, and releases the holds that expire by it
			// (LEDGER.md, "Expiry"), as for any event it refuses.
			c.L.Apply(ledger.Event{Seq: ev.Seq, EventID: ev.EventID, Time: ev.Time})
			if c.Observe != nil {
				c.Observe(e, out)
			}
			c.refusedID = e.ID
			if c.outbox != nil {
				c.outbox.Put(e.Seq, ErrorReply(out.Status, out.Reason))
			}
			return
		}
	}
	out := c.L.Apply(ev)
	if out.Status == protocol.StatusUnauthorized && verdict.Reason != "" {
		out.Reason = verdict.Reason // the signature check says best what is wrong
	}
	if (signed || verdict.Stale && stampedAhead(e)) && out.Status != 0 && out.Status != protocol.StatusOK && sealable(e) {
		if name == "" {
			name = replayKey(e)
		}
		c.refused.remember(e, name, out.Status, c.window)
	}
	if c.Observe != nil {
		c.Observe(e, out)
	}
	r, ok := creditReply(e, out)
	if !ok && verdict.Auth == AuthInvalid {
		// A task message whose signature fails (a task.result, reject or
		// cancel the sender's key requires signed, or any task message
		// that carries a signature which does not verify) ends no hold
		// (a neutral outcome: the ledger does not refuse task messages),
		// but it is refused all the same: answered 202, the relay
		// delivered the forgery to its addressee with the node's
		// RELAYED-BY (helper-56, helper-63). The outbox's refusal record
		// is what the relay withholds by.
		reason := verdict.Reason
		if reason == "" {
			reason = "the sender has a key, and the signature is missing or does not verify"
		}
		r, ok = ErrorReply(protocol.StatusUnauthorized, reason), true
	}
	if ok && r.Type == protocol.TypeError {
		c.refusedID = e.ID
	}
	if ok && c.outbox != nil {
		c.outbox.Put(e.Seq, r)
	}
}

// stampedAhead reports whether e's signed timestamp lies after its receive
// time. A message refused as stale for that reason passes the window
// later, unchanged, and was booked by a copy then (helper-112); one stale
// because it is old never passes it again, and remembering those would let
// anyone fill a sender's share with copies of its old messages.
func stampedAhead(e *Event) bool {
	ts, ok := signedTimestamp(e)
	return ok && ts.After(e.ReceivedAt)
}

// RefusedEvent reports whether the ledger refused e while applying it.
func (c *Credits) RefusedEvent(e *Event) bool { return e.ID != "" && e.ID == c.refusedID }

func (c *Credits) verdict(e *Event) Verdict {
	if c.auth == nil {
		return Verdict{Auth: AuthUnsigned}
	}
	return c.auth.Authenticate(e)
}

// creditAck is the body of the reply to an applied credit message.
// The bridge adds the event's id and sequence.
type creditAck struct {
	TransactionID string          `json:"transaction_id"`
	Balance       protocol.Amount `json:"balance"`
	Available     protocol.Amount `json:"available"`
	Replayed      bool            `json:"replayed,omitempty"`
}

// appendJSON appends what json.Marshal writes for a, byte for byte,
// without reflection: every settled transfer is answered with one, on the
// fold's goroutine.
func (a creditAck) appendJSON(b []byte) []byte {
	b = append(b, `{"transaction_id":`...)
	b = appendMarshalledString(b, a.TransactionID)
	b = append(b, `,"balance":`...)
	b = strconv.AppendQuote(b, a.Balance.String()) // digits, a sign and a point
	b = append(b, `,"available":`...)
	b = strconv.AppendQuote(b, a.Available.String())
	if a.Replayed {
		b = append(b, `,"replayed":true`...)
	}
	return append(b, '}')
}

// appendMarshalledString appends s as json.Marshal writes a string. Plain
// printable ASCII, what transaction ids are in practice, is copied; for
// anything else json.Marshal itself does the escaping.
func appendMarshalledString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7F || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// creditBalance is the node's answer to a balance query: the ledger's
// figures, money as strings.
type creditBalance struct {
	Balance     protocol.Amount `json:"balance"`
	Available   protocol.Amount `json:"available"`
	EarnedTotal protocol.Amount `json:"earned_total"`
	SpentTotal  protocol.Amount `json:"spent_total"`
	Pending     protocol.Amount `json:"pending"`
	Updated     string          `json:"updated,omitempty"`
	// UpdatedSeq is the event that last changed the account; "seq", as in
	// every reply, is the query's own event.
	UpdatedSeq uint64 `json:"updated_seq"`
}

func creditReply(e *Event, out ledger.Outcome) (Reply, bool) {
	switch {
	case out.Status == 0:
		return Reply{}, false
	case out.Status != protocol.StatusOK:
		return ErrorReply(out.Status, out.Reason), true
	case out.View != nil:
		v := out.View
		b := creditBalance{Balance: v.Balance, Available: v.Available, EarnedTotal: v.EarnedTotal, SpentTotal: v.SpentTotal, Pending: v.Pending, UpdatedSeq: v.Seq}
		if !v.Updated.IsZero() {
			b.Updated = v.Updated.UTC().Format(timeFormatRFC3339)
		}
		body, _ := json.Marshal(b)
		return Reply{Type: protocol.TypeCreditBalance, Status: protocol.StatusOK, Body: body}, true
	case out.TransactionID != "":
		ack := creditAck{TransactionID: out.TransactionID, Balance: out.Balance, Available: out.Available, Replayed: out.Replayed}
		return Reply{Type: "ack", Status: protocol.StatusOK, Body: ack.appendJSON(nil)}, true
	}
	return Reply{}, false
}

// timeFormatRFC3339 is how replies write event times.
const timeFormatRFC3339 = "2006-01-02T15:04:05Z07:00"

// ErrorReply is a refusal as a reply.
func ErrorReply(status protocol.Status, reason string) Reply {
	body, _ := json.Marshal(struct {
		Status int    `json:"status"`
		Reason string `json:"reason"`
	}{int(status), reason})
	return Reply{Type: "error", Status: status, Body: body}
}
