package ledger

import "github.com/aglx/ledger/protocol"

// Warming: the cost of a transfer over many accounts is mostly waiting on
// memory, not computing. Each transfer reads an index slot for its
// transaction id, an index slot for each party and each party's account
// row, all at random places in tables far bigger than the caches; one at a
// time, those reads wait one after another, several hundred ns each on
// this project's VMs. Warm reads them for a stretch of events ahead of the
// fold, in passes whose reads do not depend on one another, so that the
// processor has many misses in flight at once; the fold then finds its
// rows in the cache. Warm changes nothing, so a fold gives the same state
// with or without it.

// warmGroup is how many events one warming pass covers: enough reads to
// fill the processor's miss queue, few enough that what it brings in is
// still in the cache when the fold gets there.
const warmGroup = 16 // events

// Warm reads the memory that applying evs, in order, will need, and
// changes nothing. Applying evs afterwards is faster when the ledger is
// larger than the processor's caches; it is never wrong to skip it. It
// looks only at From, To and Payload, so a caller may pass events with
// nothing else filled in.
func (l *Ledger) Warm(evs []Event) {
	for len(evs) > 0 {
		n := min(len(evs), warmGroup)
		l.warmGroup(evs[:n])
		evs = evs[n:]
	}
}

// warmGroup warms up to warmGroup events in two passes: the index slots of
// every key first, then the account rows those slots name.
func (l *Ledger) warmGroup(evs []Event) {
	var rows [2 * warmGroup]uint32 // account index values, 0 for none
	var sink uint32
	for i := range evs {
		e := &evs[i]
		var tx string
		switch p := e.Payload.(type) {
		case *protocol.CreditTransfer:
			tx = p.TransactionID
		case *protocol.CreditReward, *protocol.CreditApprove, *protocol.TaskAssign:
		default:
			continue
		}
		if tx != "" {
			sink += l.txs.first(l.txs.hash(tx))
		}
		rows[2*i] = l.accounts.index.first(l.accounts.index.hash(e.From))
		rows[2*i+1] = l.accounts.index.first(l.accounts.index.hash(e.To))
	}
	n := uint32(l.accounts.len())
	for _, v := range rows[:2*len(evs)] {
		if v == 0 || v > n {
			continue
		}
		a := l.accounts.get(accountID(v - 1))
		// A row is 160 bytes and may span four cache lines; these four
		// reads touch each of them.
		sink += uint32(a.short[0]) + uint32(a.pending.lo) + uint32(a.seq) + a.entries.tail[len(a.entries.tail)-1]
	}
	l.warmSink += sink
}

// first returns the value in the first slot where a key of hash h may be,
// 0 if it is empty: reading it brings the slot's cache line in. The value
// may belong to another key.
func (x *hashIndex) first(h uint32) uint32 {
	t := x.table(h)
	return t.slots[h&uint32(len(t.slots)-1)].v
}
