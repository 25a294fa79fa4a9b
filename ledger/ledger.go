package ledger

import (
	"fmt"
	"strings"

	"github.com/aglx/ledger/protocol"
	"github.com/cockroachdb/apd/v3"
)

// Ledger is the credit ledger: accounts, postings, holds and the records of
// requests and claims, folded from the log one event at a time.
//
// Its big tables hold no Go pointers (arena.go): strings live in strs, and
// rows name accounts, postings and holds by 32-bit index.
type Ledger struct {
	node string       // the node's URI: its account is the issuance account
	ctx  *apd.Context // protocol.MoneyContext, made once: stored figures
	wide *apd.Context // wideContext: derived figures
	seq  uint64       // sequence of the last event applied

	strs     arena
	accounts accountTable
	postings chunked[posting]
	blocks   chunked[entryBlock]
	// entrySkips lists, for each account history of more than
	// entrySkipEvery blocks (by its first block), every entrySkipEvery-th
	// block of it, so that a page deep in a long history starts near its
	// place (eachEntry). Derived: rebuilt with the histories at load.
	entrySkips map[uint32][]uint32
	// bigFigures holds the posting figures too big to pack (packed.go);
	// replyPending the pending figures of postings where it is not zero
	// (postingFigures), by posting index.
	bigFigures   chunked[fixed]
	replyPending map[uint32]fixed

	// txs names every transaction_id the ledger has taken: a booked
	// transfer, a reward (by its event id), or an approval, or both an
	// approval and the transfer that settled it (findTx). The key is never
	// released, so a transaction is booked once however late it is sent
	// again.
	txs hashIndex
	// rewards and adjusts map the idempotency key of a credit.reward and
	// a credit.adjust (rewardKey, messageKey) to its posting index + 1.
	rewards keyIndex
	adjusts keyIndex
	// signed names the signed credit.request and credit.deny messages
	// taken (signedName), each mapped to its event's sequence (splitSeq):
	// a copy sent under another ID takes no effect. Neither carries a key
	// of its own, and the relay hands the signed frame to its addressee,
	// who could open request after request, or close them, with one.
	signed keyIndex

	holds holdTable

	requests   requestLog
	mismatches []Mismatch

	// warmSink keeps what Warm reads, so that the compiler keeps the reads.
	warmSink uint32
}

// emptyTables gives l empty tables: New's, and LoadState's before it
// reads a saved state into them.
func (l *Ledger) emptyTables() {
	l.accounts = newAccountTable()
	l.replyPending = make(map[uint32]fixed)
	l.entrySkips = make(map[uint32][]uint32)
	l.txs = newHashIndex()
	l.rewards, l.adjusts, l.signed = newKeyIndex(), newKeyIndex(), newKeyIndex()
	l.holds = newHoldTable()
	l.requests = newRequestLog()
}

// New returns an empty ledger for the node with URI nodeURI, whose account
// is the issuance account. nodeURI must be canonical (protocol.URI.String);
// anything else is a programmer error and panics.
func New(nodeURI string) *Ledger {
	l := &Ledger{node: strings.Clone(nodeURI), ctx: protocol.MoneyContext(), wide: wideContext()}
	l.emptyTables()
	if why := l.checkNewURI("node URI", nodeURI); why != "" {
		panic("ledger: New: " + why)
	}
	if id := l.create(l.node); id != issuance {
		panic("ledger: the issuance account must be the first")
	}
	return l
}

// Node returns the node's URI, which holds the issuance account.
func (l *Ledger) Node() string { return l.node }

// Seq returns the sequence of the last event applied, 0 before the first.
func (l *Ledger) Seq() uint64 { return l.seq }

// Apply folds one event into the ledger and says what it did.
//
// Apply is deterministic: its result depends only on the events applied
// before, never on the clock or on map order. It requires e.Seq to be
// greater than the sequence of every event applied before (the log's
// order; projections.Runner guarantees it) and e.EventID to be set (the log
// sets it on every event), and panics otherwise: a fold fed out of order
// would silently diverge from its replay.
//
// Before the event itself, Apply releases every hold whose expiry is at or
// before e.Time: time moves only with events.
func (l *Ledger) Apply(e Event) (o Outcome) {
	if e.Seq <= l.seq {
		panic(fmt.Sprintf("ledger: Apply(seq %d) after seq %d: events must be applied once each, in stream order", e.Seq, l.seq))
	}
	if e.EventID == "" {
		panic(fmt.Sprintf("ledger: Apply(seq %d) without an event id", e.Seq))
	}
	l.seq = e.Seq
	l.expire(&e)
	switch p := e.Payload.(type) {
	case *protocol.CreditTransfer:
		l.transfer(&e, p, &o) // in place: see booked
		return o
	case *protocol.CreditReward:
		return l.reward(&e, p)
	case *protocol.CreditAdjust:
		return l.adjust(&e, p)
	case *protocol.CreditApprove:
		return l.approve(&e, p)
	case *protocol.CreditRequest:
		return l.request(&e, p)
	case *protocol.CreditDeny:
		return l.deny(&e, p)
	case *protocol.CreditReceived:
		return l.received(&e, p)
	case *protocol.CreditBalance:
		return l.balance(&e, p)
	case *protocol.TaskAssign:
		return l.taskAssign(&e, p)
	case *protocol.TaskResult:
		return l.taskEnd(&e, p.TaskID, false)
	case *protocol.TaskReject:
		return l.taskEnd(&e, p.TaskID, false)
	case *protocol.TaskCancel:
		return l.taskEnd(&e, p.TaskID, true)
	}
	return Outcome{}
}

// checkSender applies the signature rules to a message that moves or
// reserves credits, and returns a refusal or nil. A message from the node's
// URI must carry the node's signature; any other sender must not have
// failed its check (unsigned is fine while it has no key).
func (l *Ledger) checkSender(e *Event) *Outcome {
	switch {
	case e.From == l.node && e.Auth != AuthNode:
		o := refuse(protocol.StatusUnauthorized, "a message from the node's URI %s must be signed with the node's key", l.node)
		return &o
	case e.Auth == AuthInvalid:
		o := refuse(protocol.StatusUnauthorized, "the signature is missing or does not verify against the key of %s", quoteURI(e.From))
		return &o
	case e.Auth > AuthNode:
		o := refuse(protocol.StatusUnauthorized, "unknown signature check result %d", e.Auth)
		return &o
	}
	return nil
}

// checkID says why id cannot serve as the field name, or returns "": an
// identifier is 1 to protocol.IDSizeMax bytes of visible ASCII, as the
// protocol requires, so that it keys an index and prints in a reply as is.
func checkID(name, id string) string {
	switch {
	case id == "":
		return fmt.Sprintf("field %q is missing", name)
	case len(id) > protocol.IDSizeMax:
		return fmt.Sprintf("field %q is longer than %d bytes", name, protocol.IDSizeMax)
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] >= 0x7f {
			return fmt.Sprintf("field %q may hold only visible ASCII characters, without spaces", name)
		}
	}
	return ""
}

// quotedURIMax bounds a URI quoted in a reason: a canonical URI is at
// most 253 bytes of name, its scheme and a port.
const quotedURIMax = 300 // bytes

// quoteURI quotes a URI for a reason, bounded so that a reply never echoes
// much of what the sender wrote.
func quoteURI(s string) string {
	if len(s) > quotedURIMax {
		s = s[:quotedURIMax]
	}
	return fmt.Sprintf("%q", s)
}
