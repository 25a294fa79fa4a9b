package events

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aglx/ledger/protocol"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// NATS headers on write-ahead batches and on the events published from them.
const (
	// HdrFirstSeq and HdrCount on a batch say which events it holds.
	HdrFirstSeq = "Aglx-First-Seq"
	HdrCount    = "Aglx-Count"
	// publishPendingMax bounds the client's publishes in flight to the event
	// stream: the publisher keeps at most one batch in flight beyond the
	// one it is issuing, and the margin keeps it clear of the client's
	// stall check, which would otherwise fail a publish at the boundary.
	publishPendingMax = 2*BatchEventsMax + 256
	// resyncWait is the pause between attempts to learn the write-ahead
	// stream's state after a failed commit.
	resyncWait = time.Second
)

// commitLoop is the group commit. It takes whatever appends are waiting,
// assigns their sequences, writes them as one batch to the write-ahead
// stream (one fsync), acknowledges them, and hands the batch on to the
// publisher. The next batch gathers while this one is being written.
func (l *Log) commitLoop() {
	defer l.wg.Done()
	defer close(l.toPublish)
	defer func() {
		// Appends that raced the stop into the queue after the last
		// look at it above: fail them, as Append does for those after.
		close(l.committerGone)
		l.failStranded()
	}()
	buf := make([]byte, 0, BatchBytesMax+envelopeOverhead)
	for {
		p := l.carry
		if p == nil {
			// While the log refuses appends, nothing reaches the queue to
			// make the next commit try resync: it is tried on a timer, or
			// the log would refuse for good after an outage of NATS that
			// outlasted the last append's attempt.
			var retry <-chan time.Time
			if l.unhealthy.get() != nil {
				retry = time.After(resyncWait)
			}
			select {
			case p = <-l.queue:
			case <-retry:
				l.resync()
				continue
			case <-l.stop:
				for { // commit what was queued before the stop
					if l.carry == nil {
						select {
						case l.carry = <-l.queue:
						default:
							return
						}
					}
					var pend []*Pending
					pend, l.carry = l.collect(l.carry)
					buf = l.commit(pend, buf)
				}
			}
		}
		var pend []*Pending
		pend, l.carry = l.collect(p)
		buf = l.commit(pend, buf)
	}
}

// collect gathers the appends waiting now, first among them, up to the
// batch bounds. An append that would take the batch past l.batchBytesMax
// (BatchBytesMax, or less if the server's max_payload is smaller) is
// returned as next, to start the next batch: a batch past the write-ahead
// stream's size limit or the connection's max_payload would be refused
// whole.
func (l *Log) collect(first *Pending) (pend []*Pending, next *Pending) {
	pend = []*Pending{first}
	size := first.size
	for len(pend) < BatchEventsMax {
		select {
		case p := <-l.queue:
			if size+p.size > l.batchBytesMax {
				return pend, p
			}
			pend = append(pend, p)
			size += p.size
		default:
			return pend, nil
		}
	}
	return pend, nil
}

// dupOf is an append answered by an earlier event with the same client ID.
type dupOf struct {
	p *Pending
	a Appended
}

