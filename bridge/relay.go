package bridge

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/projections"
	"github.com/aglx/ledger/protocol"
	"github.com/nats-io/nats.go/jetstream"
)

// Relay bounds.
const (
	// RelayAttemptsMax bounds the deliveries of one message. After the last
	// one the message stays recorded, undelivered, and is logged.
	RelayAttemptsMax = 10
	// relayTimeout bounds one delivery: connecting, writing, and reading
	// the addressee's reply.
	relayTimeout = 10 * time.Second
	// relayPendingMax bounds the messages waiting for another attempt. When
	// it is reached the relay takes no new message until one settles, and
	// its cursor stays behind them.
	relayPendingMax = 1024 // messages
	// relayStretchMax bounds the events taken from memory in one go, so
	// that retries that fall due are not kept waiting by a long backlog.
	relayStretchMax = 4096 // events
	// relayReplyBodyMax bounds the body of an addressee's reply that the
	// relay reads: it needs only its TYPE and STATUS, and read with the
	// largest body a frame may have (8 MiB, about 56 MiB allocated), 64
	// lanes of addressees the sender controls could take a gigabyte
	// (helper-82). A larger reply is the receipt all the same, and its
	// connection is dropped.
	relayReplyBodyMax = 64 << 10 // bytes
)

// HeaderRelayedBy marks a frame the node delivers on behalf of its sender.
// A frame that arrives with it is recorded but never relayed again, so two
// nodes (or an agent that registers a node's own address) cannot bounce a
// message between them forever: the relay is one hop.
const HeaderRelayedBy = protocol.HeaderRelayedBy

// relayBackOff is the wait before each further attempt.
var relayBackOff = []time.Duration{time.Second, 5 * time.Second, 15 * time.Second, 30 * time.Second, time.Minute,
	2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 10 * time.Minute}

// The messages agents send each other, which the relay delivers to the
// addressee: whole TYPE groups, and single TYPEs of other groups.
// Registry, security and announce messages are for registries and are not
// relayed.
var (
	relayGroups = []string{"task", "credit", "shutdown", "plan", "ack", "error"}
	relayTypes  = []string{protocol.TypeMentorRequest, protocol.TypeMentorFeedback, protocol.TypeRegistryExchange}
)

// relayable reports whether a message of TYPE typ is one agents address
// to each other.
func relayable(typ string) bool {
	group, _, _ := strings.Cut(typ, ".")
	for _, g := range relayGroups {
		if group == g {
			return true
		}
	}
	for _, t := range relayTypes {
		if typ == t {
			return true
		}
	}
	return false
}

// relaySubjects are the subjects of the relayable TYPEs, for reading back
// from the stream only what the relay may deliver.
func relaySubjects() []string {
	var out []string
	for _, g := range relayGroups {
		out = append(out, events.SubjectPrefix+"."+g+".>")
	}
	for _, t := range relayTypes {
		out = append(out, events.SubjectPrefix+"."+events.TypeTokens(t)+".>")
	}
	return out
}

// Relay delivers the messages agents address to each other, after they are
// recorded, at least once, across restarts of the node. It follows the log
// as the projections do, from the log's memory while it can and from the
// stream otherwise, and keeps its position in a cursor (relay_cursor.go).
// It sends each message to the address the addressee registered
// (registry.update's address and port) and counts it delivered when the
// addressee answers. What it sends is the recorded headers, in order and
// as spelt, plus RELAYED-BY and a CONTENT-LENGTH of its own in place of
// the sender's; and the body compacted (relayBody), not byte for byte as
// recorded. A message to an agent that has no live registration with an
// address is not delivered: it stays in the log, where the agent (or
// anyone) can read it. A failed delivery is
// retried with back-off, up to RelayAttemptsMax times.
type Relay struct {
	Log      *events.Log
	Runner   *projections.Runner
	Registry *projections.Registry
	NodeURI  string
	Lg       *slog.Logger
	// Networks are the only networks the relay connects to. Agents say
	// where they listen, so without this bound anyone who can register
	// could make the node open connections into any network it can reach.
	// Addresses must be IP literals.
	Networks []netip.Prefix
	// Refused reports whether the node refused the event at seq (its
	// reply was an error, such as a transfer the ledger found no funds
	// for), and whether that is known. A refused message is not
	// delivered: with RELAYED-BY on it, an addressee would take a refused
	// transfer for a payment. Nor is one whose verdict is no longer known
	// (projections.RefusalsMax): until 2026-11-30 the relay delivered
	// those, and after a restart that resumed its cursor far behind, a
	// refused transfer went out as if paid. Nil delivers everything.
	Refused func(seq uint64) (refused, known bool)
	// Timeout bounds one delivery; 0 means relayTimeout.
	Timeout time.Duration

	delivered, undeliverable, failed atomic.Int64
	// unexpected counts replies that were neither ack nor error: an
	// addressee answering a relayed request (a task.result to a
	// task.assign) on the relay's connection, where nobody records it.
	unexpected atomic.Int64
	strayLog   logRate
	// outsideLog bounds the lines about messages to addresses outside
	// the relay networks: one agent registered such an address and made
	// a line a message, 3,000 in 0.15 s (helper-106).
	outsideLog                             logRate
	cursorSeq, waiting, lanes, laneWaiting atomic.Int64

	cur *relayCursor // set by Open

	mu    sync.Mutex
	conns map[string]*keptConn // by address; reused while they work (relay_conns.go)
}

