package ledger

import (
	"fmt"

	"github.com/aglx/ledger/ledger/statecodec"
)

// LoadState reads what SaveState wrote into l, a ledger fresh from New
// with the same node URI, and checks it whole; on an error l is to be
// discarded. It never panics, and a ledger it loads without error never
// panics later on account of what it read.
func (l *Ledger) LoadState(r *statecodec.Reader) error {
	// The tables New filled (the issuance account, and its URI in the
	// arena if long) are read back from the state like every other row.
	*l = Ledger{node: l.node, ctx: l.ctx, wide: l.wide}
	l.emptyTables()
	ld := loader{r: r, l: l}
	l.seq = r.Uint()
	ld.arena()
	ld.accounts()
	ld.postings()
	ld.keyRecs(&l.rewards, "reward key", l.postings.len())
	ld.keyRecs(&l.adjusts, "adjustment key", l.postings.len())
	ld.keyRecs(&l.signed, "signed message", -1)
	ld.holds()
	ld.keyRecs(&l.holds.tasks, "task key", l.holds.rows.len())
	ld.requests()
	ld.mismatches()
	if r.Err() != nil {
		return fmt.Errorf("ledger: loading the saved state: %w", r.Err())
	}
	ld.rebuild()
	if r.Err() != nil {
		return fmt.Errorf("ledger: loading the saved state: %w", r.Err())
	}
	return nil
}

// loader reads a saved state into a ledger, checking each value where it
// is read; its rebuild (state_rebuild.go) checks what spans tables.
type loader struct {
	r *statecodec.Reader
	l *Ledger
}

// failf refuses the state: the reader keeps the first error, and reads
// nothing more.
func (ld *loader) failf(format string, args ...any) {
	ld.r.Fail(fmt.Errorf(format, args...))
}

func (ld *loader) arena() {
	r, a := ld.r, &ld.l.strs
	n := r.Len(2)
	for i := range n {
		b := r.Blob()
		if r.Err() != nil {
			return
		}
		if len(b) == 0 || len(b) > arenaChunkSize {
			ld.failf("arena chunk %d holds %d bytes; a chunk holds 1 to %d", i, len(b), arenaChunkSize)
			return
		}
		if i == n-1 {
			// The last chunk gets its full capacity, as put made it, so
			// that the strings put next go on in place.
			c := make([]byte, len(b), arenaChunkSize)
			copy(c, b)
			b = c
		}
		a.chunks = append(a.chunks, b)
	}
}

// where names a value read, for an error. It is formatted only if there
// is one: a ledger has millions of rows, and naming each as it is read
// cost a formatted string per value.
type where struct {
	table string
	i     int
	field string
}

func (w where) f(field string) where {
	w.field = field
	return w
}

func (w where) String() string {
	if w.field == "" {
		return fmt.Sprintf("%s %d", w.table, w.i)
	}
	return fmt.Sprintf("%s %d %s", w.table, w.i, w.field)
}

// ref reads a string reference and checks that it lies in the arena.
func (ld *loader) ref(at where) strRef {
	v := strRef(ld.r.Uint())
	if ld.r.Err() == nil && !ld.l.strs.holds(v) {
		ld.failf("%s names bytes %d+%d, outside the arena", at, v>>strRefLenBits, v&(1<<strRefLenBits-1))
		return 0
	}
	return v
}

// holds reports whether r names a string inside the arena. It rejects the
// spare bits, which no stored reference keeps set but the posting's kind
// (posting.tx), cleared before it is checked.
func (a *arena) holds(r strRef) bool {
	n := uint64(r & (1<<strRefLenBits - 1))
	if n == 0 {
		return r == 0
	}
	if n >= arenaChunkSize {
		return false
	}
	off := uint64(r >> strRefLenBits)
	c := off / arenaChunkSize
	return c < uint64(len(a.chunks)) && off%arenaChunkSize+n <= uint64(len(a.chunks[c]))
}

// figure reads a stored figure and checks that it is one: a valid amount
// of the ledger's arithmetic (moneyLimit), zero never negative. Anything
// else could make a later sum of figures panic (diffDecimal).
func (ld *loader) figure(at where) fixed {
	f := fixed{lo: ld.r.Uint(), hi: ld.r.Uint()}
	if ld.r.Err() == nil && !validFigure(f) {
		ld.failf("%s is not a valid figure (%#x %#x)", at, f.hi, f.lo)
		return fixed{}
	}
	return f
}

func validFigure(f fixed) bool {
	return !(f.neg() && f.isZero()) && moneyLimit(f.mag(), f.exp())
}

// index reads an index into a table of n rows, or with plusOne an index
// + 1 that may be 0 for none.
func (ld *loader) index(at where, n int, plusOne bool) uint32 {
	v := ld.r.Uint()
	limit := uint64(n)
	if plusOne {
		limit++
	}
	if ld.r.Err() == nil && v >= limit {
		ld.failf("%s is %d, outside a table of %d rows", at, v, n)
		return 0
	}
	return uint32(v)
}