func (l *Log) commit(pend []*Pending, buf []byte) []byte {
	if l.StoreDown() != nil {
		// The reason, with the store's paths, is the operator's
		// (/healthz, the log); the senders hear that the store takes
		// nothing (helper-105).
		for _, p := range pend {
			p.fail(errStoreDownForClients)
		}
		return buf
	}
	// Appends queued before the event stream began to refuse events are
	// refused too: the write-ahead stream must not get further ahead. This
	// comes before resync, which may wait to hand a batch to the publisher.
	if err := l.pubErr.get(); err != nil {
		for _, p := range pend {
			p.fail(err)
		}
		return buf
	}
	if err := l.unhealthy.get(); err != nil && !l.resync() {
		for _, p := range pend {
			p.fail(err)
		}
		return buf
	}
	// resync may have waited for the publisher, whose repair may have
	// failed meanwhile: asked again, so that the write-ahead stream gets
	// no batch further ahead of a stream that refuses (helper-86).
	if err := l.pubErr.get(); err != nil {
		for _, p := range pend {
			p.fail(err)
		}
		return buf
	}
	b := &batch{firstSeq: l.nextSeq}
	stored := make([]*Pending, 0, len(pend)) // stored[i] appended b.events[i]
	var dups []dupOf
	var added []string
	for _, p := range pend {
		e := p.env
		var digest uint64
		if isClientID(e.MsgID) {
			digest = contentDigest(e)
			if a, first, ok := l.ids.lookup(e.MsgID, e.ReceivedAt); ok {
				if first != digest {
					p.fail(protocol.Errorf(protocol.StatusConflict, "the ID %s was used for another message (TYPE, TO, a header or the body differ) within the last %s; a resend must be the same message, a new message needs a new ID",
						e.Header(protocol.HeaderID), l.cfg.DuplicateWindow))
					continue
				}
				a.Duplicate = true
				dups = append(dups, dupOf{p, a})
				continue
			}
		}
		e.Seq = b.firstSeq + uint64(len(b.events))
		b.events = append(b.events, e)
		stored = append(stored, p)
		if isClientID(e.MsgID) {
			l.ids.add(e.MsgID, Appended{EventID: e.ID, Seq: e.Seq}, e.ReceivedAt, digest)
			added = append(added, e.MsgID)
		}
	}
	if len(b.events) > 0 {
		buf = encodeBatch(buf[:0], b)
		started := time.Now()
		walSeq, err := l.writeBatch(b, buf)
		l.stats.commit(len(b.events), len(buf), time.Since(started), err)
		if err != nil {
			for _, k := range added {
				l.ids.remove(k)
			}
			// Recorded before the appends learn of it, so that a caller
			// who got the refusal finds the log reporting it. A refusal
			// by JetStream itself (a full store, a limit) is kept until a
			// batch is stored again; a lost connection, a timeout or a
			// wrong last sequence (a batch stored whose ack was lost) is
			// over once resync has reached the stream.
			failed := fmt.Errorf("events: the write-ahead stream failed: %w", explainStoreLimit(err))
			if apiErr := (*jetstream.APIError)(nil); errors.As(err, &apiErr) && !wrongLastSeq(err) {
				l.lastCommitErr.set(failed)
			}
			l.unhealthy.set(failed)
			// Not every append of pend: a conflicting ID was answered.
			for _, p := range stored {
				p.fail(err)
			}
			for _, d := range dups {
				d.p.fail(err)
			}
			// The same failure again is said once a minute, with how
			// many commits failed meanwhile: a store that refuses every
			// write made a line a batch (helper-106).
			if n, due := l.commitFails.due(err); due {
				l.lg.Error("group commit failed", "first_seq", b.firstSeq, "events", len(b.events), "err", err, "failed_commits", n)
			}
			l.resync()
			return buf
		}
		b.walSeq = walSeq
		l.walLast = walSeq
		l.commitFails.reset() // a failure after this one is news again
		l.nextSeq += uint64(len(b.events))
		l.durable.Store(l.nextSeq - 1)
		l.lastCommitErr.set(nil)
	}
	// The batch is on disk: every append in it is durable now. The event
	// stream gets the events next, at the sequences just promised.
	now := time.Now()
	for i, e := range b.events {
		stored[i].durableAt = now
		stored[i].resolve(Appended{EventID: e.ID, Seq: e.Seq})
	}
	for _, d := range dups {
		d.p.durableAt = now
		d.p.resolve(d.a)
	}
	if len(b.events) > 0 {
		l.handOff(b)
	}
	return buf
}

// handOff gives a committed batch to the publisher. The publisher's queue
// is short, so when the event stream refuses events the committer waits
// here; meanwhile it refuses the appends queued behind it once a second,
// rather than leave them unanswered until the event stream takes events
// again. Its own batch is durable and acknowledged already.
func (l *Log) handOff(b *batch) {
	select {
	case l.toPublish <- b:
		return
	default:
	}
	t := time.NewTicker(resyncWait)
	defer t.Stop()
	for {
		select {
		case l.toPublish <- b:
			return
		case <-t.C:
			if err := l.pubErr.get(); err != nil {
				l.refuseQueued(err)
			}
		}
	}
}

