package ledger

import "math"

// rebuild derives, from the rows LoadState read, what SaveState does not
// write (state.go): the hash indexes, the accounts' histories, the live
// holds by account and the open requests by pair. It checks on the way
// what spans tables, where a damaged state would otherwise make a later
// event panic: a hold's position among its account's live holds, the
// expiry queue, the pending figures, the postings that paid approvals,
// and keys that appear twice.
func (ld *loader) rebuild() {
	for _, step := range []func() bool{
		ld.rebuildAccounts, ld.rebuildLive, ld.checkExpiry, ld.checkPending,
		ld.rebuildTxs, ld.rebuildKeys, ld.rebuildRequests,
	} {
		if !step() || ld.r.Err() != nil {
			return
		}
	}
}

// rebuildAccounts files every account under its URI, as create did, and
// lists each posting in the histories of both its accounts, in the order
// book did (from, then to), which gives the same blocks in the same order.
func (ld *loader) rebuildAccounts() bool {
	l := ld.l
	t := &l.accounts
	for i := range t.len() {
		name := t.get(accountID(i)).name(&l.strs)
		if _, dup := l.lookup(name); dup {
			ld.failf("account %q is saved twice", name)
			return false
		}
		t.index.insert(t.index.hash(name), uint32(i)+1, false)
	}
	for i := range l.postings.len() {
		p := l.postings.get(uint32(i))
		l.addEntry(t.get(p.from), uint32(i))
		l.addEntry(t.get(p.to), uint32(i))
	}
	return true
}

// rebuildLive lists each account's live holds, each at the position its
// row keeps (livePos): the order a list is in is the one its holds' ends
// left it in, which the rows record, and ending a hold relies on it.
func (ld *loader) rebuildLive() bool {
	l := ld.l
	const free = math.MaxUint32 // no hold has this index (holds)
	count := map[accountID]int{}
	for i := range l.holds.rows.len() {
		if h := l.holds.get(uint32(i)); h.state == holdLive {
			count[h.account]++
		}
	}
	for id, n := range count {
		list := make([]uint32, n)
		for j := range list {
			list[j] = free
		}
		l.holds.live[id] = list
	}
	for i := range l.holds.rows.len() {
		h := l.holds.get(uint32(i))
		if h.state != holdLive {
			continue
		}
		list := l.holds.live[h.account]
		if int64(h.livePos) >= int64(len(list)) || list[h.livePos] != free {
			ld.failf("live hold %d is at position %d of account %d's %d live holds, or shares it", i, h.livePos, h.account, len(list))
			return false
		}
		list[h.livePos] = uint32(i)
	}
	return true
}

// checkExpiry checks the expiry queue: a heap, each hold in it at most
// once with its own expiry, every live hold in it (an ended one may have
// left it already, or not).
func (ld *loader) checkExpiry() bool {
	l := ld.l
	q := l.holds.expiry
	seen := make([]bool, l.holds.rows.len())
	live := 0
	for i, it := range q {
		h := l.holds.get(it.hold)
		switch {
		case seen[it.hold]:
			ld.failf("hold %d is in the expiry queue twice", it.hold)
			return false
		case it.expires != h.expires:
			ld.failf("hold %d is in the expiry queue at %d, not at its expiry %d", it.hold, it.expires, h.expires)
			return false
		case i > 0 && q.Less(i, (i-1)/2):
			ld.failf("the expiry queue is out of order at %d", i)
			return false
		}
		seen[it.hold] = true
		if h.state == holdLive {
			live++
		}
	}
	total := 0
	for _, list := range l.holds.live {
		total += len(list)
	}
	if live != total {
		ld.failf("%d live holds, %d of them in the expiry queue", total, live)
		return false
	}
	return true
}

// checkPending checks that each account's pending figure is the sum of
// its live holds, as Check does: releasing a hold takes its amount out of
// the figure, and panics if that does not fit.
func (ld *loader) checkPending() bool {
	l := ld.l
	for id, list := range l.holds.live {
		var sum fixed
		for _, i := range list {
			var ok bool
			if sum, ok = addMoney(l.ctx, sum, l.holds.get(i).amount, false); !ok {
				ld.failf("the live holds of account %d sum past a figure", id)
				return false
			}
		}
		if a := l.accounts.get(id); cmpFixed(sum, a.pending) != 0 {
			ld.failf("account %d has pending %s, but its live holds sum to %s", id, a.pending.text(), sum.text())
			return false
		}
	}
	for i := range l.accounts.len() {
		id := accountID(i)
		if _, held := l.holds.live[id]; !held && !l.accounts.get(id).pending.isZero() {
			ld.failf("account %d has pending %s and no live hold", id, l.accounts.get(id).pending.text())
			return false
		}
	}
	return true
}

// rebuildTxs files every transaction id as transfer, reward and approve
// did: a transfer's or a reward's posting under its id, an approval's
// hold under its own, except the transfer that paid an approval, which
// the hold names (hold.paid) and which carries the hold's id.
func (ld *loader) rebuildTxs() bool {
	l := ld.l
	paid := make([]bool, l.postings.len())
	for i := range l.holds.rows.len() {
		h := l.holds.get(uint32(i))
		if h.paid == 0 {
			continue
		}
		p := l.postings.get(h.paid - 1)
		if paid[h.paid-1] || p.kind() != kindTransfer || p.txID() != h.txID {
			ld.failf("hold %d names posting %d as its payment, which is not a transfer of its transaction id or pays another", i, h.paid-1)
			return false
		}
		paid[h.paid-1] = true
	}
	file := func(id string, v uint32, hold bool) bool {
		h := l.txs.hash(id)
		if _, dup := l.findTx(id, h); dup {
			ld.failf("transaction id %q is saved twice", id)
			return false
		}
		l.txs.insert(h, v, hold)
		return true
	}
	for i := range l.postings.len() {
		p := l.postings.get(uint32(i))
		if k := p.kind(); (k == kindTransfer && !paid[i] || k == kindReward) && !file(l.strs.get(p.txID()), uint32(i)+1, false) {
			return false
		}
	}
	for i := range l.holds.rows.len() {
		if h := l.holds.get(uint32(i)); h.kind == holdApproval && !file(l.strs.get(h.txID), uint32(i)+1, true) {
			return false
		}
	}
	return true
}

// rebuildKeys files the records of the four key indexes under their keys.
func (ld *loader) rebuildKeys() bool {
	l := ld.l
	for _, x := range []*keyIndex{&l.rewards, &l.adjusts, &l.signed, &l.holds.tasks} {
		for i := range x.len() {
			key := l.strs.get(x.recs.get(uint32(i)).key)
			if x.find(&l.strs, key) != nil {
				ld.failf("key %q is saved twice", key)
				return false
			}
			x.index.insert(x.index.hash(key), uint32(i)+1, false)
		}
	}
	return true
}

// rebuildRequests lists the open requests by pair, oldest first, as open
// and resolve keep them.
func (ld *loader) rebuildRequests() bool {
	r := &ld.l.requests
	for i := range r.all {
		if q := &r.all[i]; q.State == requestOpen {
			key := q.Requester + " " + q.Approver
			r.byPair[key] = append(r.byPair[key], i)
		}
	}
	return true
}
