package ledger

import "hash/maphash"

// keyIndex maps strings to small values without a Go pointer in its
// storage (see arena.go): a map from a 64-bit hash to the newest record
// with that hash, and records that hold the key in the arena, the values,
// and the next older record with the same hash.
//
// The hash is maphash with a seed chosen at random per index, so nobody can
// choose keys that collide to slow the ledger down; collisions are resolved
// by comparing the keys, so the seed never changes a result. Records are
// kept in insertion order, which is how Snapshot lists them (sorted).
type keyIndex struct {
	seed  maphash.Seed
	heads map[uint64]uint32 // hash -> record index + 1
	recs  chunked[keyRec]
}

// keyRec is one key and its values: a and b are indices + 1, 0 for none,
// whose meaning is the index owner's.
type keyRec struct {
	key  strRef
	a, b uint32
	next uint32 // record index + 1 of an older key with the same hash
}

func newKeyIndex() keyIndex {
	return keyIndex{seed: maphash.MakeSeed(), heads: make(map[uint64]uint32)}
}

// find returns the record of key, or nil.
func (x *keyIndex) find(ar *arena, key string) *keyRec {
	h := maphash.String(x.seed, key)
	for i := x.heads[h]; i != 0; {
		r := x.recs.get(i - 1)
		if ar.get(r.key) == key {
			return r
		}
		i = r.next
	}
	return nil
}

// insert adds key, which must be absent, and returns its record.
func (x *keyIndex) insert(ar *arena, key string, a, b uint32) *keyRec {
	h := maphash.String(x.seed, key)
	i, r := x.recs.add()
	*r = keyRec{key: ar.put(key), a: a, b: b, next: x.heads[h]}
	x.heads[h] = i + 1
	return r
}

// insertRef adds the key the arena already holds as ref, which must be
// absent, without storing it again.
func (x *keyIndex) insertRef(ar *arena, ref strRef, a, b uint32) *keyRec {
	h := maphash.String(x.seed, ar.get(ref))
	i, r := x.recs.add()
	*r = keyRec{key: ref, a: a, b: b, next: x.heads[h]}
	x.heads[h] = i + 1
	return r
}

// len returns the number of keys.
func (x *keyIndex) len() int { return x.recs.len() }
