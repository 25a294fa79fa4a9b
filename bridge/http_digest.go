package bridge

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/aglx/ledger/projections"
)

// digestDutyMax bounds the share of time the ledger digest may hold the
// fold: the next may be made only after this many times the last one's
// cost has passed since it was made.
const digestDutyMax = 10

// ledgerDigests is what GET /v1/ledger/digest keeps between requests: the
// last digest made, at which position, when, and what it cost. Its lock
// is held while a digest is made.
type ledgerDigests struct {
	sync.Mutex
	at   uint64
	have bool
	d    projections.Digest
	done time.Time
	cost time.Duration
}

// ledgerDigest answers GET /v1/ledger/digest under viewAt.
//
// The digest takes the whole ledger's state under the fold's read lock,
// which holds up the fold, and with it every reply, for as long (a
// quarter of a second at 210,000 postings), and then writes it out and
// hashes it after the View, off the lock (three times as long): until
// 2026-12-01 all of it was under the lock, seconds on a ledger of
// hundreds of thousands of postings (helper-69). It still costs a core
// for as long, so a digest already made at or past the position asked
// for is answered again, and a new one is made only when the last one's
// making took at most a tenth of the time since: otherwise 503, with when
// to ask again, in the message and, rounded up to whole seconds, in
// Retry-After. A caller asking while one is being made is answered 503 at
// once.
func (api API) ledgerDigest(digest *ledgerDigests) func(r *http.Request, applied uint64) (int, any) {
	return func(r *http.Request, applied uint64) (int, any) {
		// Tried, not waited for, and only once the read has its position:
		// callers queued on the lock held HTTP slots without bound
		// (helper-75), and one taken before viewAt's wait for ?seq= kept
		// every other digest at 503 for that wait (helper-76). TryLock
		// never blocks, so the View holds up the fold for nothing.
		if !digest.TryLock() {
			return http.StatusServiceUnavailable, unavailable{digestBusyRetryAfter, "a ledger digest is being made; ask again in a moment (aglx audit does, within --wait)"}
		}
		want, _ := strconv.ParseUint(r.URL.Query().Get("seq"), 10, 64) // checked by viewAt
		if digest.have && (digest.at == applied || (want > 0 && digest.at >= want)) {
			defer digest.Unlock()
			return http.StatusOK, digest.d
		}
		if wait := digestDutyMax*digest.cost - time.Since(digest.done); digest.have && wait > 0 {
			defer digest.Unlock()
			return http.StatusServiceUnavailable, unavailable{wait, fmt.Sprintf("the last digest (at seq %d) took %s to make; a new one may be made in %s: ask again then, or with ?seq= at most %d for that one",
				digest.at, digest.cost.Round(time.Millisecond), wait.Round(time.Millisecond), digest.at)}
		}
		start := time.Now()
		digestOf := projections.DigestLater(api.Credits, applied)
		return 0, afterView(func() (int, any) {
			defer digest.Unlock()
			d, err := digestOf()
			if err != nil {
				return http.StatusInternalServerError, errBody(err.Error())
			}
			digest.at, digest.have, digest.d = applied, true, d
			digest.done, digest.cost = time.Now(), time.Since(start)
			return http.StatusOK, d
		})
	}
}
