package events

import "time"

// idIndex remembers the client IDs (FROM plus the frame's ID header) of the
// events appended within the duplicate window, so that a resend is answered
// with the first event instead of being stored again. The committer is its
// only user, so it has no lock. Time is the events' receive time.
type idIndex struct {
	window time.Duration
	max    int
	byKey  map[string]idEntry
	order  []idKey // insertion order, oldest first; a ring would save the copy
}

type idEntry struct {
	a  Appended
	at time.Time
}

type idKey struct {
	key string
	at  time.Time
}

func newIDIndex(window time.Duration, max int) *idIndex {
	return &idIndex{window: window, max: max, byKey: map[string]idEntry{}}
}

// isClientID reports whether a dedup key came from the client (an ID
// header) rather than being the node's own unique event id.
func isClientID(msgID string) bool { return len(msgID) > 3 && msgID[:3] == "id:" }

// expire forgets what is older than the window at now, and the oldest
// beyond max entries.
func (x *idIndex) expire(now time.Time) {
	cut := 0
	for cut < len(x.order) {
		k := x.order[cut]
		if len(x.order)-cut <= x.max && now.Sub(k.at) <= x.window {
			break
		}
		if e, ok := x.byKey[k.key]; ok && e.at.Equal(k.at) {
			delete(x.byKey, k.key)
		}
		cut++
	}
	if cut > 0 {
		x.order = append(x.order[:0], x.order[cut:]...)
	}
}

func (x *idIndex) lookup(key string, now time.Time) (Appended, bool) {
	x.expire(now)
	e, ok := x.byKey[key]
	return e.a, ok
}

func (x *idIndex) add(key string, a Appended, at time.Time) {
	x.byKey[key] = idEntry{a: a, at: at}
	x.order = append(x.order, idKey{key: key, at: at})
	x.expire(at)
}

func (x *idIndex) remove(key string) { delete(x.byKey, key) }