// RelayCounters are the relay's running totals and position.
type RelayCounters struct {
	Delivered     int64 `json:"delivered"`
	Undeliverable int64 `json:"undeliverable"`
	Failed        int64 `json:"failed_attempts"`
	// Cursor is the sequence up to which every message is settled:
	// delivered, undeliverable, given up, or not the relay's.
	Cursor int64 `json:"cursor"`
	// Retrying counts the messages waiting for another attempt.
	Retrying int64 `json:"retrying"`
	// Lanes counts the addresses being delivered to (relay_lane.go). At
	// relayLanesMax, messages for other addresses wait.
	Lanes int64 `json:"lanes"`
	// WaitingForLane counts the messages that found no lane free and wait
	// for one (relay_wait.go).
	WaitingForLane int64 `json:"waiting_for_lane"`
	// UnexpectedReplies counts addressees' replies that were neither ack
	// nor error: answers sent back on the relay's connection instead of
	// to the node, which the relay counts as the receipt and drops
	// (PROTOCOL.md, "Delivery to agents").
	UnexpectedReplies int64 `json:"unexpected_replies"`
}

// timeout is the bound on one delivery: connecting, writing, and reading
// the addressee's reply.
func (r *Relay) timeout() time.Duration {
	if r.Timeout > 0 {
		return r.Timeout
	}
	return relayTimeout
}

// Counters returns the relay's running totals.
func (r *Relay) Counters() RelayCounters {
	return RelayCounters{Delivered: r.delivered.Load(), Undeliverable: r.undeliverable.Load(), Failed: r.failed.Load(),
		Cursor: r.cursorSeq.Load(), Retrying: r.waiting.Load(), Lanes: r.lanes.Load(), WaitingForLane: r.laneWaiting.Load(),
		UnexpectedReplies: r.unexpected.Load()}
}

// Open reads the relay's saved position, or, the first time, takes the
// log's end as it stands. Run opens it if it is not open yet; calling it
// before the node takes frames makes every frame taken after it the
// relay's.
func (r *Relay) Open(ctx context.Context) error {
	if r.cur != nil {
		return nil
	}
	cur, err := openRelayCursor(ctx, r.Log, r.Lg)
	if err != nil {
		return err
	}
	r.cur = cur
	r.cursorSeq.Store(int64(cur.saved))
	r.Lg.Info("relay: resuming", "after_seq", cur.saved, "owed", len(cur.pending))
	return nil
}

