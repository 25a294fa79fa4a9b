package projections

import (
	"errors"
	"fmt"
	"math"

	"github.com/aglx/ledger/ledger/statecodec"
	"github.com/aglx/ledger/protocol"
)

// The outbox's saved state, and the saved form of a Reply, which the
// registry's memories of answered messages hold too.
//
// The outbox is not a fold, but what it holds is folded like one: the
// replies to the latest events, kept so that a resend after a restart is
// answered with the first copy's answer (a refusal stays a refusal), the
// refusals the relay asks about long after, and how far both were let go
// of. A start that replays the whole log rebuilds all of it; a start from
// a snapshot replays only the events after it, so the outbox is saved
// with the folds and restored before those events.

// SaveState writes the outbox's replies, in the order they were put, and
// its refusals. It takes the outbox's lock, since connections take
// replies (and sign them) off the folds' lock; it changes nothing.
func (o *Outbox) SaveState(w *statecodec.Writer) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	// order holds exactly the sequences of bySeq, each once (Put), so
	// the replies are written in it and bySeq is made again from it.
	w.Len(len(o.order))
	for _, seq := range o.order {
		w.Uint(seq)
		writeReply(w, o.bySeq[seq])
	}
	w.Uint(o.evicted)
	// Refusals ascend, all above refusalsEvicted (addRefusal): each is
	// written as its distance from the one before, from refusalsEvicted.
	w.Uint(o.refusalsEvicted)
	w.Len(len(o.refusals))
	prev := o.refusalsEvicted
	for _, seq := range o.refusals {
		w.Uint(seq - prev)
		prev = seq
	}
	return nil
}

// LoadState restores what SaveState wrote into an outbox fresh from
// NewOutbox, before any reply is put or taken.
//
// reg is the registry whose replies the outbox holds (the one built with
// RegistryConfig.Outbox set to o): an auth.response is signed with the
// node's key as it is taken, not as it is decided (Reply.sign), and one
// saved before it was taken is signed, when it is, by reg's node key and
// URI, as it would have been. reg may be loaded before the outbox or
// after it: whichever is loaded second makes the copies of a reply that
// both hold share one signature again (restoredSignatures), and either
// way the replies sign to the same bytes. nil is for an outbox of no
// registry's replies; a saved reply that waits for a signature is then
// refused. The ledger's replies go into the same outbox (NewFolds): it is
// saved once, not with each fold that answers into it.
func (o *Outbox) LoadState(rd *statecodec.Reader, reg *Registry) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.bySeq) > 0 || len(o.refusals) > 0 || o.evicted > 0 || o.refusalsEvicted > 0 {
		return errors.New("outbox: a saved state is loaded into a fresh outbox only")
	}
	sigs := newRestoredSignatures(reg)
	if reg != nil {
		for _, it := range reg.seen.m { // loaded already, or fresh and empty
			sigs.add(it.v.reply)
		}
	}
	n := rd.Len(replyMinBytes + 1)
	if n > OutboxMax {
		rd.Failf("outbox: %d replies saved, more than its bound of %d", n, OutboxMax)
	}
	var order []uint64
	bySeq := map[uint64]Reply{}
	bytes := 0
	for i := 0; i < n && rd.Err() == nil; i++ {
		seq := rd.Uint()
		rep := readReply(rd, sigs)
		if _, dup := bySeq[seq]; dup && rd.Err() == nil {
			rd.Failf("outbox: the reply to seq %d is saved twice", seq)
		}
		order = append(order, seq)
		bySeq[seq] = rep
		bytes += replyBytes(rep)
	}
	// Put lets the replies past OutboxBytesMax only for the newest one.
	if bytes > OutboxBytesMax && len(order) > 1 {
		rd.Failf("outbox: the saved replies hold %d bytes, more than its bound of %d", bytes, OutboxBytesMax)
	}
	evicted := rd.Uint()
	refusalsEvicted := rd.Uint()
	nr := rd.Len(1)
	if nr > RefusalsMax {
		rd.Failf("outbox: %d refusals saved, more than its bound of %d", nr, RefusalsMax)
	}
	var refusals []uint64
	if nr > 0 && rd.Err() == nil {
		refusals = make([]uint64, 0, nr)
	}
	prev := refusalsEvicted
	for i := 0; i < nr && rd.Err() == nil; i++ {
		d := rd.Uint()
		if d == 0 || d > math.MaxUint64-prev {
			rd.Failf("outbox: refusal %d is not after the one before it", i)
			break
		}
		prev += d
		refusals = append(refusals, prev)
	}
	if err := rd.Err(); err != nil {
		return fmt.Errorf("outbox: loading its saved state: %w", err)
	}
	o.bySeq, o.order, o.bytes, o.evicted = bySeq, order, bytes, evicted
	o.refusals, o.refusalsEvicted = refusals, refusalsEvicted
	return nil
}

