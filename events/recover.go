package events

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aglx/ledger/protocol"
	"github.com/nats-io/nats.go/jetstream"
)

// recover brings the event stream level with the write-ahead stream before
// the log takes appends. The event stream is flushed asynchronously, so a
// crash can cost it its newest events; every one of them was acknowledged
// only after its batch was synced to the write-ahead stream, and is copied
// back from there, at the sequence it was promised. Then the committer
// continues after the last event, and the duplicate window is rebuilt.
func (l *Log) recover(ctx context.Context) error {
	if err := l.checkWhole(ctx); err != nil {
		return err
	}
	last, _, err := l.replayWAL(ctx)
	if err != nil {
		return err
	}
	info, err := l.wal.Info(ctx)
	if err != nil {
		return fmt.Errorf("events: recover: %w", err)
	}
	l.setPublished(last)
	l.walLast = info.State.LastSeq
	l.nextSeq = last + 1
	l.durable.Store(last)
	if last == 0 {
		return nil
	}
	// The window is the node's wall clock; this is the edge, not a fold.
	// Read back as far as the index keeps IDs, which also covers a NATS
	// server whose clock is somewhat behind the node's.
	since := time.Now().Add(-dedupRetention(l.cfg.DuplicateWindow))
	return l.Read(ctx, ReadOptions{StartTime: since}, func(e *Envelope) error {
		if isClientID(e.MsgID) {
			l.ids.add(e.MsgID, Appended{EventID: e.ID, Seq: e.Seq}, e.ReceivedAt, contentDigest(e))
		}
		return nil
	})
}

// ErrDamaged is a start's refusal of an event stream with a hole in it.
var ErrDamaged = errors.New("events: the event stream is damaged")

// ErrWALDamaged is a start's refusal when a write-ahead batch it needs
// cannot be read. Until 2026-12-02 the start failed with the server's
// bare "message not found" and no remedy, also when nothing was missing
// (a clean stop, then the write-ahead stream's last block cut short:
// helper-104).
var ErrWALDamaged = errors.New("events: the write-ahead stream is damaged")

// ErrTooLittleDisk is Open's error when JetStream finds too little free
// space for the streams' reservations; the node adds how much is free.
var ErrTooLittleDisk = errors.New("JetStream finds too little free disk for the streams' reservations")

// errBatchUnreadable marks a write-ahead batch that is gone from inside
// the stream's range or does not decode; errBatchTrimmed one the stream
// dropped as its oldest.
var (
	errBatchUnreadable = errors.New("unreadable")
	errBatchTrimmed    = errors.New("trimmed")
)

// readBatch reads write-ahead batch seq. A batch the stream no longer
// holds inside its range (the server drops what a damaged block lost)
// or that does not decode is errBatchUnreadable; any other error is the
// stream's.
func (l *Log) readBatch(ctx context.Context, seq uint64) (*batch, error) {
	m, err := l.wal.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		// Gone as the oldest (the stream is kept by size, and a repair
		// while the node runs races its trimming) is no damage: the
		// gap check after says what that cost (helper-105).
		if info, ierr := l.wal.Info(ctx); ierr == nil && seq < info.State.FirstSeq {
			return nil, fmt.Errorf("%w: batch %d was dropped as the oldest", errBatchTrimmed, seq)
		}
		return nil, fmt.Errorf("%w: %v", errBatchUnreadable, err)
	}
	if err != nil {
		return nil, fmt.Errorf("events: recover: write-ahead batch %d: %w", seq, err)
	}
	b, err := decodeBatch(m.Data)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errBatchUnreadable, err)
	}
	return b, nil
}

// A long repair says where it is.
const (
	// repairProgressBatches is the number of write-ahead batches from
	// which a repair says that it starts.
	repairProgressBatches = 64 // batches
	// repairProgressInterval is how often a repair says how far it got.
	repairProgressInterval = 5 * time.Second
)

