package projections

import (
	"fmt"
	"time"

	"github.com/aglx/ledger/ledger"
	"github.com/aglx/ledger/protocol"
)

// Bounds of the memory of refused signed messages (refusedCopies).
const (
	// RefusedCopiesMax bounds the refused signed messages remembered one
	// by one, in messages (about 200 bytes each). Past it the oldest is
	// forgotten into its sender's seal.
	RefusedCopiesMax = 100_000 // messages
	// RefusedCopiesPerSenderMax bounds one sender's share of them, in
	// messages. Past it a refusal goes into the sender's seal at once.
	RefusedCopiesPerSenderMax = 1_000 // messages
	// refusedSkew is added to how long a refusal is remembered one by
	// one: the fold's clock is the latest receive time applied, and
	// events from several connections reach the log a little out of
	// their receive order.
	refusedSkew = time.Minute
	// refusedSealKeep is how long, in event time, a seal is kept after
	// its timestamp, beyond the window and the skew. A seal covers only
	// messages stamped no later than it, which the signature window
	// refuses anyway once the receive time is past it by the window; it
	// is kept a day longer, so that a node whose clock is set back by
	// less than a day refuses the copies all the same. It bounds the seals
	// by the senders with a refusal in the last day.
	refusedSealKeep = 24 * time.Hour
	// refusedSealSweep is how often, in event time, old seals are
	// dropped: not at every event, since a node with many seals would
	// pay for each of them at every credit message.
	refusedSealSweep = time.Minute
)

// refusedCopies remembers the signed messages that move or hold credit
// which the ledger refused, and refuses their copies.
//
// A refusal binds nothing in the ledger: a transfer refused for want of
// funds may be sent again. But the signed frame is in the log, which any
// reader of the stream may read, and until 2026-12-02 anyone could send
// it again, unchanged, once the sender had the funds, and have it booked:
// a transfer, an approval's hold or a task's hold the sender had been
// told was refused (helper-108). Now a copy is refused; a sender that
// means to try again signs the message again, with a new timestamp.
//
// A refused message is remembered by what its signature covers
// (replayKey), and a copy is refused with 409, for as long as a copy could
// pass the signature window by the fold's clock. Then, or when the memory
// is full (the oldest goes first, or the sender's share is full), it is
// forgotten into its sender's seal: the latest timestamp of the sender's
// forgotten refusals, and its messages stamped no later are refused with
// 429. A forgotten refusal's timestamp lies a window behind the clock, so
// a seal touches no fresh message of a sender whose clock is right; and a
// copy of a forgotten refusal is refused by the seal even if the clock
// has stepped back (helper-111: the first version forgot on the clock
// alone, and a copy was booked after the receive times jumped ahead and
// came back). So no refused message is booked by a copy, and the memory
// is bounded.
//
// A sealed sender's message that the ledger would answer as one already
// taken (ledger.Repeats: a resend whose reply was lost) is not refused but
// goes on to the ledger, which answers it again and changes nothing.
//
// Only messages whose signature verified are remembered: anyone could
// send a message with a bad signature in another's name, and by
// remembering it refuse the real one later. A verified one refused as
// stale because it was stamped ahead of its arrival is remembered too: it
// passes the window later, unchanged (helper-112). Only the TYPEs the ledger may
// refuse and that move or hold credit are remembered and sealed
// (sealable): a task's end, a claim or a query never is.
type refusedCopies struct {
	byName    map[string]refusedCopy
	perSender map[string]int
	// order holds the names, oldest first. They expire in this order but
	// for a message stamped ahead, which expires later: it holds up the
	// ones behind it, which are then kept longer, never shorter.
	order []string
	head  int // order[head:] are live or forgotten names
	// seals holds, by sender, the latest timestamp of its forgotten
	// refusals.
	seals map[string]time.Time
	now   time.Time // the latest receive time applied
	sweep time.Time // when seals are next looked through
}

type refusedCopy struct {
	from    string
	seq     uint64
	status  protocol.Status
	stamp   time.Time // the message's signed timestamp
	expires time.Time
}

func newRefusedCopies() *refusedCopies {
	return &refusedCopies{byName: map[string]refusedCopy{}, perSender: map[string]int{}, seals: map[string]time.Time{}}
}

