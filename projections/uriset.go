package projections

import (
	"slices"
	"sort"
)

// uriSet is a set of strings in order, for paging the registry by URI.
//
// Every chunk holds a key, and any two neighbouring chunks hold more than
// sortedChunkMax/2 keys between them, so that a walk passes no more chunks
// than keys and n keys take at most 2n/(sortedChunkMax/2)+1 chunks however
// many came and went (remove keeps both).
//
// It was one sorted slice, and each new agent was inserted into it: a copy
// of half the slice on average, so registering the RegistryAgentsMax
// (2^20) agents, or replaying their registrations at every start, moved
// terabytes and took many minutes of the fold's one core. The keys now
// live in chunks of at most sortedChunkMax: an insert copies within one
// chunk, and a full chunk splits in two.
type uriSet struct {
	chunks [][]string // each sorted and non-empty; all of chunk i before all of chunk i+1
}

// sortedChunkMax bounds a chunk, and so the copy an insert makes.
const sortedChunkMax = 512 // keys

// insert adds k, which must be absent.
func (s *uriSet) insert(k string) {
	if len(s.chunks) == 0 {
		s.chunks = [][]string{{k}}
		return
	}
	// The first chunk whose last key is at or after k, else the last.
	ci := min(s.chunkOf(k), len(s.chunks)-1)
	c := s.chunks[ci]
	i, _ := slices.BinarySearch(c, k)
	c = slices.Insert(c, i, k)
	if len(c) <= sortedChunkMax {
		s.chunks[ci] = c
		return
	}
	half := len(c) / 2
	s.chunks[ci] = c[:half:half]
	s.chunks = slices.Insert(s.chunks, ci+1, slices.Clone(c[half:]))
}

// has reports whether k is in the set.
func (s *uriSet) has(k string) bool {
	ci := s.chunkOf(k)
	if ci == len(s.chunks) {
		return false
	}
	_, found := slices.BinarySearch(s.chunks[ci], k)
	return found
}

// remove deletes k, which must be present. A chunk left empty goes; one
// left small enough is merged with a neighbour, so that a set whose keys
// mostly left keeps few chunks.
func (s *uriSet) remove(k string) {
	ci := s.chunkOf(k)
	if ci == len(s.chunks) {
		panic("uriSet: remove of a key not in the set")
	}
	i, found := slices.BinarySearch(s.chunks[ci], k)
	if !found {
		panic("uriSet: remove of a key not in the set")
	}
	c := slices.Delete(s.chunks[ci], i, i+1)
	if len(c) == 0 {
		// Its neighbours, each with more than sortedChunkMax/2 keys
		// less the one that was here, keep the bound between them.
		s.chunks = slices.Delete(s.chunks, ci, ci+1)
		return
	}
	s.chunks[ci] = c
	if ci > 0 && s.mergeable(ci-1) {
		s.merge(ci - 1)
		ci--
	}
	if ci+1 < len(s.chunks) && s.mergeable(ci) {
		s.merge(ci)
	}
}

// mergeable reports whether chunks i and i+1 together hold no more than
// sortedChunkMax/2 keys.
func (s *uriSet) mergeable(i int) bool {
	return len(s.chunks[i])+len(s.chunks[i+1]) <= sortedChunkMax/2
}

// merge makes chunks i and i+1 one.
func (s *uriSet) merge(i int) {
	s.chunks[i] = append(s.chunks[i], s.chunks[i+1]...)
	s.chunks = slices.Delete(s.chunks, i+1, i+2)
}

// chunkOf is the index of the first chunk whose last key is at or after
// k: the one k is in, if it is in the set; len(s.chunks) if none is.
func (s *uriSet) chunkOf(k string) int {
	return sort.Search(len(s.chunks), func(i int) bool {
		c := s.chunks[i]
		return c[len(c)-1] >= k
	})
}

// len returns the number of keys. Nothing on a hot path asks, so it is
// counted rather than kept.
func (s *uriSet) len() int {
	n := 0
	for _, c := range s.chunks {
		n += len(c)
	}
	return n
}

// after calls f with every key greater than k, in order, until f returns
// false.
func (s *uriSet) after(k string, f func(string) bool) {
	ci := sort.Search(len(s.chunks), func(i int) bool {
		c := s.chunks[i]
		return c[len(c)-1] > k
	})
	for ; ci < len(s.chunks); ci++ {
		c := s.chunks[ci]
		i, found := slices.BinarySearch(c, k)
		if found {
			i++
		}
		for _, key := range c[i:] {
			if !f(key) {
				return
			}
		}
		k = "" // every key of the later chunks is greater
	}
}