// refuseQueued fails every append waiting in the queue with err, and the
// one carried over to the next batch.
func (l *Log) refuseQueued(err error) {
	if l.carry != nil {
		l.carry.fail(err)
		l.carry = nil
	}
	for {
		select {
		case p := <-l.queue:
			p.fail(err)
		default:
			return
		}
	}
}

// writeBatch publishes one batch to the write-ahead stream and waits until
// it is stored. The expected-last-sequence check makes a lost
// acknowledgement safe: the next write fails instead of forking the history.
func (l *Log) writeBatch(b *batch, data []byte) (uint64, error) {
	msg := l.walMsg(b, data)
	ctx, cancel := context.WithTimeout(l.walDrops.context(), l.cfg.AckTimeout)
	defer cancel()
	ack, err := l.walJS.PublishMsg(ctx, msg, jetstream.WithExpectLastSequence(l.walLast), jetstream.WithExpectStream(l.cfg.walStream()))
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return 0, fmt.Errorf("events: the connection to NATS dropped while the batch was written (resync learns whether it was stored): %w", err)
		}
		return 0, err
	}
	return ack.Sequence, nil
}

// walMsg is the write-ahead message of batch b, encoded as data.
func (l *Log) walMsg(b *batch, data []byte) *nats.Msg {
	return &nats.Msg{Subject: l.cfg.walSubject(), Data: data, Header: nats.Header{
		HdrFirstSeq: []string{strconv.FormatUint(b.firstSeq, 10)},
		HdrCount:    []string{strconv.Itoa(len(b.events))},
	}}
}

// resync learns the write-ahead stream's true end after a failed commit
// (the batch may have been stored even though its acknowledgement was lost)
// and takes up any batch it finds there. It returns whether the log is
// healthy again.
func (l *Log) resync() bool {
	ctx, cancel := context.WithTimeout(l.drops.context(), l.cfg.AckTimeout)
	defer cancel()
	info, err := l.wal.Info(ctx)
	if err != nil {
		return false
	}
	if info.State.LastSeq < l.walLast {
		// The log believes the stream holds a batch it does not: the
		// acknowledgement it took was not JetStream's. The stream's end is
		// right if its last batch is the last one the log committed.
		if err := l.checkWALEnd(ctx, info.State.LastSeq); err != nil {
			l.unhealthy.set(err)
			return false
		}
		l.lg.Warn("the write-ahead stream ends before where the log believed; taking its end", "believed", l.walLast, "last_seq", info.State.LastSeq)
		l.walLast = info.State.LastSeq
	}
	for seq := l.walLast + 1; seq <= info.State.LastSeq; seq++ {
		m, err := l.wal.GetMsg(ctx, seq)
		if err != nil {
			return false
		}
		b, err := decodeBatch(m.Data)
		if err != nil || b.firstSeq != l.nextSeq {
			l.unhealthy.set(fmt.Errorf("events: write-ahead batch %d does not follow sequence %d: %v", seq, l.nextSeq-1, err))
			return false
		}
		b.walSeq = seq
		for _, e := range b.events {
			if isClientID(e.MsgID) {
				l.ids.add(e.MsgID, Appended{EventID: e.ID, Seq: e.Seq}, e.ReceivedAt, contentDigest(e))
			}
		}
		l.walLast = seq
		l.nextSeq = b.firstSeq + uint64(len(b.events))
		l.durable.Store(l.nextSeq - 1)
		l.lastCommitErr.set(nil) // a batch was stored after all
		l.handOff(b)
	}
	l.unhealthy.set(nil)
	return true
}

// checkWALEnd says whether the write-ahead stream, ending at last, ends
// with the last batch the log committed (whose events end before
// l.nextSeq), and if not, why not.
func (l *Log) checkWALEnd(ctx context.Context, last uint64) error {
	if last == 0 {
		if l.nextSeq == 1 {
			return nil
		}
		return fmt.Errorf("events: the write-ahead stream is empty, but the log committed events up to sequence %d", l.nextSeq-1)
	}
	m, err := l.wal.GetMsg(ctx, last)
	if err != nil {
		return fmt.Errorf("events: write-ahead batch %d: %w", last, err)
	}
	b, err := decodeBatch(m.Data)
	if err != nil {
		return fmt.Errorf("events: write-ahead batch %d: %w", last, err)
	}
	if end := b.firstSeq + uint64(len(b.events)); end != l.nextSeq {
		return fmt.Errorf("events: the write-ahead stream ends with batch %d, whose events end before sequence %d, but the log committed events up to %d", last, end, l.nextSeq-1)
	}
	return nil
}

