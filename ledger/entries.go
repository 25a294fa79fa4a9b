package ledger

import (
	"sort"
	"time"

	"github.com/aglx/ledger/protocol"
)

// entryBlockSize is the number of posting indices per block of an
// account's history.
const entryBlockSize = 7 // postings; a block is 32 bytes

// entryBlock is a full piece of one account's history: indices of postings
// in sequence order, and the next block.
type entryBlock struct {
	postings [entryBlockSize]uint32
	next     uint32 // block index + 1, 0 for the last
}

// entrySkipEvery is how many blocks of a history lie between two of its
// skips (Ledger.entrySkips): a page starts at most this many blocks
// before its place. Walked from the first block, a page of the issuance
// account's history after 2 million postings took 5 ms, under the folds'
// read lock, which holds up every fold waiting to write (helper-135); a
// skip costs 4 bytes per 448 postings.
const entrySkipEvery = 64 // blocks

// entryList is an account's history: a chain of full blocks in a shared,
// pointer-free table, then up to entryBlockSize-1 newer postings kept in
// the account row itself. Appending therefore touches only the row, which
// the posting needs anyway, and a full tail moves to a new block at the end
// of the table; the history grows without copying, at 32 bytes per 7
// postings.
type entryList struct {
	first, last uint32 // block indices + 1, 0 for none
	n           uint32 // postings listed, tail included
	tail        [entryBlockSize - 1]uint32
}

// addEntry appends posting i to the account's history.
func (l *Ledger) addEntry(a *account, i uint32) {
	list := &a.entries
	k := list.n % entryBlockSize
	if k < entryBlockSize-1 {
		list.tail[k] = i
		list.n++
		return
	}
	b, blk := l.blocks.add()
	copy(blk.postings[:], list.tail[:])
	blk.postings[k] = i
	if list.last != 0 {
		l.blocks.get(list.last - 1).next = b + 1
	} else {
		list.first = b + 1
	}
	list.last = b + 1
	if pos := list.n / entryBlockSize; pos > 0 && pos%entrySkipEvery == 0 {
		l.entrySkips[list.first] = append(l.entrySkips[list.first], b+1)
	}
	list.n++
}

// firstBlockAfter is the block of the account's history to start from
// for postings after afterSeq: the last skip whose first posting is at or
// before afterSeq (every posting before it is too, since a history is in
// sequence order), else the first block.
func (l *Ledger) firstBlockAfter(list *entryList, afterSeq uint64) uint32 {
	skips := l.entrySkips[list.first]
	j := sort.Search(len(skips), func(j int) bool {
		return l.postings.get(l.blocks.get(skips[j] - 1).postings[0]).seq > afterSeq
	})
	if j == 0 {
		return list.first
	}
	return skips[j-1]
}

// eachEntry calls f with the account's postings after afterSeq, in order,
// until f returns false. It starts at most entrySkipEvery blocks before
// the first such posting (firstBlockAfter), and a block whose last
// posting is at or before afterSeq is skipped whole, reading one posting
// instead of seven.
func (l *Ledger) eachEntry(a *account, afterSeq uint64, f func(i uint32) bool) {
	list := &a.entries
	visit := func(idx []uint32) bool {
		if l.postings.get(idx[len(idx)-1]).seq <= afterSeq {
			return true
		}
		for _, i := range idx {
			if l.postings.get(i).seq > afterSeq && !f(i) {
				return false
			}
		}
		return true
	}
	for b := l.firstBlockAfter(list, afterSeq); b != 0; {
		blk := l.blocks.get(b - 1)
		if !visit(blk.postings[:]) {
			return
		}
		b = blk.next
	}
	if k := list.n % entryBlockSize; k > 0 {
		visit(list.tail[:k])
	}
}

// EntriesLimitMax bounds one page of Entries.
const EntriesLimitMax = 1000 // entries

// Entry is one posting as the HTTP API and the history show it: who paid
// whom how much, why, and both running balances. Money is written as JSON
// strings; the fields are in the order of their JSON names.
type Entry struct {
	Amount      protocol.Amount `json:"amount"`
	EventID     string          `json:"event_id"`
	From        string          `json:"from"`
	FromBalance protocol.Amount `json:"from_balance"`
	// Kind is the message that made the posting: transfer, reward or
	// adjust.
	Kind          string          `json:"kind"`
	Seq           uint64          `json:"seq"`
	Time          time.Time       `json:"time"`
	To            string          `json:"to"`
	ToBalance     protocol.Amount `json:"to_balance"`
	TransactionID string          `json:"transaction_id"`
}

// entry shows posting i.
func (l *Ledger) entry(i uint32) Entry {
	var en Entry
	p := l.postings.get(i)
	l.entryOf(p, l.figures(i), l.eventID(p.event), &en)
	return en
}

// entryOf fills in en, a zero Entry, for posting p, whose figures are f
// and event id eventID.
func (l *Ledger) entryOf(p *posting, f postingFigures, eventID string, en *Entry) {
	f.amount.decimal(en.Amount.Decimal())
	en.EventID = eventID
	en.From = l.uri(p.from)
	f.fromBalance.decimal(en.FromBalance.Decimal())
	en.Kind = p.kind().String()
	en.Seq = p.seq
	en.Time = timeOf(p.time)
	en.To = l.uri(p.to)
	f.toBalance.decimal(en.ToBalance.Decimal())
	en.TransactionID = l.strs.get(p.txID())
}

// Entries returns up to limit postings of uri made by events after
// afterSeq, oldest first: a page of the account's history. limit is capped
// at EntriesLimitMax; the next page starts after the last Seq returned.
func (l *Ledger) Entries(uri string, afterSeq uint64, limit int) []Entry {
	id, ok := l.lookup(uri)
	if !ok || limit <= 0 {
		return nil
	}
	limit = min(limit, EntriesLimitMax)
	var out []Entry
	l.eachEntry(l.accounts.get(id), afterSeq, func(i uint32) bool {
		out = append(out, l.entry(i))
		return len(out) < limit
	})
	return out
}