// checkWhole refuses an event stream that lacks events before its last.
// The stream denies deletes and purges and discards nothing, so its
// events run from sequence 1 without a gap, unless its storage was
// damaged (a block file overwritten or lost). The repair at start only
// looks at the stream's end: a hole in the middle was served as if the
// events in it had never been, acknowledged ones among them, and the
// folds and the audit agreed with each other on the wrong balances. A
// hole cannot be filled in place; the stream must be rebuilt.
func (l *Log) checkWhole(ctx context.Context) error {
	info, err := l.stream.Info(ctx)
	if err != nil {
		return fmt.Errorf("events: recover: %w", err)
	}
	st := info.State
	if st.LastSeq == 0 || (st.FirstSeq == 1 && st.NumDeleted == 0) {
		return nil
	}
	missing := st.LastSeq - st.Msgs
	return fmt.Errorf("%w: stream %s holds %d events up to seq %d, so %d are missing (its first is seq %d); its storage was damaged, and a hole cannot be filled in place. "+
		"Stop the node, move the stream's directory (streams/%s in the JetStream store) aside, and start again: the node rebuilds the stream from %s if that still holds every batch, and refuses to start if it does not; then restore the store from a backup (docs/RELIABILITY.md)",
		ErrDamaged, l.cfg.Stream, st.Msgs, st.LastSeq, missing, st.FirstSeq, l.cfg.Stream, l.cfg.walStream())
}

