package bridge

import (
	"slices"
	"strconv"

	"github.com/aglx/ledger/protocol"
)

// refusedStatuses are the statuses refusals are counted by, one counter
// each (PROTOCOL.md's list of what the node answers); a refusal with
// another counts as "other", so the counters stay a fixed few.
var refusedStatuses = [...]protocol.Status{
	protocol.StatusBadRequest, protocol.StatusUnauthorized, protocol.StatusPaymentRequired,
	protocol.StatusForbidden, protocol.StatusNotFound, protocol.StatusConflict,
	protocol.StatusTooLarge, protocol.StatusTooManyRequests, protocol.StatusUnavailable,
	protocol.StatusVersionUnsupported,
}

// refuse counts a refused frame, in all and by its status. An operator
// could tell only that frames were refused, not whether agents sent bad
// signatures (401) or the store refused writes (503) (helper-106).
func (c *counters) refuse(st protocol.Status) {
	c.refused.Add(1)
	c.refusedBy[slices.Index(refusedStatuses[:], st)+1].Add(1) // -1 + 1: other
}

// refusedByStatus is the counts by status, as text: "400", ..., "other".
func (c *counters) refusedByStatus() map[string]int64 {
	out := make(map[string]int64, len(c.refusedBy))
	for i := range c.refusedBy {
		name := "other"
		if i > 0 {
			name = strconv.Itoa(int(refusedStatuses[i-1]))
		}
		out[name] = c.refusedBy[i].Load()
	}
	return out
}
