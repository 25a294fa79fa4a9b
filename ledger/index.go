package ledger

import "hash/maphash"

// hashIndex maps keys that live elsewhere (in an account row, a posting, a
// hold, a keyRec) to 32-bit values. It stores no key and no Go pointer in
// its slots: 8 bytes a slot, a 31-bit hash of the key and the value, so the
// index of a million transaction ids is some 14 MB of slots, and a probe
// for a key that is absent, as every new transaction id is, reads one
// cache line and nothing else. Keys are compared by the caller, which reads
// them from where they live, only when the hashes match; so the seed never
// changes a result.
//
// Why not map[uint64]uint32, as before? A Go map's group is 136 bytes for
// 8 slots; a lookup and then an insert probe it twice; it needed a record
// beside it (key, values, collision chain, 24 bytes) that a lookup read
// too; and on this VM every fresh byte costs some 3 ns of page faults.
//
// Layout: extendible hashing, as Go's own maps do it. A directory, indexed
// by the top bits of the hash, points to tables of at most hashTableMax
// slots, open-addressed with linear probing. A table that fills to 3/4
// doubles; at hashTableMax it splits in two by one more bit of the hash
// (the directory doubles if it must). Growth therefore never rehashes more
// than one table, 64 KiB at most: no pause proportional to the index, which a
// single big table would have at every doubling. Keys are never removed,
// so there are no tombstones.
//
// The seed is random per index, so nobody can choose keys that collide to
// slow the ledger down.
type hashIndex struct {
	seed  maphash.Seed
	dir   []*hashTable // 1 << depth tables, by the top depth bits of a hash
	depth uint8
	n     int
	spare []hashSlot // scratch space for a split
}

// hashTable is one table of a hashIndex. All its keys share the top depth
// bits of their hashes, and 1 << (index depth - depth) entries of the
// directory, consecutive, point to it.
type hashTable struct {
	slots []hashSlot // a power of two long
	used  uint32
	depth uint8
}

// hashSlot is one key: tag is its hash shifted left by one, with the
// owner's bit in bit 0 (see hashIndex.insert); v is its value, 0 for an
// empty slot.
type hashSlot struct {
	tag, v uint32
}

// Table sizes: a table starts small, so a small ledger stays small, and
// stops growing at hashTableMax, where it splits instead.
const (
	hashTableMin = 8       // slots
	hashTableMax = 1 << 13 // slots: 64 KiB
	hashBits     = 31      // bits of a key's hash
)

func newHashIndex() hashIndex {
	return hashIndex{
		seed: maphash.MakeSeed(),
		dir:  []*hashTable{{slots: make([]hashSlot, hashTableMin)}},
	}
}

// hash returns the hash of key that the index files it under.
func (x *hashIndex) hash(key string) uint32 {
	return uint32(maphash.String(x.seed, key) >> (64 - hashBits))
}

// table returns the table of hash h.
func (x *hashIndex) table(h uint32) *hashTable { return x.dir[h>>(hashBits-x.depth)] }

// hashProbe walks the slots where a key of hash h may be.
type hashProbe struct {
	slots []hashSlot
	i     uint32
	want  uint32
}

// probe starts a walk over the candidates for hash h.
func (x *hashIndex) probe(h uint32) hashProbe {
	t := x.table(h)
	return hashProbe{slots: t.slots, i: h & uint32(len(t.slots)-1), want: h << 1}
}

// next returns the value and bit of the next slot whose hash is h, or
// ok false when the walk meets an empty slot: then no key with hash h
// remains. A table is never full, so the walk ends.
func (p *hashProbe) next() (v uint32, bit, ok bool) {
	mask := uint32(len(p.slots) - 1)
	for {
		s := p.slots[p.i&mask]
		if s.v == 0 {
			return 0, false, false
		}
		p.i++
		if s.tag&^1 == p.want {
			return s.v, s.tag&1 != 0, true
		}
	}
}

// insert files value v (not 0) with the owner's bit under hash h. The key
// must be absent: the caller probed for it first.
func (x *hashIndex) insert(h, v uint32, bit bool) {
	if v == 0 {
		panic("ledger: hashIndex: value 0 marks an empty slot")
	}
	t := x.table(h)
	if (t.used+1)*4 > uint32(len(t.slots))*3 {
		x.grow(t, h)
		t = x.table(h)
	}
	tag := h << 1
	if bit {
		tag |= 1
	}
	t.put(hashSlot{tag: tag, v: v})
	x.n++
}

// put stores s in the first empty slot of its walk.
func (t *hashTable) put(s hashSlot) {
	mask := uint32(len(t.slots) - 1)
	for i := s.tag >> 1; ; i++ {
		if t.slots[i&mask].v == 0 {
			t.slots[i&mask] = s
			t.used++
			return
		}
	}
}