// replayWAL copies to the event stream every event of the write-ahead
// stream that it lacks, in order, and returns the event stream's last
// sequence afterwards, and the last sequence that holds an event of the
// node's (less than the first where messages the node did not write end
// the stream). A missing stretch that the write-ahead stream no longer
// holds is an error: the node must not go on as if it were not.
func (l *Log) replayWAL(ctx context.Context) (last, own uint64, err error) {
	last, err = l.LastSeq(ctx)
	if err != nil {
		return 0, 0, err
	}
	from, nodeLast, lastID, err := l.lastOwnEvent(ctx, last)
	if err != nil {
		return 0, 0, err
	}
	named := from // the batch the event stream's last own event came from
	info, err := l.wal.Info(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("events: recover: %w", err)
	}
	first, end := info.State.FirstSeq, info.State.LastSeq
	if from >= first && from <= end {
		if !l.batchHolds(ctx, from, nodeLast) {
			// The batch the event stream names is not the one that holds
			// its last event: the write-ahead stream was re-created and
			// its numbering started again. Read it from its start.
			from = end + 1
		} else if !l.cfg.ExclusiveWriter {
			// Nobody else can take an event's place where the log is the
			// only writer; elsewhere the check costs a read of the last
			// 8,192 events and their batches at every start and repair.
			if err := l.checkOwnEvents(ctx, nodeLast-min(nodeLast, unconfirmedMax), nodeLast, first, from); err != nil {
				return 0, 0, err
			}
		}
	}
	switch {
	case end == 0:
		if last > 0 {
			l.lg.Warn("the write-ahead stream is empty; the event stream is taken as complete", "last_seq", last)
		}
		return last, nodeLast, nil
	case from > end:
		// The event stream names write-ahead batches the stream never
		// reached (or not the ones it holds): it was re-created, and its
		// batches may hold events the event stream lacks. They are read
		// from the start; the sequence check below refuses a gap.
		from = first
	case first > end && from < end:
		// Emptied (purged) while batches after the event stream's last one
		// were in it: those batches held events that are now nowhere.
		return 0, 0, fmt.Errorf("%w: the event stream ends at %d in write-ahead batch %d, and batches %d to %d, which followed it, are gone (the write-ahead stream was emptied)", errGap, last, from, from+1, end)
	case first > end:
		l.lg.Warn("the write-ahead stream is empty; whether the event stream holds all of its last batch cannot be checked", "last_seq", last, "wal_batch", from)
		return last, nodeLast, nil
	}
	from = max(from, first)
	copied, streamLast := 0, last
	var unreadable []uint64 // batches skipped for damage
	if end-from >= repairProgressBatches {
		// A rebuild from a full write-ahead stream is minutes of silence
		// otherwise (helper-61).
		l.lg.Info("checking the event stream against the write-ahead stream", "from_batch", from, "to_batch", end, "event_stream_last_seq", last)
	}
	progressAt := time.Now()
	for seq := from; seq <= end; seq++ {
		if time.Since(progressAt) >= repairProgressInterval {
			l.lg.Info("repairing the event stream from the write-ahead stream", "batch", seq, "of", end, "copied", copied, "last_seq", last)
			progressAt = time.Now()
		}
		b, err := l.readBatch(ctx, seq)
		if errors.Is(err, errBatchTrimmed) {
			continue
		}
		if errors.Is(err, errBatchUnreadable) {
			switch {
			case seq < end:
				// The next batch that reads tells whether events were in
				// this one that the event stream lacks: its first must
				// follow the event stream's last (the gap check below).
				l.lg.Warn("a write-ahead batch cannot be read (its storage was damaged); going on, the next batch shows whether it held events the event stream lacks", "batch", seq, "event_stream_last_seq", last, "err", err)
				unreadable = append(unreadable, seq)
				continue
			case seq == named && nodeLast > 0:
				return 0, 0, fmt.Errorf("%w: write-ahead batch %d, its last, cannot be read (%v), and it holds the event stream's last event, seq %d: whether it held acknowledged events after that cannot be known. "+
					"If the node stopped cleanly (its last log line was msg=stopped), nothing is missing: move the write-ahead stream aside and start again, and the node makes a new one. If it did not, events after seq %d that the node acknowledged may be lost: restore the store from a backup, or move the write-ahead stream aside to go on without them (docs/RELIABILITY.md)",
					ErrWALDamaged, seq, err, nodeLast, nodeLast)
			default:
				return 0, 0, fmt.Errorf("%w: write-ahead batch %d, its last, cannot be read (%v), and the event stream ends at seq %d, before it: the acknowledged events of that batch are lost. "+
					"Restore the store from a backup, or move the write-ahead stream aside to go on without them (docs/RELIABILITY.md)",
					ErrWALDamaged, seq, err, last)
			}
		}
		if err != nil {
			return 0, 0, err
		}
		var futs []jetstream.PubAckFuture
		for _, e := range b.events {
			// A message the node did not write, where one of its events
			// was promised, would have that acknowledged event lost
			// without a word if the copy went on after it (until
			// 2026-11-30 it did). Nothing here can put that right: the node
			// refuses to go on, and says why.
			if e.Seq > nodeLast && e.Seq <= last {
				return 0, 0, fmt.Errorf("%w at seq %d, which the node promised to event %s (it is in write-ahead batch %d); refusing to go on rather than lose it (docs/OPERATIONS.md, \"Who may write to NATS\")", errForeign, e.Seq, e.ID, seq)
			}
			if e.Seq == nodeLast && e.ID != lastID {
				return 0, 0, fmt.Errorf("%w at seq %d: it holds event %s where the write-ahead stream has %s; refusing to go on rather than lose an acknowledged event", errForeign, e.Seq, lastID, e.ID)
			}
			if e.Seq <= last {
				continue
			}
			if e.Seq != last+1 {
				if len(unreadable) > 0 {
					return 0, 0, fmt.Errorf("%w: the event stream ends at %d, and the write-ahead stream resumes at %d (batch %d) after batches it cannot read (%v, damaged): the events in between are lost. "+
						"Restore the store from a backup, or move the write-ahead stream aside to go on without them (docs/RELIABILITY.md)", ErrWALDamaged, last, e.Seq, seq, unreadable)
				}
				return 0, 0, fmt.Errorf("%w: the event stream ends at %d, the write-ahead stream resumes at %d (batch %d); events in between are in neither. If the event stream was moved aside (a new, empty one has taken its place), put it back; otherwise restore the store from a backup (docs/RELIABILITY.md)", errGap, last, e.Seq, seq)
			}
			fut, err := l.js.PublishMsgAsync(toMsg(e, seq), jetstream.WithExpectLastSequence(last))
			if err != nil {
				return 0, 0, fmt.Errorf("events: recover: publish seq %d: %w", e.Seq, err)
			}
			futs = append(futs, fut)
			last = e.Seq
		}
		for _, fut := range futs {
			select {
			case <-fut.Ok():
			case err := <-fut.Err():
				if apiErr := (*jetstream.APIError)(nil); errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum {
					return 0, 0, fmt.Errorf("events: recover: an acknowledged event in write-ahead batch %d is larger than the event stream now takes (was --body-max lowered?); start once with the limit it was taken under, then lower it: %w", seq, err)
				}
				return 0, 0, fmt.Errorf("events: recover: publish: %w", err)
			case <-ctx.Done():
				return 0, 0, ctx.Err()
			}
		}
		copied += len(futs)
	}
	if copied > 0 {
		l.lg.Warn("event stream repaired from the write-ahead stream", "events", copied, "last_seq", last)
	}
	if nodeLast < streamLast {
		l.lg.Warn("the event stream ends with messages the node did not write; no acknowledged event was in their place, and the node's events go on after them (readers skip them: they lack the Aglx-Event-Id header)", "from_seq", nodeLast+1, "to_seq", streamLast)
	}
	if copied > 0 {
		return last, last, nil // the node's, copied after any strangers
	}
	return last, nodeLast, nil
}