// restoredSignatures makes again the lazy signatures of the replies a
// saved state holds, and makes the copies of one reply share one again.
// An auth.response is copied into the outbox at its event's sequence, into
// the registry's memory of answered requests, and into the outbox again at
// the sequence of each resend the memory answers; all shared one
// lazySignature, so that the node signed it once. The outbox and the
// registry are saved apart, so a load shares them again by what they sign:
// the addressee and the body, which names the request's event and so is
// one reply's alone. Whichever of the two is loaded second finds the
// other's (Registry.LoadState looks in its Outbox, Outbox.LoadState in the
// registry it is given); shared or not, a copy signs to the same bytes,
// since the node's signatures are deterministic, so sharing saves only
// the second signature.
type restoredSignatures struct {
	reg *Registry // whose node key signs; nil: none does
	m   map[signatureKey]*lazySignature
}

// signatureKey is what a lazy signature signs.
type signatureKey struct{ to, body string }

func newRestoredSignatures(reg *Registry) *restoredSignatures {
	return &restoredSignatures{reg: reg, m: map[signatureKey]*lazySignature{}}
}

// add makes rep's signature, if it has one, the one get gives for the
// same body to the same addressee.
func (s *restoredSignatures) add(rep Reply) {
	if rep.sign != nil {
		s.m[signatureKey{rep.sign.to, string(rep.Body)}] = rep.sign
	}
}

// get returns the signature of body to to: one restored already, else
// one made with the registry's node key (nil if there is none). signed,
// the body as signed once it was (nil before), is kept in it.
func (s *restoredSignatures) get(to string, body, signed []byte) *lazySignature {
	key := signatureKey{to, string(body)}
	ls := s.m[key]
	if ls == nil {
		if s.reg == nil {
			return nil
		}
		if ls = s.reg.authResponseSignature(to); ls == nil {
			return nil
		}
		s.m[key] = ls
	}
	if signed != nil {
		ls.mu.Lock()
		if ls.body == nil {
			ls.body = signed
		}
		ls.mu.Unlock()
	}
	return ls
}

// replyMinBytes is the fewest bytes writeReply writes.
const replyMinBytes = 5

// writeReply writes a reply: its fields, and for one to be signed as it
// is taken, the addressee it is signed for and the signed body once it
// was signed (a func cannot be saved; readReply makes it again). The
// signature's lock is taken, since a connection may be signing it.
func writeReply(w *statecodec.Writer, rep Reply) {
	w.String(rep.Type)
	w.Int(int64(rep.Status))
	writeBytes(w, rep.Body)
	w.Bool(rep.FirstOnly)
	w.Bool(rep.sign != nil)
	if ls := rep.sign; ls != nil {
		ls.mu.Lock()
		body := ls.body
		ls.mu.Unlock()
		w.String(ls.to)
		writeBytes(w, body)
	}
}

// readReply reads what writeReply wrote; sigs makes its signature again
// (nil: the state holds no reply to sign, and one that does is refused).
func readReply(rd *statecodec.Reader, sigs *restoredSignatures) Reply {
	rep := Reply{Type: rd.String()}
	status := rd.Int()
	if status < math.MinInt32 || status > math.MaxInt32 {
		rd.Failf("a reply's status %d", status)
	}
	rep.Status = protocol.Status(status)
	rep.Body = readBytes(rd)
	rep.FirstOnly = rd.Bool()
	if !rd.Bool() {
		return rep
	}
	to := rd.String()
	signed := readBytes(rd)
	if rd.Err() != nil {
		return rep
	}
	if sigs != nil {
		rep.sign = sigs.get(to, rep.Body, signed)
	}
	if rep.sign == nil {
		rd.Failf("a saved %s waits for the node's signature, and this node has no key to sign it with: not the configuration it was saved under", rep.Type)
	}
	return rep
}

// writeBytes writes a byte slice that may be nil, telling nil from empty:
// a restored fold must be the one saved, field for field.
func writeBytes(w *statecodec.Writer, b []byte) {
	w.Bool(b != nil)
	if b != nil {
		w.Blob(b)
	}
}

// readBytes reads what writeBytes wrote.
func readBytes(rd *statecodec.Reader) []byte {
	if !rd.Bool() {
		return nil
	}
	if b := rd.Blob(); b != nil {
		return b
	}
	return []byte{}
}