// inflightPub tracks one run of publishes to the event stream: the events
// of one batch, of which only the last asks for an acknowledgement.
type inflightPub struct {
	fut  jetstream.PubAckFuture // the last event's acknowledgement
	envs []*Envelope            // the run, in sequence order
}

// publishLoop copies committed batches to the event stream, one message
// per event, each published with the sequence it must land at as a
// precondition (Nats-Expected-Last-Sequence). Publishes of consecutive
// batches overlap; at most BatchEventsMax events are in flight beyond the
// batch being issued.
//
// With Config.ExclusiveWriter, only the last event of a batch asks for an
// acknowledgement; the others are plain NATS publishes without a reply
// subject. JetStream stores a stream's messages in the order one
// connection sent them, and every event's precondition names the sequence
// of the event before it, so when nobody else can publish, the last event
// is stored at its sequence only if every event before it was stored at
// its own: one acknowledgement vouches for the whole run, and a run that
// went wrong anywhere fails at its last event, which starts the repair
// from the write-ahead stream. An acknowledgement per event cost the
// server a reply message and the client a future, two channels and a
// wake-up, per event: about a fifth of the node's CPU per frame. Where
// others may publish, a stranger's message can satisfy a later event's
// precondition after taking an earlier one's place, and every event is
// acknowledged on its own.
func (l *Log) publishLoop() {
	defer l.wg.Done()
	var fifo []inflightPub
	inflight := 0 // events in fifo
	var scratch []byte
	for b := range l.toPublish {
		for inflight > BatchEventsMax {
			fifo, inflight = l.reap(fifo, inflight, 1)
		}
		run := b.events
		for len(run) > 0 && run[0].Seq <= l.Published() {
			run = run[1:] // put back by a repair already
		}
		if len(run) == 0 {
			continue
		}
		var err error
		from := 0 // the first event of the run not yet in fifo
		for i, e := range run {
			var m *nats.Msg
			m, scratch = appendMsg(scratch, e, b.walSeq)
			if i < len(run)-1 && l.cfg.ExclusiveWriter {
				m.Header[jetstream.ExpectedLastSeqHeader] = []string{strconv.FormatUint(e.Seq-1, 10)}
				err = l.nc.PublishMsg(m)
			} else {
				var fut jetstream.PubAckFuture
				fut, err = l.js.PublishMsgAsync(m, jetstream.WithExpectLastSequence(e.Seq-1))
				if err == nil {
					fifo = append(fifo, inflightPub{fut: fut, envs: run[from : i+1]})
					from = i + 1
				}
			}
			if err != nil {
				break
			}
		}
		if err != nil {
			l.lg.Warn("publishing to the event stream failed; repairing from the write-ahead stream", "first_seq", run[0].Seq, "err", err)
			fifo, inflight = l.repair(fifo), 0
			continue
		}
		inflight += len(run)
		if len(l.toPublish) == 0 {
			fifo, inflight = l.reap(fifo, inflight, len(fifo))
		}
	}
	l.reap(fifo, inflight, len(fifo))
}

// reap waits for the first n runs in flight, and returns the runs and the
// count of events still in flight.
func (l *Log) reap(fifo []inflightPub, inflight, n int) ([]inflightPub, int) {
	for i := 0; i < n && len(fifo) > 0; i++ {
		f := fifo[0]
		select {
		case <-l.drops.context().Done():
			// The connection dropped or closed: the acknowledgement may
			// never come (nats.go fails the futures of a reconnection, not
			// those of a closed connection).
			return l.repair(fifo), 0
		case ack := <-f.fut.Ok():
			if last := f.envs[len(f.envs)-1].Seq; ack.Sequence != last {
				// The preconditions make this impossible; if it ever
				// happens, the stream is not what the acks promised.
				l.lg.Error("the event stream stored a run's last event at another sequence; repairing", "want", last, "got", ack.Sequence)
				return l.repair(fifo[1:]), 0
			}
			for _, e := range f.envs {
				l.ring.put(e)
			}
			l.setPublished(f.envs[len(f.envs)-1].Seq)
			fifo = fifo[1:]
			inflight -= len(f.envs)
		case err := <-f.fut.Err():
			l.lg.Warn("publishing to the event stream failed; repairing from the write-ahead stream", "first_seq", f.envs[0].Seq, "err", err)
			// f's future has answered; repair waits for the others'.
			return l.repair(fifo[1:]), 0
		}
	}
	return fifo, inflight
}