// unconfirmedMax is the most events whose place in the event stream the
// publisher may not have seen confirmed when it stops: a run being issued
// and BatchEventsMax more in flight.
const unconfirmedMax = 2 * BatchEventsMax

// checkOwnEvents checks that the event stream holds, at every sequence from
// lo up to (not including) nodeLast, the event the write-ahead stream
// promised there, reading the batches from the one that holds lo to
// walBatch, the one that holds nodeLast. A stranger's message can take an
// event's place in the middle of a run whose later events are stored after
// it (a publish whose precondition the stranger satisfied); the checks at
// and above nodeLast do not see that, and the event would be lost without
// a word. Sequences below the write-ahead stream's first batch cannot be
// checked, and are not.
func (l *Log) checkOwnEvents(ctx context.Context, lo, nodeLast, walFirst, walBatch uint64) error {
	if lo >= nodeLast {
		return nil
	}
	want := make(map[uint64]string, min(nodeLast-lo, unconfirmedMax))
	err := l.readBatches(ctx, l.batchOf(ctx, lo, walFirst, walBatch), walBatch, func(b *batch) {
		for _, e := range b.events {
			if e.Seq >= lo && e.Seq < nodeLast {
				want[e.Seq] = e.ID
			}
		}
	})
	if err != nil {
		return err
	}
	if len(want) == 0 {
		return nil
	}
	err = l.Read(ctx, ReadOptions{StartSeq: lo}, func(e *Envelope) error {
		if e.Seq >= nodeLast {
			return ErrStop
		}
		id, ok := want[e.Seq]
		if !ok {
			return nil
		}
		if e.Foreign != nil || e.ID != id {
			return fmt.Errorf("%w at seq %d, which the node promised to event %s; refusing to go on rather than lose it (docs/OPERATIONS.md, \"Who may write to NATS\")", errForeign, e.Seq, id)
		}
		delete(want, e.Seq)
		return nil
	})
	if err != nil {
		return err
	}
	for seq := lo; seq < nodeLast; seq++ {
		if id, ok := want[seq]; ok {
			return fmt.Errorf("%w: the event stream has no message at seq %d, which the node promised to event %s", errGap, seq, id)
		}
	}
	return nil
}

// readBatchesBufferBytes bounds the write-ahead batches readBatches has
// buffered, in bytes: four of the largest, a batch of one largest event.
const readBatchesBufferBytes = 4 * (protocol.BodySizeMaxLimit + envelopeOverhead + walMsgSlack)

