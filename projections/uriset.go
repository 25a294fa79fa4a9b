package projections

import (
	"slices"
	"sort"
)

// uriSet is a set of strings in order, for paging the registry by URI.
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
	ci := sort.Search(len(s.chunks), func(i int) bool {
		c := s.chunks[i]
		return c[len(c)-1] >= k
	})
	ci = min(ci, len(s.chunks)-1)
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
	ci := sort.Search(len(s.chunks), func(i int) bool {
		c := s.chunks[i]
		return c[len(c)-1] >= k
	})
	if ci == len(s.chunks) {
		return false
	}
	_, found := slices.BinarySearch(s.chunks[ci], k)
	return found
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
