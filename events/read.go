package events

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aglx/ledger/protocol"
	"github.com/nats-io/nats.go/jetstream"
)

// ReadOptions chooses where a read starts, what it sees and when it ends.
type ReadOptions struct {
	// StartSeq is the first sequence to read; 0 and 1 both mean the start.
	StartSeq uint64
	// StartTime, when set and StartSeq is 0, starts at the first event
	// stored at or after it.
	StartTime time.Time
	// Subjects filters the events (see Subject for the scheme); empty reads
	// everything.
	Subjects []string
	// Follow keeps reading new events as they arrive until ctx ends. Without
	// it, Read stops at the end of the log as it stood when Read began.
	Follow bool
}

// orderedRead opens an ordered consumer on st and its messages; stop ends
// both. The node's own consumers get a name readers may not touch, unique
// to the read (the client numbers each read's consumers from 1).
func (l *Log) orderedRead(ctx context.Context, st jetstream.Stream, cfg jetstream.OrderedConsumerConfig, opts ...jetstream.PullMessagesOpt) (jetstream.Consumer, jetstream.MessagesContext, func(), error) {
	if l.wal != nil {
		cfg.NamePrefix = NodeConsumerPrefix + strings.ToLower(rand.Text())
	}
	cons, err := st.OrderedConsumer(ctx, cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	it, err := cons.Messages(opts...)
	if err != nil {
		return nil, nil, nil, err
	}
	stop := func() {
		it.Stop()
		// Stopping leaves the consumer on the server until it has been
		// idle for 5 minutes, and the runner and the relay read a stretch
		// at a time when they fall behind: one consumer a stretch piled up.
		if ci := cons.CachedInfo(); ci != nil {
			dctx, cancel := context.WithTimeout(context.Background(), readConsumerDeleteWait)
			st.DeleteConsumer(dctx, ci.Name) // at worst it expires
			cancel()
		}
	}
	return cons, it, stop, nil
}

// readBufferEvents and readBufferBytes bound what a Read pulls ahead of
// what it has handed on: at most readBufferEvents events, asked for in
// requests of at most readBufferBytes. The client's default is 500
// messages whatever their size: after a burst of 1 MiB events a replay
// held some 500 MiB in it, and the replies of every other request on the
// connection (a health check's stream info) waited behind them
// (helper-74). A byte bound alone lifts the count to a million, and a
// reader of small events then held 135 MB (helper-76). Two of the
// largest events a request: the node runs nodeReadsAtOnce reads on its
// one connection, and what the server holds for a connection is bounded
// by ServerPendingBytesMax, past which it closes the connection; with
// four (until 2026-12-02) two reads could ask for 65 MiB, and a node
// whose client fell behind in a burst of large events would have lost
// its only connection to the log.
const (
	readBufferEvents = 500                                                // events
	readBufferBytes  = 2 * (protocol.BodySizeMaxLimit + envelopeOverhead) // bytes
)

// nodeReadsAtOnce is how many Reads the node keeps open on its own
// connection at most: the projections' runner, the relay, and, on an
// operator's NATS, a repair's check of its own events (checkOwnEvents,
// helper-105); the recovery's reads at start run alone, before any.
const nodeReadsAtOnce = 3 // reads

// The node's reads must fit what the server holds for one connection,
// with room left for the publishes' acks and the API's replies (an
// eighth, 8 MiB): a constant that does not convert to uint fails the
// build.
const _ = uint(ServerPendingBytesMax*7/8 - nodeReadsAtOnce*readBufferBytes)

// ErrStop, returned by a Read callback, ends the read without error.
var ErrStop = errors.New("events: stop reading")

// headersOnlySize is the header JetStream puts, with the body's size, on a
// message it delivers without its body.
const headersOnlySize = "Nats-Msg-Size"

// readConsumerDeleteWait bounds the deletion of a finished read's consumer.
const readConsumerDeleteWait = 2 * time.Second

// Read calls fn for each event in order. It reads through an ordered
// consumer: ephemeral, flow-controlled, and restarted by the client on gaps,
// so a slow fn slows the read instead of growing a buffer.
func (l *Log) Read(ctx context.Context, opts ReadOptions, fn func(*Envelope) error) error {
	end, err := l.LastSeq(ctx)
	if err != nil {
		return err
	}
	if !opts.Follow && (end == 0 || opts.StartSeq > end) {
		return nil
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: opts.Subjects}
	switch {
	case opts.StartSeq > 1:
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = opts.StartSeq
	case opts.StartSeq == 0 && !opts.StartTime.IsZero():
		t := opts.StartTime.UTC()
		cfg.DeliverPolicy = jetstream.DeliverByStartTimePolicy
		cfg.OptStartTime = &t
	default:
		cfg.DeliverPolicy = jetstream.DeliverAllPolicy
	}
	cons, it, stop, err := l.orderedRead(ctx, l.stream, cfg, jetstream.PullMaxMessagesWithBytesLimit(readBufferEvents, readBufferBytes))
	if err != nil {
		return fmt.Errorf("events: read: %w", err)
	}
	defer stop()
	if !opts.Follow {
		info, err := cons.Info(ctx)
		if err != nil {
			return fmt.Errorf("events: read: %w", err)
		}
		// Nothing left to read and nothing handed out yet: the read is
		// empty. Delivered.Stream would not do: the server sets it to the
		// sequence before the start, which is 0 only for a read from the
		// beginning, so a read starting later (a time after the last event,
		// a filter nothing after StartSeq matches) waited for an event that
		// might never come. A node idle for longer than the duplicate
		// window hung at its next start rebuilding the index.
		if info.NumPending == 0 && info.Delivered.Consumer == 0 {
			return nil
		}
	}
	for {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("events: read: %w", err)
		}
		meta, err := m.Metadata()
		if err != nil {
			return fmt.Errorf("events: read: %w", err)
		}
		if !opts.Follow && meta.Sequence.Stream > end {
			// Stored after the read began: a read that does not follow
			// ends where the log ended when it started.
			return nil
		}
		if h := m.Headers(); len(m.Data()) == 0 && h.Get(HdrEventID) != "" && h.Get(headersOnlySize) != "" && h.Get(headersOnlySize) != "0" {
			// A consumer changed to deliver headers only: every event
			// would look like a stranger's, and be skipped without a word.
			// (Only an event of the node's, with a body, counts: anyone
			// may put the header on a message of their own, which is a
			// stranger's and skipped.)
			return fmt.Errorf("events: read: seq %d came without its body (%s): the read's consumer delivers headers only, which the node never asks for", meta.Sequence.Stream, headersOnlySize)
		}
		env, err := FromMsg(m.Headers(), m.Data(), meta.Sequence.Stream)
		if err == nil && m.Subject() != Subject(env.Type, env.From, env.To) {
			// The node stores every event on the subject its TYPE, FROM
			// and TO make; one elsewhere was put there by another
			// writer. Skipped, as a stranger's: a reader that filters by
			// subject (the node's own key history, a consumer of one
			// TYPE) and one that reads everything must see the same log.
			err = fmt.Errorf("%w: %s on subject %s, not its own", errMisplaced, env.Type, m.Subject())
		}
		if err != nil {
			// Not one of the node's events. Failing the read stopped the
			// runner at it for good: nothing after it was ever applied,
			// and every answer ended in 202. Readers get its sequence.
			env = &Envelope{Seq: meta.Sequence.Stream, Foreign: err}
		}
		if err := fn(env); err != nil {
			if errors.Is(err, ErrStop) {
				return nil
			}
			return err
		}
		if !opts.Follow && (meta.NumPending == 0 || meta.Sequence.Stream >= end) {
			return nil
		}
	}
}

// Created is when the event stream was made, as its server recorded it.
// A stream deleted and made again, or another node's store behind the
// same address, has another: a reader that resumes by sequence (an
// ordered consumer, after a reconnection) compares it to know that it
// still reads the same log, and not another one from the old one's
// sequence on.
func (l *Log) Created(ctx context.Context) (time.Time, error) {
	info, err := l.stream.Info(ctx)
	if err != nil {
		return time.Time{}, fmt.Errorf("events: stream %s: %w", l.cfg.Stream, err)
	}
	return info.Created, nil
}