// readBatches calls fn with each write-ahead batch from from to to, read
// through one ordered consumer: a message get per batch, with a batch an
// event under light load, took 8,000 round trips, which on a network
// outlasted a repair's deadline.
func (l *Log) readBatches(ctx context.Context, from, to uint64, fn func(*batch)) error {
	if from > to {
		return nil
	}
	// By bytes: the client's default, 500 messages, is up to 4 GiB of
	// batches.
	_, it, stop, err := l.orderedRead(ctx, l.wal, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from,
	}, jetstream.PullMaxBytes(readBatchesBufferBytes))
	if err != nil {
		return fmt.Errorf("events: recover: read write-ahead batches: %w", err)
	}
	defer stop()
	for {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return fmt.Errorf("events: recover: read write-ahead batches: %w", err)
		}
		meta, err := m.Metadata()
		if err != nil {
			return fmt.Errorf("events: recover: read write-ahead batches: %w", err)
		}
		seq := meta.Sequence.Stream
		if seq > to {
			return nil
		}
		b, err := decodeBatch(m.Data())
		if err != nil {
			return fmt.Errorf("events: recover: write-ahead batch %d: %w", seq, err)
		}
		fn(b)
		if seq == to || meta.NumPending == 0 {
			return nil
		}
	}
}

// batchOf finds the write-ahead batch, from walFirst to walBatch, that
// holds event seq, or the one before the first that holds a later event.
// Batches hold events in the order of their own sequence, so it searches
// by halves; a batch whose headers it cannot read makes it start at
// walFirst (the caller reads every batch from there).
func (l *Log) batchOf(ctx context.Context, seq, walFirst, walBatch uint64) uint64 {
	lo, hi := walFirst, walBatch // the answer is in [lo, hi]
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		first, _, err := l.batchRange(ctx, mid)
		if err != nil {
			return walFirst
		}
		if first <= seq {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// foreignTailMax bounds how far back from the event stream's end
// lastOwnEvent looks for the node's own last event. More messages than
// this that the node did not write, at the end, are an error either way.
const foreignTailMax = 1024 // messages

// lastOwnEvent finds the last event the node wrote in the event stream,
// at or below last, and returns its write-ahead batch, its sequence and
// its id. Messages the node did not write may follow it (someone else can
// write to the stream's subjects); replayWAL checks that none of them
// sits where an acknowledged event was promised.
func (l *Log) lastOwnEvent(ctx context.Context, last uint64) (walSeq, seq uint64, id string, err error) {
	for seq = last; seq > 0; seq-- {
		if last-seq >= foreignTailMax {
			return 0, 0, "", fmt.Errorf("%w: the last %d messages, up to seq %d, are none of the node's", errForeign, foreignTailMax, last)
		}
		m, err := l.stream.GetMsg(ctx, seq)
		if err != nil {
			return 0, 0, "", fmt.Errorf("events: recover: read seq %d: %w", seq, err)
		}
		id = m.Header.Get(HdrEventID)
		if ws, err := walSeqOf(m.Header); err == nil && id != "" {
			return ws, seq, id, nil
		}
	}
	return 0, 0, "", nil
}

// batchHolds reports whether write-ahead batch seq holds event last,
// from its headers alone. A batch that cannot be read counts as holding
// it: the copy that follows reads it again and reports the error.
func (l *Log) batchHolds(ctx context.Context, seq, last uint64) bool {
	if last == 0 {
		return true
	}
	first, count, err := l.batchRange(ctx, seq)
	if err != nil {
		return true
	}
	return first <= last && last < first+count
}

// batchRange reads which events write-ahead batch seq holds, from its
// headers: the first one's sequence and how many.
func (l *Log) batchRange(ctx context.Context, seq uint64) (first, count uint64, err error) {
	m, err := l.wal.GetMsg(ctx, seq)
	if err != nil {
		return 0, 0, err
	}
	if first, err = strconv.ParseUint(m.Header.Get(HdrFirstSeq), 10, 64); err != nil {
		return 0, 0, err
	}
	if count, err = strconv.ParseUint(m.Header.Get(HdrCount), 10, 64); err != nil {
		return 0, 0, err
	}
	return first, count, nil
}