// Run delivers until ctx ends.
func (r *Relay) Run(ctx context.Context) error {
	if err := r.Open(ctx); err != nil {
		return err
	}
	st := &relayRun{r: r, cur: r.cur, next: r.cur.saved + 1, retries: newRetryQueue(),
		lanes: map[string]*lane{}, inLane: map[uint64]inLaneEntry{}, down: map[string]time.Time{}, retryCount: map[string]int{}, laneWaitFor: map[string]int{}, waitRetryFor: map[string]int{},
		freed: make(chan struct{}, 1), laneEnded: make(chan struct{}, 1), restore: r.cur.pending, restoreAt: r.cur.saved}
	defer func() {
		// Closing the connections ends the deliveries in progress; the
		// lanes then stop, leaving what they did not settle behind the
		// cursor, which is written last.
		r.closeConns()
		st.wg.Wait()
		r.closeConns()
		r.lanes.Store(0)
		r.laneWaiting.Store(0) // owed in the cursor's record
		st.save(true)
	}()
	for ctx.Err() == nil {
		if len(st.restore) > 0 {
			if st.end() < st.restoreAt || !st.restorePending(ctx) {
				// Nothing new before what is owed is queued.
				st.sleep(ctx, time.Now().Add(time.Second))
				continue
			}
		}
		st.placeWaiting(ctx)
		st.retryDue(ctx, time.Now())
		st.save(false)
		if st.full() {
			st.waitFor(ctx, st.freed, true)
			continue
		}
		if st.end() < st.next {
			st.waitApplied(ctx)
			continue
		}
		if err := st.follow(ctx); err != nil && ctx.Err() == nil {
			r.Lg.Warn("relay: reading the stream", "from", st.next, "err", err)
			st.sleep(ctx, time.Now().Add(time.Second))
		}
	}
	return nil
}

// relayRun is the state of one Run. next, cur, savedAt, saveFailLogged and placedGen
// belong to Run's goroutine; the rest is shared with the lanes under mu.
type relayRun struct {
	r       *Relay
	cur     *relayCursor
	next    uint64 // the first sequence not yet considered
	savedAt time.Time
	// saveFailLogged is when a failed save of the cursor was last logged,
	// zero after one succeeded.
	saveFailLogged time.Time
	// placedGen is laneGen as it was when the messages waiting for a lane
	// were last placed (relay_wait.go).
	placedGen uint64

	mu      sync.Mutex
	retries *retryQueue
	lanes   map[string]*lane // by address
	// retryLanes counts the lanes started for a retry (relayRetryLanesMax);
	// laneGen counts the lanes that ended, so that the messages waiting
	// for one are placed again only when one did.
	retryLanes int
	laneGen    uint64
	// laneWait holds the messages that found no lane free, in the order
	// the relay took them; laneWaitFor counts them by address, and
	// waitRetryFor and waitRetryCount the retries among them, by the
	// address they failed at. waitAll and waitRetries say what holds the
	// list up: no lane at all, or the retries' share (relay_wait.go).
	laneWait             []waitingItem
	laneWaitFor          map[string]int
	waitRetryFor         map[string]int
	waitRetryCount       int
	waitAll, waitRetries bool
	// inLane counts, by sequence, the messages handed to a lane and not
	// yet settled (a count, so that the bookkeeping stays right even if a
	// sequence were ever handed out twice), with what the cursor record
	// needs of them.
	inLane map[uint64]inLaneEntry
	// restore holds the messages the saved cursor names as owed, until
	// the projections have caught up with it and they can be queued.
	restore   []pendingRetry
	restoreAt uint64 // the saved cursor they were owed under
	// down holds the addresses whose last delivery failed, until when
	// their next attempt is due; retryCount the messages waiting for a
	// retry, by the address they failed at (relay_breaker.go).
	down       map[string]time.Time
	retryCount map[string]int
	wg         sync.WaitGroup // the lanes' goroutines
	freed      chan struct{}  // a lane settled a message (relay_lane.go)
	laneEnded  chan struct{}  // a lane ended
	giveUpLog  logRate        // lines about messages given up (LogLinesPerSecondMax)
}

// follow considers the published events from next on: from the log's
// memory while they are there, else read back from the stream, filtered
// to the relayable subjects. It stops early when the pending messages or
// the lanes are at their bound.
func (st *relayRun) follow(ctx context.Context) error {
	end := st.end()
	for taken := 0; st.next <= end && taken < relayStretchMax; taken++ {
		if st.full() {
			return nil // Run waits for a message to settle
		}
		e, ok := st.r.Log.Recent(st.next)
		if !ok {
			break
		}
		st.consider(ctx, e)
		st.next++
	}
	if st.next > end || st.full() {
		return nil
	}
	if _, ok := st.r.Log.Recent(st.next); ok {
		return nil // stopped at the stretch bound; more on the next turn
	}
	// stopped says the read ended before end, with next set where it
	// did: the lanes settle messages meanwhile, so whether the relay was
	// full cannot be asked again afterwards. next follows every event
	// considered, so a read that fails part way leaves nothing to be
	// handed to a lane twice.
	stopped, taken := false, 0
	err := st.r.Log.Read(ctx, events.ReadOptions{StartSeq: st.next, Subjects: relaySubjects()}, func(e *events.Envelope) error {
		if e.Seq > end {
			return events.ErrStop
		}
		if taken++; taken > relayStretchMax {
			stopped = true // more on the next turn, after due retries
			return events.ErrStop
		}
		st.consider(ctx, e)
		// Moved at once, so that a read that fails after this leaves the
		// event behind it: it is in a lane already.
		st.next = e.Seq + 1
		if st.full() {
			stopped = true
			return events.ErrStop
		}
		return nil
	})
	if err != nil {
		return err
	}
	if !stopped {
		st.next = end + 1
	}
	return nil
}