func (ld *loader) accounts() {
	r, l := ld.r, ld.l
	n := r.Len(accountMinBytes)
	if r.Err() == nil && (n < 1 || n > accountsMax) {
		ld.failf("%d accounts; the issuance account at least, at most %d", n, accountsMax)
	}
	for i := range n {
		if r.Err() != nil {
			return
		}
		_, a := l.accounts.rows.add()
		at := where{"account", i, ""}
		u := r.Uint()
		switch {
		case u == 0:
			ld.failf("%s has no URI", at)
		case u <= uriShortMax:
			b := r.Blob()
			if len(b) != int(u) {
				ld.failf("%s has a URI of %d bytes for %d", at, len(b), u)
			}
			copy(a.short[:], b)
			a.uri = strRef(u)
		default:
			ref := strRef(u)
			if r.Err() == nil && (!l.strs.holds(ref) || ref&(1<<strRefLenBits-1) <= uriShortMax) {
				ld.failf("%s names its URI at %#x, outside the arena or short", at, u)
			}
			a.uri = ref
		}
		a.balance = ld.figure(at.f("balance"))
		a.pending = ld.figure(at.f("pending"))
		a.earned = ld.figure(at.f("earned"))
		a.spent = ld.figure(at.f("spent"))
		a.updated = r.Int()
		a.seq = r.Uint()
		if i == 0 && r.Err() == nil && a.name(&l.strs) != l.node {
			ld.failf("the saved ledger is node %q's, not %q's", a.name(&l.strs), l.node)
		}
	}
}

func (ld *loader) postings() {
	r, l := ld.r, ld.l
	n := r.Len(2)
	if r.Err() == nil && n > bigFiguresMax {
		ld.failf("%d big figures, more than %d", n, bigFiguresMax)
	}
	for i := range n {
		if r.Err() != nil {
			return
		}
		_, f := l.bigFigures.add()
		*f = ld.figure(where{"big figure", i, ""})
	}

	n = r.Len(postingMinBytes)
	if r.Err() == nil && n > postingsMax {
		ld.failf("%d postings, more than %d", n, postingsMax)
	}
	accounts := l.accounts.len()
	for i := range n {
		if r.Err() != nil {
			return
		}
		_, p := l.postings.add()
		at := where{"posting", i, ""}
		p.seq = r.Uint()
		p.time = r.Int()
		p.event = eventRef{hi: r.Fixed64(), lo: r.Fixed64()}
		p.tx = strRef(r.Uint())
		p.from = accountID(ld.index(at.f("from"), accounts, false))
		p.to = accountID(ld.index(at.f("to"), accounts, false))
		p.amount = ld.packed(at.f("amount"))
		p.fromBalance = ld.packed(at.f("from balance"))
		p.toBalance = ld.packed(at.f("to balance"))
		if r.Err() != nil {
			return
		}
		switch k := p.tx & strRefSpare >> strRefSpareShift; {
		case k < strRef(kindTransfer) || k > strRef(kindAdjust):
			ld.failf("%s has kind %d", at, k)
		case p.txID() == 0 || !l.strs.holds(p.txID()):
			ld.failf("%s names its transaction id at %#x, outside the arena", at, uint64(p.txID()))
		case p.event.hi == eventRefString && (p.event.lo == 0 || !l.strs.holds(strRef(p.event.lo))):
			ld.failf("%s names its event id at %#x, outside the arena", at, p.event.lo)
		case p.from == p.to:
			ld.failf("%s moves credits from account %d to itself", at, p.from)
		case l.unpack(p.amount).sign() <= 0:
			ld.failf("%s moves an amount that is not positive", at)
		}
	}

	n = r.Len(3)
	prev := -1
	for i := range n {
		k := ld.index(where{"reply figure", i, "posting"}, l.postings.len(), false)
		f := ld.figure(where{"reply figure", i, ""})
		if r.Err() != nil {
			return
		}
		if int(k) <= prev || f == (fixed{}) {
			ld.failf("the reply figure of posting %d is out of order or zero", k)
			return
		}
		prev = int(k)
		l.replyPending[k] = f
	}
}

// packed reads a posting's figure: inline, a valid figure; out of line,
// the index of a big figure already read.
func (ld *loader) packed(at where) packed {
	p := packed(ld.r.Uint())
	if ld.r.Err() != nil {
		return 0
	}
	switch {
	case p&packedBig != 0:
		if p&^packedBig >= packed(ld.l.bigFigures.len()) {
			ld.failf("%s names big figure %d of %d", at, uint64(p&^packedBig), ld.l.bigFigures.len())
			return 0
		}
	case p&packedNeg != 0 && p&packedMagMax == 0, !validFigure(ld.l.unpack(p)):
		ld.failf("%s is not a valid figure (%#x)", at, uint64(p))
		return 0
	}
	return p
}

