package events

import (
	"cmp"
	"encoding/binary"
	"hash/maphash"
	"slices"
	"strings"
	"time"

	"github.com/aglx/ledger/protocol"
)

// idIndex remembers the client IDs (FROM plus the frame's ID header) of the
// events appended within the duplicate window, so that a resend is answered
// with the first event instead of being stored again. The committer is its
// only user, so it has no lock. Time is the events' receive time.
type idIndex struct {
	window time.Duration
	max    int
	// byKey is by a keyed 128-bit hash of the key, not the key: a key may
	// be some 640 bytes (a long FROM, an ID of colons escaped), and at
	// DedupEntriesMax keys the strings alone took 930 MB (helper-86).
	byKey map[idHash]idEntry
	// order is the keys in insertion order, oldest first, from head on;
	// the forgotten ones before head are dropped in one copy once they
	// are half of it. Copying the rest at every expiry instead cost every
	// append the whole window: 160 µs an append at 100,000 keys, on the
	// committer, which every append waits for.
	order []idKey
	head  int
	adds  uint64 // numbers the adds, so that an old place in order never forgets a newer add of its key
}

type idEntry struct {
	a      Appended
	add    uint64
	digest uint64 // contentDigest of the event
}

type idKey struct {
	key idHash
	at  time.Time
	add uint64
}

// idHash names a key by two 64-bit hashes under seeds of this process:
// two keys share one only by a chance of 2^-128, and nobody can choose
// keys that do, since the seeds are made at each start (the index is
// rebuilt from the log then).
type idHash [2]uint64

var idSeeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

func hashID(key string) idHash {
	return idHash{maphash.String(idSeeds[0], key), maphash.String(idSeeds[1], key)}
}

func newIDIndex(window time.Duration, max int) *idIndex {
	return &idIndex{window: window, max: max, byKey: map[idHash]idEntry{}}
}

// dedupRetention is how long the index keeps an ID for a duplicate window
// of w: twice w. Its clock is the receive time of the frame being
// committed, and frames reach the committer out of receive order (a
// signature check, a full queue: an append may wait up to its timeout).
// Kept only for w, an ID could be forgotten, at the commit of a frame
// received later, before a resend received within w of the first was
// committed, and the resend was stored again. Kept longer, a resend a
// little after the window is answered as a duplicate, which is harmless.
func dedupRetention(w time.Duration) time.Duration { return 2 * w }

// isClientID reports whether a dedup key came from the client (an ID
// header) rather than being the node's own unique event id.
func isClientID(msgID string) bool { return len(msgID) > 3 && msgID[:3] == "id:" }

// ClientKey is the deduplication key of a frame from FROM with an ID
// header: "id:FROM:ID", with every '%' and ':' of the ID written %25 and
// %3A. A FROM may hold a colon (a port), so without the escapes agent://a
// with ID 80:x and agent://a:80 with ID x shared a key, and the second
// frame was answered with the first one's event. The last colon now always
// ends FROM; an ID without either character is written as it is, as
// before.
func ClientKey(from, id string) string {
	if !strings.ContainsAny(id, "%:") {
		return "id:" + from + ":" + id
	}
	return "id:" + from + ":" + clientIDEscaper.Replace(id)
}

var clientIDEscaper = strings.NewReplacer("%", "%25", ":", "%3A")