// grow makes room in t, the table of hash h: it doubles t, or splits it in
// two by the next bit of the hash once it is hashTableMax slots long.
func (x *hashIndex) grow(t *hashTable, h uint32) {
	old := t.slots
	if len(old) < hashTableMax {
		t.slots, t.used = make([]hashSlot, 2*len(old)), 0
		for _, s := range old {
			if s.v != 0 {
				t.put(s)
			}
		}
		return
	}
	if t.depth == x.depth {
		if x.depth == hashBits {
			panic("ledger: hashIndex: directory exhausted")
		}
		dir := make([]*hashTable, 2*len(x.dir))
		for i, tt := range x.dir {
			dir[2*i], dir[2*i+1] = tt, tt
		}
		x.dir, x.depth = dir, x.depth+1
	}
	// t keeps the keys whose next bit is 0, in place, and a new table
	// takes the others: a split makes 64 KiB of fresh memory, not 128.
	copy(x.scratch(), old)
	clear(old)
	t.used, t.depth = 0, t.depth+1
	t1 := &hashTable{slots: make([]hashSlot, len(old)), depth: t.depth}
	shift := hashBits - t.depth
	for _, s := range x.spare {
		switch {
		case s.v == 0:
		case (s.tag>>1)>>shift&1 == 0:
			t.put(s)
		default:
			t1.put(s)
		}
	}
	// The directory entries of t are consecutive: those of the hashes
	// that share its top depth-1 bits. The second half now goes to t1.
	span := 1 << (x.depth - t.depth + 1)
	first := int(h>>(hashBits-t.depth+1)) << (x.depth - t.depth + 1)
	for i := span / 2; i < span; i++ {
		x.dir[first+i] = t1
	}
}

// scratch returns a buffer of hashTableMax slots for a split, made on the
// first one.
func (x *hashIndex) scratch() []hashSlot {
	if x.spare == nil {
		x.spare = make([]hashSlot, hashTableMax)
	}
	return x.spare
}

// each calls f with the value and bit of every key, in no fixed order.
func (x *hashIndex) each(f func(v uint32, bit bool)) {
	for i := 0; i < len(x.dir); {
		t := x.dir[i]
		for _, s := range t.slots {
			if s.v != 0 {
				f(s.v, s.tag&1 != 0)
			}
		}
		i += 1 << (x.depth - t.depth)
	}
}

// len returns the number of keys.
func (x *hashIndex) len() int { return x.n }

// keyIndex maps strings to small values: a hashIndex over records that
// hold the key in the arena and the values, in insertion order, which is
// how Snapshot lists them (sorted).
type keyIndex struct {
	index hashIndex
	recs  chunked[keyRec]
}

// keyRec is one key and its values: a and b are indices + 1, 0 for none,
// whose meaning is the index owner's.
type keyRec struct {
	key  strRef
	a, b uint32
}

func newKeyIndex() keyIndex { return keyIndex{index: newHashIndex()} }

// find returns the record of key, or nil.
func (x *keyIndex) find(ar *arena, key string) *keyRec {
	for p := x.index.probe(x.index.hash(key)); ; {
		i, _, ok := p.next()
		if !ok {
			return nil
		}
		if r := x.recs.get(i - 1); ar.get(r.key) == key {
			return r
		}
	}
}

// insert adds key, which must be absent, and returns its record.
func (x *keyIndex) insert(ar *arena, key string, a, b uint32) *keyRec {
	i, r := x.recs.add()
	*r = keyRec{key: ar.put(key), a: a, b: b}
	x.index.insert(x.index.hash(key), i+1, false)
	return r
}

// len returns the number of keys.
func (x *keyIndex) len() int { return x.recs.len() }

// txRef is what a transaction_id names in Ledger.txs: the index + 1 of its
// posting and of its approval hold, 0 for none, and the id in the arena.
type txRef struct {
	posting, hold uint32
	key           strRef
}

// findTx returns what the transaction id id names, and whether it names
// anything; h is l.txs.hash(id).
//
// l.txs keeps no record of its own: a slot's value is the index + 1 of the
// posting that booked the id (bit clear) or of the approval hold that took
// it (bit set), whose paid field names the transfer that used the id
// later. The id is compared where that row keeps it.
func (l *Ledger) findTx(id string, h uint32) (txRef, bool) {
	for p := l.txs.probe(h); ; {
		v, hold, ok := p.next()
		if !ok {
			return txRef{}, false
		}
		if hold {
			if r := l.holds.get(v - 1); l.strs.get(r.txID) == id {
				return txRef{posting: r.paid, hold: v, key: r.txID}, true
			}
		} else if r := l.postings.get(v - 1); l.strs.get(r.txID()) == id {
			return txRef{posting: v, key: r.txID()}, true
		}
	}
}

// txPaid records that posting i is the transfer that used the transaction
// id named by ref (found by findTx): a new id is filed under its hash h,
// an approval's id gets the posting in its hold.
func (l *Ledger) txPaid(ref txRef, found bool, h, i uint32) {
	if found {
		if ref.hold == 0 || ref.posting != 0 {
			panic("ledger: a transaction id is booked once")
		}
		l.holds.get(ref.hold - 1).paid = i + 1
		return
	}
	l.txs.insert(h, i+1, false)
}
