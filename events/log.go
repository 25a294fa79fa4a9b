package events

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aglx/ledger/protocol"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Defaults for the stream. Each is a bound: on disk, in time, or on the
// publishes the node keeps in flight.
const (
	StreamNameDefault = "AGLX"
	// DuplicateWindowDefault is how long JetStream remembers a Nats-Msg-Id.
	// A client that retries a frame with the same ID header within it gets
	// the first event back instead of a second one.
	DuplicateWindowDefault = 2 * time.Minute
	// StreamBytesMaxDefault leaves the log bounded on disk by the server's
	// JetStream store limit (by default 75% of the free disk when the server
	// starts). Either way the stream refuses new events when full (discard
	// new) rather than dropping old history: a ledger never forgets.
	StreamBytesMaxDefault = -1 // bytes; -1 = the server's store limit
	// InFlightMax bounds the appends the node has sent but JetStream has not
	// acknowledged. When it is reached, Append blocks: back-pressure reaches
	// the connections instead of memory growing.
	InFlightMax = 4096 // appends
	// AckTimeout bounds the wait for JetStream to acknowledge one append;
	// after it the append counts as failed (it may still have been stored,
	// which a retry with the same Nats-Msg-Id resolves).
	AckTimeout = 30 * time.Second
	// envelopeOverhead is room for the NATS headers around the largest body.
	envelopeOverhead = 128 << 10 // bytes
)

// Config describes the stream. The zero value plus Defaults() is valid.
type Config struct {
	Stream          string
	DuplicateWindow time.Duration
	BytesMax        int64
	// BodySizeMax is the largest body the node accepts; the stream's message
	// size limit is set above it.
	BodySizeMax int
	Replicas    int
}

// withDefaults fills unset fields.
func (c Config) withDefaults() Config {
	if c.Stream == "" {
		c.Stream = StreamNameDefault
	}
	if c.DuplicateWindow <= 0 {
		c.DuplicateWindow = DuplicateWindowDefault
	}
	if c.BytesMax == 0 {
		c.BytesMax = StreamBytesMaxDefault
	}
	if c.BodySizeMax <= 0 {
		c.BodySizeMax = protocol.BodySizeMaxDefault
	}
	if c.Replicas <= 0 {
		c.Replicas = 1
	}
	return c
}

// StreamConfig is the JetStream configuration the log runs with. Deletes and
// purges are denied: the log is the system of record and is never edited.
func (c Config) StreamConfig() jetstream.StreamConfig {
	c = c.withDefaults()
	return jetstream.StreamConfig{
		Name:        c.Stream,
		Description: "AGLX event log: every received message, append-only",
		Subjects:    []string{SubjectPrefix + ".>"},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardNew,
		MaxBytes:    c.BytesMax,
		MaxMsgSize:  int32(c.BodySizeMax + envelopeOverhead),
		Duplicates:  c.DuplicateWindow,
		Replicas:    c.Replicas,
		DenyDelete:  true,
		DenyPurge:   true,
	}
}

// Log is the append-only event log on one JetStream stream.
type Log struct {
	nc       *nats.Conn
	js       jetstream.JetStream
	stream   jetstream.Stream
	cfg      Config
	inflight chan struct{}
}

// Open creates the stream if it does not exist, or brings its configuration
// up to date, and returns the log.
func Open(ctx context.Context, nc *nats.Conn, cfg Config) (*Log, error) {
	cfg = cfg.withDefaults()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(InFlightMax+1), jetstream.WithPublishAsyncTimeout(AckTimeout))
	if err != nil {
		return nil, fmt.Errorf("events: jetstream: %w", err)
	}
	st, err := js.CreateOrUpdateStream(ctx, cfg.StreamConfig())
	if err != nil {
		return nil, fmt.Errorf("events: create stream %s: %w", cfg.Stream, err)
	}
	return &Log{nc: nc, js: js, stream: st, cfg: cfg, inflight: make(chan struct{}, InFlightMax)}, nil
}

// Attach opens an existing log without changing its stream, for readers
// such as `aglx tail` that must not reconfigure the node's stream.
func Attach(ctx context.Context, nc *nats.Conn, stream string) (*Log, error) {
	if stream == "" {
		stream = StreamNameDefault
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("events: jetstream: %w", err)
	}
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("events: stream %s: %w", stream, err)
	}
	cfg := Config{Stream: stream}.withDefaults()
	return &Log{nc: nc, js: js, stream: st, cfg: cfg, inflight: make(chan struct{}, InFlightMax)}, nil
}

