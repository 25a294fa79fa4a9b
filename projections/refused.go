package projections

import (
	"fmt"
	"time"

	"github.com/aglx/ledger/ledger"
	"github.com/aglx/ledger/protocol"
)

// Bounds of the memory of refused signed messages (refusedCopies).
const (
	// RefusedCopiesMax bounds the refused signed credit and task messages
	// remembered at once, in messages (about 150 bytes each).
	RefusedCopiesMax = 100_000 // messages
	// RefusedCopiesPerSenderMax bounds one sender's share of them, in
	// messages, so that one agent's refusals cannot push out another's.
	RefusedCopiesPerSenderMax = 1_000 // messages
	// refusedSkew is added to how long a refusal is remembered: the fold's
	// clock is the latest receive time applied, and events from several
	// connections reach the log a little out of their receive order.
	refusedSkew = time.Minute
)

// refusedCopies remembers the signed credit and task messages the ledger
// refused, by what their signature covers (replayKey), for as long as a
// copy could still pass the signature window, and refuses the copies.
//
// A refusal binds nothing in the ledger: a transfer refused for want of
// funds may be sent again. But the signed frame is in the log, which any
// reader of the stream may read, and until 2026-12-02 anyone could send
// it again, unchanged, once the sender had the funds, and have it booked:
// a transfer, an approval's hold or a task's hold the sender had been
// told was refused (helper-108). Now a copy is refused (409) while its
// timestamp can pass the window; a sender that means to try again signs
// the message again, with a new timestamp.
//
// Only messages whose signature verified are remembered: anyone could
// send a message with a bad signature in another's name, and by
// remembering it refuse the real one later. A refusal that cannot be
// remembered (the sender's share, or the whole memory, full) seals the
// sender up to the refused message's timestamp instead: its signed credit
// and task messages stamped no later are refused (429) until that
// timestamp has left the window. So no refused message can ever be booked
// by a copy, and the memory stays bounded.
type refusedCopies struct {
	byName    map[string]refusedCopy
	perSender map[string]int
	order     []string // names, oldest first; expiry follows this order
	head      int      // order[head:] are live or stale names
	// seals holds, by sender, the latest timestamp of a refusal that
	// could not be remembered.
	seals map[string]time.Time
	now   time.Time // the latest receive time applied
	// sweep is when seals are next looked through for ones past the
	// window: not at every event, since a node with many sealed senders
	// would pay for each of them at every credit message.
	sweep time.Time
}

// refusedSealSweep is how often, in event time, moot seals are dropped.
const refusedSealSweep = 10 * time.Second

type refusedCopy struct {
	from    string
	seq     uint64
	status  protocol.Status
	expires time.Time
}

func newRefusedCopies() *refusedCopies {
	return &refusedCopies{byName: map[string]refusedCopy{}, perSender: map[string]int{}, seals: map[string]time.Time{}}
}

// advance moves the memory's clock to e's receive time and forgets what
// is too old to be copied within window.
func (m *refusedCopies) advance(e *Event, window time.Duration) {
	if e.ReceivedAt.After(m.now) {
		m.now = e.ReceivedAt
	}
	for m.head < len(m.order) {
		name := m.order[m.head]
		c, ok := m.byName[name]
		if ok && !m.now.After(c.expires) {
			break
		}
		if ok {
			delete(m.byName, name)
			if m.perSender[c.from]--; m.perSender[c.from] <= 0 {
				delete(m.perSender, c.from)
			}
		}
		m.order[m.head] = ""
		m.head++
	}
	if m.head > len(m.order)/2 && m.head > 1024 {
		m.order = append(m.order[:0], m.order[m.head:]...)
		m.head = 0
	}
	if len(m.seals) > 0 && m.now.After(m.sweep) {
		for from, ts := range m.seals {
			if m.now.Sub(ts) > window+refusedSkew {
				delete(m.seals, from)
			}
		}
		m.sweep = m.now.Add(refusedSealSweep)
	}
}

// copyOf answers e if it is a copy of a refused message, or a message of a
// sealed sender stamped no later than its seal. *name is e's replayKey,
// made here if it is "" and the sender has refusals remembered: most
// senders have none, and their messages pay for no hash.
func (m *refusedCopies) copyOf(e *Event, name *string) (ledger.Outcome, bool) {
	if seal, ok := m.seals[e.From]; ok {
		if ts, ok := signedTimestamp(e); ok && !ts.After(seal) {
			return ledger.Outcome{Status: protocol.StatusTooManyRequests, Reason: fmt.Sprintf(
				"%s had more signed credit and task messages refused than the node remembers at once; those stamped %s or earlier are refused until that time has left the signature window: sign the message again with a later timestamp",
				e.From, rfc3339(seal))}, true
		}
	}
	if m.perSender[e.From] == 0 {
		return ledger.Outcome{}, false
	}
	if *name == "" {
		*name = replayKey(e)
	}
	c, ok := m.byName[*name]
	if !ok {
		return ledger.Outcome{}, false
	}
	return ledger.Outcome{Status: protocol.StatusConflict, Reason: fmt.Sprintf(
		"a copy of a signed message the node refused at seq %d (%d): a refused message never takes effect; to try again, sign it again with a new timestamp",
		c.seq, int(c.status))}, true
}

// remember records that e, whose signature verified, was refused with
// status.
func (m *refusedCopies) remember(e *Event, name string, status protocol.Status, window time.Duration) {
	if _, ok := m.byName[name]; ok {
		return
	}
	if m.perSender[e.From] >= RefusedCopiesPerSenderMax || len(m.byName) >= RefusedCopiesMax {
		if ts, ok := signedTimestamp(e); ok && ts.After(m.seals[e.From]) {
			m.seals[e.From] = ts
		}
		return
	}
	m.byName[name] = refusedCopy{from: e.From, seq: e.Seq, status: status, expires: m.now.Add(2*window + refusedSkew)}
	m.perSender[e.From]++
	m.order = append(m.order, name)
}