// sealable reports whether e is of a kind the memory keeps: one the
// ledger may refuse, and which moves or holds credit when it is taken.
func sealable(e *Event) bool {
	switch e.Msg.Payload.(type) {
	case *protocol.CreditTransfer, *protocol.CreditReward, *protocol.CreditAdjust, *protocol.CreditApprove,
		*protocol.CreditRequest, *protocol.CreditDeny:
		return true
	case *protocol.TaskAssign:
		return e.Msg.Credits != nil
	}
	return false
}

// advance moves the memory's clock to e's receive time and forgets, into
// their senders' seals, the refusals too old to be copied within window.
func (m *refusedCopies) advance(e *Event, window time.Duration) {
	if e.ReceivedAt.After(m.now) {
		m.now = e.ReceivedAt
	}
	for m.head < len(m.order) {
		if c, ok := m.byName[m.order[m.head]]; ok && !m.now.After(c.expires) {
			break
		}
		m.forgetOldest()
	}
	if len(m.seals) > 0 && m.now.After(m.sweep) {
		for from, ts := range m.seals {
			// A copy stamped ts passes the window until the clock is past
			// ts by the window: kept that much longer (helper-112).
			if m.now.Sub(ts) > refusedSealKeep+window+refusedSkew {
				delete(m.seals, from)
			}
		}
		m.sweep = m.now.Add(refusedSealSweep)
	}
}

// forgetOldest forgets the oldest remembered refusal, if it is still
// remembered, into its sender's seal.
func (m *refusedCopies) forgetOldest() {
	name := m.order[m.head]
	m.order[m.head] = ""
	m.head++
	if m.head > len(m.order)/2 && m.head > 1024 {
		m.order = append(m.order[:0], m.order[m.head:]...)
		m.head = 0
	}
	c, ok := m.byName[name]
	if !ok {
		return
	}
	delete(m.byName, name)
	if m.perSender[c.from]--; m.perSender[c.from] <= 0 {
		delete(m.perSender, c.from)
	}
	m.seal(c.from, c.stamp)
}

func (m *refusedCopies) seal(from string, stamp time.Time) {
	if stamp.After(m.seals[from]) {
		m.seals[from] = stamp
	}
}

// copyOf answers e if it is a copy of a remembered refusal, or a message
// of a sealed sender stamped no later than its seal. *name is e's
// replayKey, made here if it is "" and the sender has refusals
// remembered: most senders have none, and their messages pay for no hash.
func (m *refusedCopies) copyOf(e *Event, name *string) (ledger.Outcome, bool) {
	if !sealable(e) {
		return ledger.Outcome{}, false
	}
	if seal, ok := m.seals[e.From]; ok {
		if ts, ok := signedTimestamp(e); ok && !ts.After(seal) {
			return ledger.Outcome{Status: protocol.StatusTooManyRequests, Reason: fmt.Sprintf(
				"a signed message of %s that the node refused, stamped %s, is no longer remembered by itself, so every signed credit message of %s stamped no later is refused, copies of it among them (a message already taken is answered as before): sign the message again with a later timestamp",
				e.From, rfc3339(seal), e.From)}, true
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

// remember records that e, whose signature verified and which is
// sealable (the caller has asked, before it made name), was refused with
// status.
func (m *refusedCopies) remember(e *Event, name string, status protocol.Status, window time.Duration) {
	if _, ok := m.byName[name]; ok {
		return
	}
	stamp, ok := signedTimestamp(e) // a verified signature has one (Registry.staleness)
	if !ok || stamp.Sub(m.now) > refusedSealKeep {
		// So far ahead that a seal at it would lock the sender out for
		// longer than seals are kept: not remembered (LEDGER.md).
		return
	}
	// A copy passes the window until the clock is past the later of the
	// receive time and the stamp (a message refused as stamped ahead) by
	// the window.
	from := m.now
	if stamp.After(from) {
		from = stamp
	}
	if m.perSender[e.From] >= RefusedCopiesPerSenderMax {
		m.seal(e.From, stamp)
		return
	}
	for len(m.byName) >= RefusedCopiesMax {
		m.forgetOldest()
	}
	m.byName[name] = refusedCopy{from: e.From, seq: e.Seq, status: status, stamp: stamp, expires: from.Add(2*window + refusedSkew)}
	m.perSender[e.From]++
	m.order = append(m.order, name)
}
