package events

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

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
	buf := make([]byte, 0, BatchBytesMax+envelopeOverhead)
	for {
		select {
		case p := <-l.queue:
			buf = l.commit(l.collect(p), buf)
		case <-l.stop:
			for { // commit what was queued before the stop
				select {
				case p := <-l.queue:
					buf = l.commit(l.collect(p), buf)
				default:
					return
				}
			}
		}
	}
}

// collect gathers the appends waiting now, up to the batch bounds.
func (l *Log) collect(first *Pending) []*Pending {
	pend := []*Pending{first}
	size := encodedSize(first.env)
	for len(pend) < BatchEventsMax && size < BatchBytesMax {
		select {
		case p := <-l.queue:
			pend = append(pend, p)
			size += encodedSize(p.env)
		default:
			return pend
		}
	}
	return pend
}

// dupOf is an append answered by an earlier event with the same client ID.
type dupOf struct {
	p *Pending
	a Appended
}

func (l *Log) commit(pend []*Pending, buf []byte) []byte {
	if err := l.health(); err != nil && !l.resync() {
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
		if isClientID(e.MsgID) {
			if a, ok := l.ids.lookup(e.MsgID, e.ReceivedAt); ok {
				a.Duplicate = true
				dups = append(dups, dupOf{p, a})
				continue
			}
		}
		e.Seq = b.firstSeq + uint64(len(b.events))
		b.events = append(b.events, e)
		stored = append(stored, p)
		if isClientID(e.MsgID) {
			l.ids.add(e.MsgID, Appended{EventID: e.ID, Seq: e.Seq}, e.ReceivedAt)
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
			for _, p := range pend {
				p.fail(err)
			}
			l.lg.Error("group commit failed", "first_seq", b.firstSeq, "events", len(b.events), "err", err)
			l.unhealthy.Store(fmt.Errorf("events: the write-ahead stream failed: %w", err))
			l.resync()
			return buf
		}
		b.walSeq = walSeq
		l.walLast = walSeq
		l.nextSeq += uint64(len(b.events))
	}
	// The batch is on disk: every append in it is durable now. The event
	// stream gets the events next, at the sequences just promised.
	for i, e := range b.events {
		stored[i].resolve(Appended{EventID: e.ID, Seq: e.Seq})
	}
	for _, d := range dups {
		d.p.resolve(d.a)
	}
	if len(b.events) > 0 {
		l.toPublish <- b
	}
	return buf
}

// writeBatch publishes one batch to the write-ahead stream and waits until
// it is stored. The expected-last-sequence check makes a lost
// acknowledgement safe: the next write fails instead of forking the history.
func (l *Log) writeBatch(b *batch, data []byte) (uint64, error) {
	msg := &nats.Msg{Subject: l.cfg.walSubject(), Data: data, Header: nats.Header{
		HdrFirstSeq: []string{strconv.FormatUint(b.firstSeq, 10)},
		HdrCount:    []string{strconv.Itoa(len(b.events))},
	}}
	ctx, cancel := context.WithTimeout(context.Background(), AckTimeout)
	defer cancel()
	ack, err := l.walJS.PublishMsg(ctx, msg, jetstream.WithExpectLastSequence(l.walLast), jetstream.WithExpectStream(l.cfg.walStream()))
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

// resync learns the write-ahead stream's true end after a failed commit
// (the batch may have been stored even though its acknowledgement was lost)
// and takes up any batch it finds there. It returns whether the log is
// healthy again.
func (l *Log) resync() bool {
	ctx, cancel := context.WithTimeout(context.Background(), AckTimeout)
	defer cancel()
	info, err := l.wal.Info(ctx)
	if err != nil {
		return false
	}
	for seq := l.walLast + 1; seq <= info.State.LastSeq; seq++ {
		m, err := l.wal.GetMsg(ctx, seq)
		if err != nil {
			return false
		}
		b, err := decodeBatch(m.Data)
		if err != nil || b.firstSeq != l.nextSeq {
			l.unhealthy.Store(fmt.Errorf("events: write-ahead batch %d does not follow sequence %d: %v", seq, l.nextSeq-1, err))
			return false
		}
		b.walSeq = seq
		for _, e := range b.events {
			if isClientID(e.MsgID) {
				l.ids.add(e.MsgID, Appended{EventID: e.ID, Seq: e.Seq}, e.ReceivedAt)
			}
		}
		l.walLast = seq
		l.nextSeq = b.firstSeq + uint64(len(b.events))
		l.toPublish <- b
	}
	l.unhealthy.Store(error(nil))
	return true
}

// inflightPub tracks a publish to the event stream.
type inflightPub struct {
	seq uint64
	fut jetstream.PubAckFuture
	env *Envelope
}

// publishLoop copies committed batches to the event stream, one message
// per event, each published with the sequence it must land at as a
// precondition. Publishes of consecutive batches overlap; the number in
// flight stays under the client's bound.
func (l *Log) publishLoop() {
	defer l.wg.Done()
	var fifo []inflightPub
	var scratch []byte
	for b := range l.toPublish {
		for len(fifo) > BatchEventsMax {
			fifo = l.reap(fifo, 1)
		}
		for _, e := range b.events {
			if e.Seq <= l.Published() {
				continue // put back by a repair already
			}
			var m *nats.Msg
			m, scratch = appendMsg(scratch, e, b.walSeq)
			fut, err := l.js.PublishMsgAsync(m, jetstream.WithExpectLastSequence(e.Seq-1))
			if err != nil {
				l.lg.Warn("publishing to the event stream failed; repairing from the write-ahead stream", "seq", e.Seq, "err", err)
				fifo = l.repair(fifo)
				continue
			}
			fifo = append(fifo, inflightPub{seq: e.Seq, fut: fut, env: e})
		}
		if len(l.toPublish) == 0 {
			fifo = l.reap(fifo, len(fifo))
		}
	}
	l.reap(fifo, len(fifo))
}

// reap waits for the first n publishes in flight.
func (l *Log) reap(fifo []inflightPub, n int) []inflightPub {
	for i := 0; i < n && len(fifo) > 0; i++ {
		f := fifo[0]
		select {
		case <-f.fut.Ok():
			l.ring.put(f.env)
			l.setPublished(f.seq)
			fifo = fifo[1:]
		case err := <-f.fut.Err():
			l.lg.Warn("publishing to the event stream failed; repairing from the write-ahead stream", "seq", f.seq, "err", err)
			return l.repair(fifo)
		}
	}
	return fifo
}

// repair waits out the publishes in flight and copies whatever the event
// stream lacks from the write-ahead stream, retrying until that succeeds
// or the log stops. Meanwhile the log refuses appends.
func (l *Log) repair(fifo []inflightPub) []inflightPub {
	for _, f := range fifo {
		select {
		case <-f.fut.Ok():
		case <-f.fut.Err():
		}
	}
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		ctx, cancel := context.WithTimeout(context.Background(), AckTimeout)
		last, err := l.replayWAL(ctx)
		cancel()
		if err == nil {
			l.setPublished(last)
			return nil
		}
		l.lg.Error("repairing the event stream failed; retrying", "err", err, "wait", wait)
		select {
		case <-time.After(wait):
		case <-l.stop:
			return nil
		}
	}
}

var errGap = errors.New("events: gap between the event stream and the write-ahead stream")