// relayedBefore reports whether e carries a RELAYED-BY header, whatever
// its value: an empty one ("RELAYED-BY:") counted as none, and a message
// an agent sent to an address that leads back to a node went round for
// ever, stored again on every pass.
func relayedBefore(e *events.Envelope) bool {
	_, ok := e.Frame().Get(HeaderRelayedBy)
	return ok
}

// consider hands e to its address's lane, or to the messages waiting for
// one (relay_wait.go), if it is an agent-to-agent message whose addressee
// can be reached.
func (st *relayRun) consider(ctx context.Context, e *events.Envelope) {
	r := st.r
	if !st.deliverable(e) {
		return
	}
	addr, ok := r.contact(e.To)
	if !ok {
		r.undeliverable.Add(1)
		r.Lg.Debug("relay: addressee has no live registration with an address; the message stays in the log", "seq", e.Seq, "to", e.To)
		return
	}
	if !r.allowed(addr) {
		r.undeliverable.Add(1)
		r.outsideLog.log(r.Lg, time.Now(), slog.LevelInfo, "relay: the addressee's address is outside the relay networks; the message stays in the log", "seq", e.Seq, "to", e.To, "addr", addr)
		return
	}
	st.place(ctx, &retryItem{env: e, attempts: 0}, addr)
}

// deliverable reports whether e is a message the relay delivers: an
// agent-to-agent message, not relayed once already, that the node did not
// refuse (and whose verdict it still knows). Messages it is not are
// counted and logged as undeliverable where that is news.
func (st *relayRun) deliverable(e *events.Envelope) bool {
	r := st.r
	if !relayable(e.Type) || e.To == "" || e.To == r.NodeURI || relayedBefore(e) {
		return false // not the relay's, or relayed once already
	}
	if r.Refused != nil {
		refused, known := r.Refused(e.Seq)
		if refused {
			r.undeliverable.Add(1)
			r.Lg.Debug("relay: the node refused this message; not delivered", "seq", e.Seq, "to", e.To)
			return false
		}
		if !known {
			r.undeliverable.Add(1)
			st.giveUpLog.log(r.Lg, time.Now(), slog.LevelWarn, "relay: whether the node refused this message is no longer known; not delivered, it stays in the log", "seq", e.Seq, "to", e.To)
			return false
		}
	}
	return true
}

// attemptResult is what became of one delivery attempt.
type attemptResult int

const (
	attemptDelivered attemptResult = iota
	attemptRetry                   // failed; due again at it.due
	attemptGaveUp                  // failed for the last time
	attemptCut                     // cut short by shutdown
)

// attempt makes one delivery of it to addr and says what became of it;
// the lane queues a retry under the same lock as it settles the delivery,
// so that the cursor never sees the message in neither place. Lanes call
// it.
func (st *relayRun) attempt(ctx context.Context, it *retryItem, addr string) attemptResult {
	r := st.r
	err := r.deliver(ctx, addr, it.env)
	switch {
	case err == nil:
		r.delivered.Add(1)
		return attemptDelivered
	case ctx.Err() != nil:
		// Not the addressee's failure. It stays unsettled, so the next
		// start delivers it.
		return attemptCut
	}
	it.attempts++
	r.failed.Add(1)
	if it.attempts >= RelayAttemptsMax {
		// Given up: counted with the rest the relay will not deliver
		// (aglx_relay_undeliverable_total), which it did not count.
		r.undeliverable.Add(1)
		r.Lg.Warn("relay: delivery failed for the last time; giving up, the message stays in the log", "seq", it.env.Seq, "to", it.env.To, "addr", addr, "attempts", it.attempts, "err", err)
		return attemptGaveUp
	}
	r.Lg.Info("relay: delivery failed; will retry", "seq", it.env.Seq, "to", it.env.To, "addr", addr, "attempt", it.attempts, "err", err)
	it.due = time.Now().Add(relayBackOff[min(it.attempts, len(relayBackOff))-1])
	return attemptRetry
}