// keyRecs reads the records of a key index. With rows 0 or more, each
// record's a is the index + 1 of one of that many rows (postings or
// holds) and b is 0; with rows -1 both are free (a sequence, split).
func (ld *loader) keyRecs(x *keyIndex, what string, rows int) {
	r := ld.r
	n := r.Len(3)
	if r.Err() == nil && uint64(n) >= 1<<32-1 {
		ld.failf("%d %ss, more than an index holds", n, what)
	}
	for i := range n {
		if r.Err() != nil {
			return
		}
		_, rec := x.recs.add()
		rec.key = ld.ref(where{what, i, ""})
		rec.a, rec.b = r.Uint32(), r.Uint32()
		if r.Err() == nil && (rec.key == 0 || rows >= 0 && (rec.a == 0 || int64(rec.a) > int64(rows) || rec.b != 0)) {
			ld.failf("%s %d has key %#x and values %d, %d, of %d rows", what, i, uint64(rec.key), rec.a, rec.b, rows)
		}
	}
}

func (ld *loader) holds() {
	r, l := ld.r, ld.l
	n := r.Len(holdMinBytes)
	if r.Err() == nil && uint64(n) >= 1<<32-1 {
		ld.failf("%d holds, more than the table holds", n)
	}
	accounts, postings := l.accounts.len(), l.postings.len()
	for i := range n {
		if r.Err() != nil {
			return
		}
		_, h := l.holds.rows.add()
		at := where{"hold", i, ""}
		h.kind = holdKind(r.Uint())
		h.state = holdState(r.Uint())
		h.account = accountID(ld.index(at.f("account"), accounts, false))
		h.party = ld.ref(at.f("party"))
		h.amount = ld.figure(at.f("amount"))
		h.expires = r.Int()
		h.defaultExpiry = r.Bool()
		h.seq = r.Uint()
		h.endedSeq = r.Uint()
		h.eventID = ld.ref(at.f("event id"))
		h.txID = ld.ref(at.f("transaction id"))
		h.taskID = ld.ref(at.f("task id"))
		h.balance = ld.figure(at.f("reply balance"))
		h.pending = ld.figure(at.f("reply pending"))
		h.livePos = r.Uint32()
		h.paid = ld.index(at.f("paid"), postings, true)
		if r.Err() != nil {
			return
		}
		switch {
		case h.kind < holdApproval || h.kind > holdTask:
			ld.failf("%s has kind %d", at, h.kind)
		case h.state < holdLive || h.state > holdExpired:
			ld.failf("%s has state %d", at, h.state)
		case (h.state == holdLive) != (h.endedSeq == 0):
			ld.failf("%s is %s, ended at seq %d", at, h.state, h.endedSeq)
		case h.amount.sign() <= 0:
			ld.failf("%s holds an amount that is not positive", at)
		case h.kind == holdApproval && h.txID == 0, h.kind == holdTask && h.paid != 0:
			ld.failf("%s, a %s hold, has transaction id %#x and paid %d", at, h.kind, uint64(h.txID), h.paid)
		}
	}

	n = r.Len(2)
	if n == 0 && !r.Bool() {
		l.holds.expiry = expiryHeap{}
	}
	for i := range n {
		if r.Err() != nil {
			return
		}
		it := expiryItem{expires: r.Int()}
		it.hold = ld.index(where{"expiry", i, "hold"}, l.holds.rows.len(), false)
		l.holds.expiry = append(l.holds.expiry, it)
	}
}

func (ld *loader) requests() {
	r, l := ld.r, ld.l
	n := r.Len(requestMinBytes)
	for i := range n {
		if r.Err() != nil {
			return
		}
		var q Request
		amount := ld.figure(where{"request", i, "amount"})
		q.Approver = r.String()
		q.EventID = r.String()
		q.Requester = r.String()
		q.ResolvedBy = r.String()
		q.ResolvedSeq = r.Uint()
		q.Seq = r.Uint()
		state := r.Uint()
		q.TaskID = r.String()
		q.Time = timeOf(r.Int())
		q.TransactionID = r.String()
		if r.Err() != nil {
			return
		}
		if state >= uint64(len(requestStates)) || amount.sign() <= 0 {
			ld.failf("request %d has state %d and amount %s", i, state, amount.text())
			return
		}
		q.State = requestStates[state]
		q.Amount = amountOfFixed(amount)
		l.requests.all = append(l.requests.all, q)
	}
}

func (ld *loader) mismatches() {
	r, l := ld.r, ld.l
	n := r.Len(mismatchMinBytes)
	for range n {
		if r.Err() != nil {
			return
		}
		var m Mismatch
		m.Account = r.String()
		m.Claimed = r.String()
		m.EventID = r.String()
		m.Field = r.String()
		m.Ledger = r.String()
		m.Seq = r.Uint()
		m.Time = timeOf(r.Int())
		m.TransactionID = r.String()
		m.Type = r.String()
		l.mismatches = append(l.mismatches, m)
	}
}