// contentDigest names what a message says, apart from who sent it and
// its ID (the key): its TYPE, TO, body, and every other header but
// CONTENT-LENGTH (the body's length). A resend under an ID already used
// must say the same; FROM is not authenticated, so without this anyone
// who guessed another sender's next ID could send something else under it
// first, and the real message would be answered as a duplicate of that
// and never stored. Until 2026-12-01 (helper-86) only TYPE, TO, CREDITS
// and the body counted, so an answer with another IN-REPLY-TO or STATUS
// under a used ID (an agent's ack to a second request, or a stranger's
// first) was answered as a duplicate: the request it named stayed open.
// Headers count by name in any letters, in any order of names (a resend
// need not spell or order them as the first copy did); a name that
// appears more than once counts with its values in the order they came,
// since every reader takes the first.
//
// The hash is seeded afresh at every start (the index is rebuilt from the
// event stream then, and never stored): the first message under a key is
// the sender's choice, so an unkeyed hash such as FNV would let one who
// sends first pick a body that collides with the one expected. It costs
// the committer, which every append waits for, time in proportion to the
// headers' bytes: names are put in order by a hash of each, made once,
// not by comparing them, which for 58 long names sharing a prefix took
// 750 µs a frame (helper-89).
func contentDigest(e *Envelope) uint64 {
	var h maphash.Hash
	h.SetSeed(digestSeed)
	h.WriteString(e.Type)
	h.WriteByte(0)
	h.WriteString(e.To)
	h.WriteByte(0)
	type named struct {
		name uint64 // nameHash
		i    int    // in e.Headers
	}
	hs := make([]named, 0, 16)
	for i, hd := range e.Headers {
		if digested(hd.Name) {
			hs = append(hs, named{nameHash(hd.Name), i})
		}
	}
	slices.SortStableFunc(hs, func(a, b named) int { return cmp.Compare(a.name, b.name) })
	var n [8]byte
	for _, x := range hs {
		binary.LittleEndian.PutUint64(n[:], x.name)
		h.Write(n[:])
		h.WriteString(e.Headers[x.i].Value)
		h.WriteByte(0)
	}
	h.WriteByte(1)
	h.Write(e.Body)
	return h.Sum64()
}

// digestSeed seeds contentDigest for this process.
var digestSeed = maphash.MakeSeed()

// digested reports whether a header named name counts in contentDigest:
// all but the key's (FROM, ID), those hashed apart in their canonical
// form (TYPE, TO), and CONTENT-LENGTH.
func digested(name string) bool {
	for _, n := range [...]string{protocol.HeaderFrom, protocol.HeaderID, protocol.HeaderType, protocol.HeaderTo, protocol.HeaderContentLength} {
		if strings.EqualFold(name, n) {
			return false
		}
	}
	return true
}

// nameHash hashes a header name as its ASCII upper case, so that names in
// other letters are one name.
func nameHash(name string) uint64 {
	var h maphash.Hash
	h.SetSeed(digestSeed)
	var buf [64]byte
	for len(name) > 0 {
		k := min(len(name), len(buf))
		for i := range k {
			c := name[i]
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			buf[i] = c
		}
		h.Write(buf[:k])
		name = name[k:]
	}
	return h.Sum64()
}

// expire forgets what is older than the window at now, and the oldest
// beyond max entries. It costs O(1) per key forgotten, amortised.
func (x *idIndex) expire(now time.Time) {
	for x.head < len(x.order) {
		k := x.order[x.head]
		if len(x.order)-x.head <= x.max && now.Sub(k.at) <= x.window {
			break
		}
		if e, ok := x.byKey[k.key]; ok && e.add == k.add {
			delete(x.byKey, k.key)
		}
		x.order[x.head] = idKey{}
		x.head++
	}
	if x.head > 0 && x.head >= len(x.order)/2 {
		n := copy(x.order, x.order[x.head:])
		clear(x.order[n:]) // the old copies would keep their keys alive
		x.order, x.head = x.order[:n], 0
	}
}

// size is how many keys the index holds.
func (x *idIndex) size() int { return len(x.order) - x.head }

// lookup returns the event appended under key within the window, and the
// contentDigest of that event.
func (x *idIndex) lookup(key string, now time.Time) (Appended, uint64, bool) {
	x.expire(now)
	e, ok := x.byKey[hashID(key)]
	return e.a, e.digest, ok
}

func (x *idIndex) add(key string, a Appended, at time.Time, digest uint64) {
	x.adds++
	h := hashID(key)
	x.byKey[h] = idEntry{a: a, add: x.adds, digest: digest}
	x.order = append(x.order, idKey{key: h, at: at, add: x.adds})
	x.expire(at)
}

func (x *idIndex) remove(key string) { delete(x.byKey, hashID(key)) }
