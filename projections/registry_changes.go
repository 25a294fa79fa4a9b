package projections

import (
	"math"
	"slices"
	"sort"
	"time"
)

// changeLog lists the registry's entry changes in the order the fold made
// them, so that registry.fetch in update mode ("what changed since T")
// reads only the changes after T instead of every agent. Without it each
// such fetch walked the whole registry on the fold's goroutine, which
// every other message waits for: 12 ms per fetch at 100,000 agents, so
// a hundred fetches a second from anyone would stall the node.
//
// It is derived state, rebuilt by replay like the rest and kept out of
// snapshots. An entry is live while its agent's ChangedSeq is still the
// entry's seq; a later change of the same agent appends a new entry and
// leaves the old one stale, and stale entries are dropped when they
// outnumber the agents (compact), so the log holds at most about twice as
// many entries as there are agents.
type changeLog struct {
	entries []changeEntry
}

// changeEntry is one change. at is the entry's ChangedAt: the fold's clock,
// which never goes back (Registry.Apply), so entries are in order of at.
// It is a time.Time, not Unix nanoseconds: those overflow outside the
// years 1678 to 2262, and a fetch's since may be any year from 0000 to
// 9999 (and a received_at, from the log, too).
type changeEntry struct {
	at  time.Time
	seq uint64 // the event that made the change
	uri string
}

// changeLogSlack lets a small registry keep some stale entries rather
// than compact after every change.
const changeLogSlack = 1024 // entries

// add records that the agent at uri changed at the event seq; agents are
// the registry's, to count and to compact against.
func (l *changeLog) add(at time.Time, seq uint64, uri string, agents map[string]*agentEntry) {
	l.entries = append(l.entries, changeEntry{at: at, seq: seq, uri: uri})
	if len(l.entries) > 2*len(agents)+changeLogSlack {
		l.compact(agents)
	}
}

// compact drops the stale entries, keeping the order.
func (l *changeLog) compact(agents map[string]*agentEntry) {
	l.entries = slices.DeleteFunc(l.entries, func(c changeEntry) bool {
		a := agents[c.uri]
		return a == nil || a.ChangedSeq != c.seq
	})
}

// since returns the entries that changed at or after t.
func (l *changeLog) since(t time.Time) []changeEntry {
	i := sort.Search(len(l.entries), func(i int) bool { return !l.entries[i].at.Before(t) })
	return l.entries[i:]
}

// useChangeLog says whether a fetch should read k changes rather than walk
// the agents in order. A walk finds a page of RegistryListMax entries
// after about RegistryListMax·agents/k steps when the k changes are spread
// evenly; reading the changes costs k. So the changes are read when k is
// below the square root of RegistryListMax·agents (about 3,200 at
// 100,000 agents), and at least when k is a few pages.
func useChangeLog(k, agents int) bool {
	return k <= max(4*RegistryListMax, int(math.Sqrt(float64(RegistryListMax)*float64(agents))))
}
