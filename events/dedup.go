package events

import (
	"hash/fnv"
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
	byKey  map[string]idEntry
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
	key string
	at  time.Time
	add uint64
}

func newIDIndex(window time.Duration, max int) *idIndex {
	return &idIndex{window: window, max: max, byKey: map[string]idEntry{}}
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
// its ID (the key): its TYPE, TO, CREDITS header (which sets a task's
// hold) and body. A resend under an ID already
// used must say the same; FROM is not authenticated, so without this
// anyone who guessed another sender's next ID could send something else
// under it first, and the real message would be answered as a duplicate
// of that and never stored. FNV-1a: no adversary chooses the message the
// digest is compared with.
func contentDigest(e *Envelope) uint64 {
	h := fnv.New64a()
	h.Write([]byte(e.Type))
	h.Write([]byte{0})
	h.Write([]byte(e.To))
	h.Write([]byte{0})
	h.Write([]byte(e.Header(protocol.HeaderCredits)))
	h.Write([]byte{0})
	h.Write(e.Body)
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
	e, ok := x.byKey[key]
	return e.a, e.digest, ok
}

func (x *idIndex) add(key string, a Appended, at time.Time, digest uint64) {
	x.adds++
	x.byKey[key] = idEntry{a: a, add: x.adds, digest: digest}
	x.order = append(x.order, idKey{key: key, at: at, add: x.adds})
	x.expire(at)
}

func (x *idIndex) remove(key string) { delete(x.byKey, key) }