// repair waits out the publishes in flight and copies whatever the event
// stream lacks from the write-ahead stream, retrying until that succeeds
// or the log stops. fifo must hold only runs whose futures have not been
// read. Meanwhile no batch is published, so appends wait once the
// publisher's queue is full.
func (l *Log) repair(fifo []inflightPub) []inflightPub {
	for _, f := range fifo {
		select {
		case <-f.fut.Ok():
		case <-f.fut.Err():
		case <-l.drops.context().Done(): // as in reap
		}
	}
	var fails repeatedFailure
	for attempt, wait := 1, 100*time.Millisecond; ; attempt, wait = attempt+1, min(2*wait, 5*time.Second) {
		ctx, cancel := context.WithTimeout(l.drops.context(), l.cfg.AckTimeout)
		_, own, err := l.replayWAL(ctx)
		cancel()
		if err == nil {
			// Up to the node's own last event, not past strangers after
			// it: at run time the committer has promised, or is about to
			// promise, their sequences to its next events (its batch may
			// be on its way to the write-ahead stream while this repair
			// reads it), and the publisher skips every event at or below
			// Published as put back here. Those events' publishes fail
			// their precondition instead, and the next repair finds the
			// stranger where they were promised (helper-132).
			l.setPublished(own)
			l.setPublisherFailing(nil)
			return nil
		}
		// A first attempt may meet publishes of the run it replaces still
		// landing (after a dropped connection, repair does not wait for
		// them): a wrong last sequence then is no refusal, and marking the
		// log failing would answer 503 for nothing.
		if attempt > 1 || !wrongLastSeq(err) {
			l.setPublisherFailing(err)
		}
		// The same failure again is said once a minute, not at every
		// try: a full disk made a line every 5 s, which buried the
		// earlier lines that said why (helper-104).
		if _, due := fails.due(err); due {
			l.lg.Error("repairing the event stream failed; retrying", "err", err, "wait", wait, "attempt", attempt)
		}
		select {
		case <-time.After(wait):
		case <-l.stop:
			return nil
		}
	}
}

// repairLogEvery is how often a repair or a commit that keeps failing the
// same way says so again.
const repairLogEvery = time.Minute

// repeatedFailure decides when a failure that keeps coming is logged: the
// first, one that differs from the last logged, and the same again once
// repairLogEvery has passed. Its zero value is ready; one goroutine uses it.
type repeatedFailure struct {
	msg string    // the last logged
	at  time.Time // when
	n   int       // failures since, that one's included
}

// due counts err and reports whether to log it, and how many failures it
// stands for (itself and those left out before it).
func (f *repeatedFailure) due(err error) (n int, log bool) {
	f.n++
	if msg := err.Error(); msg != f.msg || time.Since(f.at) >= repairLogEvery {
		n, f.msg, f.at, f.n = f.n, msg, time.Now(), 0
		return n, true
	}
	return 0, false
}

// reset makes the next failure news, as after a success.
func (f *repeatedFailure) reset() { f.msg = "" }

var errGap = errors.New("events: gap between the event stream and the write-ahead stream")

// errForeign says the event stream holds, where the node's events go on, a
// message the node did not write: someone else can write to its subjects.
var errForeign = errors.New("events: the event stream holds a message the node did not write")

// errMisplaced is a reader's reason to skip an event found on a subject
// other than its own (Read).
var errMisplaced = errors.New("events: an event off its subject")

// wrongLastSeq reports whether JetStream refused a publish because the
// stream's last sequence was not the one the publish expected.
func wrongLastSeq(err error) bool {
	var apiErr *jetstream.APIError
	// A replicated stream answers a conflict with its own code (the
	// client's docs: the two are equivalent); with the first alone, a
	// benign conflict on --replicas 3 counted as a refusal by JetStream.
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}
