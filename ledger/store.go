package ledger

import (
	"slices"
	"sort"
)

// chunkShift sets the size of the chunks of every table: 4096 rows.
const chunkShift = 12

// chunkSize is the number of rows per chunk.
const chunkSize = 1 << chunkShift // rows

// chunked is an append-only table of T stored in fixed-size chunks.
//
// A chunk is never moved once made, so growing the table neither copies
// the rows nor, as one big slice would while it doubles, holds twice their
// memory; and a pointer to a row stays valid for the table's life. At most
// one chunk is partly empty.
type chunked[T any] struct {
	chunks [][]T
	n      int
}

// get returns row i, which must exist.
func (c *chunked[T]) get(i uint32) *T {
	return &c.chunks[i>>chunkShift][i&(chunkSize-1)]
}

// add appends a zero row and returns its index and address.
func (c *chunked[T]) add() (uint32, *T) {
	if c.n%chunkSize == 0 {
		c.chunks = append(c.chunks, make([]T, chunkSize))
	}
	i := uint32(c.n)
	c.n++
	return i, c.get(i)
}

// len returns the number of rows.
func (c *chunked[T]) len() int { return c.n }

// page returns up to limit rows of rows, which are in growing order of
// seq, whose seq is after afterSeq. limit is capped at EntriesLimitMax.
// One event can have several rows (a claim up to four mismatches), and
// the next page starts after the last seq of this one, so a page never
// ends inside an event's rows: it takes the rest of them, a few more than
// limit. Cut there, the rest were never shown to anyone paging.
func page[T any](rows []T, seq func(*T) uint64, afterSeq uint64, limit int) []T {
	if limit <= 0 {
		return nil
	}
	limit = min(limit, EntriesLimitMax)
	start := sort.Search(len(rows), func(i int) bool { return seq(&rows[i]) > afterSeq })
	end := min(len(rows), start+limit)
	for end > start && end < len(rows) && seq(&rows[end]) == seq(&rows[end-1]) {
		end++
	}
	return slices.Clone(rows[start:end])
}
