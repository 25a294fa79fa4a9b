package bridge

import (
	"time"

	"golang.org/x/time/rate"
)

// rateTable is a bounded table of rate budgets by key (a host, a network),
// as the edge's limiters keep them (udp_limit.go, bind_limit.go). When it
// is full, the budgets that have filled up again are forgotten, since a
// full budget is what a forgotten one would start as and forgetting it
// gives no one anything; the search walks the whole table, so it is made
// at most once per sweepEvery, or a flood of new keys would make every
// request pay for it. What a limiter does with a key the table has no
// room for is its own policy.
type rateTable struct {
	m          map[string]*rate.Limiter
	max        int
	sweepEvery time.Duration
	swept      time.Time // the last search for full budgets
}

func newRateTable(max int, sweepEvery time.Duration) rateTable {
	return rateTable{m: map[string]*rate.Limiter{}, max: max, sweepEvery: sweepEvery}
}

// get is the budget kept under key, or nil.
func (t *rateTable) get(key string) *rate.Limiter { return t.m[key] }

// full reports whether the table has no room, after forgetting the
// budgets that have filled up again (at most one search per sweepEvery).
func (t *rateTable) full(now time.Time) bool {
	if len(t.m) >= t.max && now.Sub(t.swept) >= t.sweepEvery {
		t.swept = now
		for k, b := range t.m {
			if b.TokensAt(now) >= float64(b.Burst()) {
				delete(t.m, k)
			}
		}
	}
	return len(t.m) >= t.max
}

// add keeps b under key if there is room, and reports whether it did.
func (t *rateTable) add(key string, b *rate.Limiter, now time.Time) bool {
	if t.full(now) {
		return false
	}
	t.m[key] = b
	return true
}
