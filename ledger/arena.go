package ledger

import (
	"strconv"
	"unsafe"
)

// The ledger keeps no Go pointers in its big tables (accounts, postings,
// holds, key indexes): strings live in an arena and rows name them by
// strRef. The garbage collector then never scans the tables, which at a
// million postings would otherwise cost more than the postings themselves,
// and no string carries a header or an allocation of its own.

// arenaChunkSize is the size of one arena chunk. A string never spans two.
const arenaChunkSize = 1 << 20 // bytes

// strRefLenBits is the width of the length in a strRef.
const strRefLenBits = 24

// strRefSpareShift is the lowest bit of the length field that no strRef
// sets: every string is shorter than arenaChunkSize, 2^20 bytes. An owner
// may keep a small tag of its own in bits strRefSpareShift up to
// strRefLenBits-1 of a strRef it stores, and must clear them (strRefSpare)
// before it calls get.
const strRefSpareShift = 20

// strRefSpare masks those bits.
const strRefSpare strRef = (1<<strRefLenBits - 1) &^ (1<<strRefSpareShift - 1)

// The spare bits exist only while a string is shorter than 2^20 bytes.
var _ [1<<strRefSpareShift - arenaChunkSize]struct{}

// strRef names a string in an arena: its offset, shifted, and its length.
// The zero strRef is the empty string.
type strRef uint64

// arena is an append-only store of strings. Its chunks are never moved or
// changed once written, so a string read from it may alias its bytes.
type arena struct {
	chunks [][]byte
}

// put copies s into the arena. s must be shorter than arenaChunkSize; every
// string the ledger stores is bounded far below it (URIs, identifiers).
func (a *arena) put(s string) strRef {
	if s == "" {
		return 0
	}
	if len(s) >= arenaChunkSize {
		panic("ledger: a string of " + strconv.Itoa(len(s)) + " bytes is too long for the arena")
	}
	n := len(a.chunks)
	if n == 0 || len(a.chunks[n-1])+len(s) > arenaChunkSize {
		a.chunks = append(a.chunks, make([]byte, 0, arenaChunkSize))
		n++
	}
	c := &a.chunks[n-1]
	off := (n-1)*arenaChunkSize + len(*c)
	*c = append(*c, s...)
	return strRef(uint64(off)<<strRefLenBits | uint64(len(s)))
}

// get returns the string r names. It aliases the arena's bytes, which are
// immutable, so it costs no copy and no allocation.
func (a *arena) get(r strRef) string {
	n := int(r & (1<<strRefLenBits - 1))
	if n == 0 {
		return ""
	}
	off := int(r >> strRefLenBits)
	c := a.chunks[off/arenaChunkSize]
	return unsafe.String(&c[off%arenaChunkSize], n)
}