// retryDue hands every queued message that is due to its lane. The
// addressee's address is looked up again: it may have moved or gone.
func (st *relayRun) retryDue(ctx context.Context, now time.Time) {
	r := st.r
	for {
		st.mu.Lock()
		if st.retries.len() == 0 || st.retries.peek().due.After(now) {
			st.mu.Unlock()
			return
		}
		it := st.popRetry()
		st.mu.Unlock()
		addr, ok := r.contact(it.env.To)
		if !ok || !r.allowed(addr) {
			r.undeliverable.Add(1)
			r.Lg.Info("relay: the addressee can no longer be reached; the message stays in the log", "seq", it.env.Seq, "to", it.env.To)
			continue
		}
		st.place(ctx, it, addr)
	}
}

// full reports whether the messages in lanes, waiting for one, or waiting
// for a retry are at relayPendingMax: then the relay takes no new one.
func (st *relayRun) full() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.retries.len()+len(st.inLane)+len(st.laneWait) >= relayPendingMax
}

// nextDue is when the first queued retry falls due, if there is one.
func (st *relayRun) nextDue() (time.Time, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.retries.len() == 0 {
		return time.Time{}, false
	}
	return st.retries.nextDue(), true
}

// settled is the sequence up to which every message is settled: before
// next, and before anything still in a lane or waiting for a retry.
func (st *relayRun) settled() uint64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	s := st.next - 1
	if st.retries.len() > 0 {
		s = min(s, st.retries.minSeq()-1)
	}
	for seq := range st.inLane {
		s = min(s, seq-1)
	}
	for _, w := range st.laneWait {
		s = min(s, w.it.env.Seq-1)
	}
	for _, p := range st.restore {
		s = min(s, p.Seq-1)
	}
	return s
}

// owed lists the messages considered and not yet settled, by sequence:
// those waiting for a retry, in a lane, or not yet restored. A message in
// a lane is due after a restart from when it entered the lane (its attempt
// may have been cut short): the time it entered, not now, so that the
// record does not change every second while a delivery waits out its
// timeout.
func (st *relayRun) owed(now time.Time) []pendingRetry {
	st.mu.Lock()
	defer st.mu.Unlock()
	by := make(map[uint64]pendingRetry, st.retries.len()+len(st.inLane)+len(st.laneWait)+len(st.restore))
	add := func(p pendingRetry) {
		if q, ok := by[p.Seq]; ok && q.Attempts > p.Attempts {
			return
		}
		by[p.Seq] = p
	}
	for _, p := range st.restore {
		add(p)
	}
	for _, it := range st.retries.items {
		add(pendingRetry{Seq: it.env.Seq, EventID: it.env.ID, Attempts: it.attempts, Due: it.due.UTC(), Addr: it.addr})
	}
	for seq, e := range st.inLane {
		add(pendingRetry{Seq: seq, EventID: e.id, Attempts: e.attempts, Due: e.since.UTC(), Addr: e.addr})
	}
	for _, w := range st.laneWait {
		add(pendingRetry{Seq: w.it.env.Seq, EventID: w.it.env.ID, Attempts: w.it.attempts, Due: w.since.UTC(), Addr: w.it.addr})
	}
	out := make([]pendingRetry, 0, len(by))
	for _, p := range by {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b pendingRetry) int { return cmp.Compare(a.Seq, b.Seq) })
	return out
}