// Stream is the name of the log's stream.
func (l *Log) Stream() string { return l.cfg.Stream }

// JetStream exposes the client for readers such as the projection runner.
func (l *Log) JetStream() jetstream.JetStream { return l.js }

// Appended is where an append landed.
type Appended struct {
	EventID string
	Seq     uint64
	// Duplicate is set when JetStream already held an event with the same
	// Nats-Msg-Id; EventID and Seq are then those of the first one.
	Duplicate bool
}

// Pending is an append in flight. Its result is known once Done is closed.
type Pending struct {
	log  *Log
	env  *Envelope
	fut  jetstream.PubAckFuture
	err  error
	ack  *jetstream.PubAck // set by Poll once the acknowledgement is in
	done bool              // the result is in ack or err
}

// Append sends env to the stream without waiting for the acknowledgement.
// It blocks while InFlightMax appends are outstanding. env.ID and env.MsgID
// must be set; env must not change until the Pending is resolved.
func (l *Log) Append(ctx context.Context, env *Envelope) *Pending {
	p := &Pending{log: l, env: env}
	select {
	case l.inflight <- struct{}{}:
	case <-ctx.Done():
		p.err = ctx.Err()
		return p
	}
	p.fut, p.err = l.js.PublishMsgAsync(toMsg(env))
	if p.err != nil {
		<-l.inflight
		p.done = true
	}
	return p
}

// Poll reports, without blocking, whether the result is in. A writer uses it
// to flush the replies it holds before it waits.
func (p *Pending) Poll() bool {
	if p.done {
		return true
	}
	select {
	case ack := <-p.fut.Ok():
		p.settle(ack, nil)
	case err := <-p.fut.Err():
		p.settle(nil, err)
	default:
	}
	return p.done
}

func (p *Pending) settle(ack *jetstream.PubAck, err error) {
	p.ack, p.err, p.done = ack, err, true
	<-p.log.inflight
}

// Wait blocks until JetStream acknowledges the append (with sync always, once
// it is on disk) or refuses it, or ctx ends.
// Wait must be called once for every Pending: it releases the in-flight slot.
func (p *Pending) Wait(ctx context.Context) (Appended, error) {
	if !p.done {
		select {
		case ack := <-p.fut.Ok():
			p.settle(ack, nil)
		case err := <-p.fut.Err():
			p.settle(nil, err)
		case <-ctx.Done():
			// The slot stays taken until JetStream answers: the publish is
			// still in flight. A goroutine waits for that so it is released.
			go func() {
				select {
				case <-p.fut.Ok():
				case <-p.fut.Err():
				}
				<-p.log.inflight
			}()
			p.done, p.err = true, ctx.Err()
		}
	}
	if p.err != nil {
		return Appended{}, p.wrap(p.err)
	}
	a := Appended{EventID: p.env.ID, Seq: p.ack.Sequence, Duplicate: p.ack.Duplicate}
	if p.ack.Duplicate {
		first, err := p.log.Get(ctx, p.ack.Sequence)
		if err != nil {
			return Appended{}, p.wrap(err)
		}
		a.EventID = first.ID
	}
	return a, nil
}

// wrap turns a JetStream failure into a refusal with the status a client can
// act on: 413 for an event above the size limit, 503 for anything else, as
// the event may not be stored and a retry with the same ID is safe.
func (p *Pending) wrap(err error) error {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum {
		return &protocol.Error{Status: protocol.StatusTooLarge, Reason: "the event is larger than the log accepts"}
	}
	return &protocol.Error{Status: protocol.StatusUnavailable, Reason: fmt.Sprintf("the event log did not store the message (%v); retrying with the same ID header is safe", err)}
}

// LastSeq is the sequence of the newest event, 0 for an empty log.
func (l *Log) LastSeq(ctx context.Context) (uint64, error) {
	info, err := l.stream.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("events: stream info: %w", err)
	}
	return info.State.LastSeq, nil
}

// Get reads the event stored at seq.
func (l *Log) Get(ctx context.Context, seq uint64) (*Envelope, error) {
	m, err := l.stream.GetMsg(ctx, seq)
	if err != nil {
		return nil, fmt.Errorf("events: get seq %d: %w", seq, err)
	}
	return FromMsg(m.Header, m.Data, m.Sequence)
}