// restorePending queues the messages the saved cursor names as owed, each
// with its attempts and its due time, read back from the stream. The
// projections have caught up with the cursor, so the addressees'
// registrations are known. A message the stream no longer holds (its
// limits removed it), or holds another event at its sequence (a store
// restored from copies of different times), or that the relay would not
// deliver now, is given up; any other failure to read one is tried again
// on the next turn, and reported false: the relay takes nothing new
// meanwhile, so that what it owes stays within its bound.
func (st *relayRun) restorePending(ctx context.Context) bool {
	r := st.r
	for len(st.restore) > 0 && ctx.Err() == nil {
		p := st.restore[0]
		env, err := r.Log.Get(ctx, p.Seq)
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
			r.undeliverable.Add(1)
			r.Lg.Warn("relay: a message owed before the restart is no longer in the stream; given up", "seq", p.Seq)
		case err != nil:
			r.Lg.Warn("relay: reading a message owed before the restart; will try again", "seq", p.Seq, "err", err)
			return false
		case p.EventID != "" && env.ID != p.EventID:
			r.undeliverable.Add(1)
			r.Lg.Warn("relay: the stream holds another event where a message owed before the restart was; given up (was the store restored from copies of different times?)",
				"seq", p.Seq, "owed_event", p.EventID, "found_event", env.ID)
		case !st.deliverable(env):
			// Not the relay's, or refused: deliverable counted and logged
			// what is news.
		default:
			st.mu.Lock()
			st.requeue(&retryItem{env: env, attempts: p.Attempts, due: p.Due, addr: p.Addr})
			st.mu.Unlock()
		}
		st.mu.Lock()
		st.restore = st.restore[1:]
		st.mu.Unlock()
	}
	if len(st.restore) == 0 {
		r.Lg.Info("relay: queued the messages owed before the restart", "count", len(st.cur.pending))
	}
	return len(st.restore) == 0
}

// save writes the cursor if it moved and the last write is old enough, or
// at once when final.
func (st *relayRun) save(final bool) {
	st.mu.Lock()
	st.pruneDown(time.Now())
	st.mu.Unlock()
	st.r.cursorSeq.Store(int64(st.settled()))
	now := time.Now()
	if !final && now.Sub(st.savedAt) < relayCursorSaveInterval {
		return
	}
	if err := st.cur.save(st.next-1, st.owed(now)); err != nil {
		// Once a minute while it keeps failing, not at every try: a
		// store that refuses writes made a line a second (helper-106).
		if final || now.Sub(st.saveFailLogged) >= relayCursorFailLogEvery { // the last one always
			st.r.Lg.Warn("relay: saving the cursor failed; a restart may deliver some messages again", "seq", st.next-1, "err", err)
			st.saveFailLogged = now
		}
	} else {
		st.saveFailLogged = time.Time{}
	}
	st.savedAt = now
}

// end is the last event the relay may consider: published, and applied
// by the projections, so that the registry already knows any registration
// recorded before a message to the agent it registers.
func (st *relayRun) end() uint64 {
	return min(st.r.Log.Published(), st.r.Runner.Applied())
}

// waitApplied waits for the next event, until the next retry or cursor
// write is due, or, while messages wait for a lane, until a lane ends.
func (st *relayRun) waitApplied(ctx context.Context) {
	until := time.Now().Add(relayCursorSaveInterval)
	if due, ok := st.nextDue(); ok && due.Before(until) {
		until = due
	}
	wctx, cancel := context.WithDeadline(ctx, until)
	defer cancel()
	st.mu.Lock()
	waiting := len(st.laneWait) > 0
	st.mu.Unlock()
	if waiting {
		// A lane that ends makes room for the messages waiting for one.
		go func() {
			select {
			case <-st.laneEnded:
				if wctx.Err() != nil {
					st.wake(st.laneEnded) // the wait was over: the next one's
				}
				cancel()
			case <-wctx.Done():
			}
		}()
	}
	st.r.Runner.WaitFor(wctx, st.next)
}

func (st *relayRun) sleep(ctx context.Context, until time.Time) {
	t := time.NewTimer(time.Until(until))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// contact is the address the addressee registered, if its registration is
// live. Whether it is live is a matter of the wall clock: delivery is not
// a fold.
func (r *Relay) contact(to string) (addr string, ok bool) {
	r.Runner.View(func(uint64) { addr, ok = r.Registry.Contact(to, time.Now()) })
	return canonicalAddr(addr), ok
}

// canonicalAddr spells an IP address and port one way: lanes, kept
// connections and down marks are keyed by it, and "[::ffff:127.0.0.1]:p",
// "[0::1]:p" and their plain forms were different keys for one address,
// each with a lane and a connection of its own (helper-82). An address
// that is not an IP literal is returned as it is (the relay does not
// connect to it: allowed).
func canonicalAddr(addr string) string {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return addr
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).String()
}

// allowed reports whether addr is an IP literal inside the relay networks.
func (r *Relay) allowed(addr string) bool {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return false
	}
	for _, n := range r.Networks {
		if n.Contains(ap.Addr().Unmap()) {
			return true
		}
	}
	return false
}
