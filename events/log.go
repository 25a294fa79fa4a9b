package events

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/aglx/ledger/protocol"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Defaults and bounds of the log. Each is a bound: on disk, in time, or on
// the appends the node holds in memory.
const (
	StreamNameDefault = "AGLX"
	// DuplicateWindowDefault is how long a client's ID header is remembered:
	// a resend of the same FROM and ID within it gets the first event back.
	DuplicateWindowDefault = 2 * time.Minute
	// DedupEntriesMax bounds the IDs remembered for the window. Beyond it the
	// oldest are forgotten early, which only shortens the window under a
	// flood of IDs; it never makes the node store an event twice by itself.
	DedupEntriesMax = 1 << 20 // IDs
	// StreamBytesMaxDefault leaves the event stream bounded on disk by the
	// server's JetStream store limit (by default 75% of the free disk when
	// the server starts). Either way the stream refuses new events when full
	// (discard new) rather than dropping old history: a ledger never forgets.
	StreamBytesMaxDefault = -1 // bytes; -1 = the server's store limit
	// WALBytesMaxDefault bounds the write-ahead stream. It must hold every
	// batch whose events the event stream may not have flushed yet: with
	// EventSyncInterval at 100 ms, 1 GiB is minutes of full-speed ingest.
	WALBytesMaxDefault = 1 << 30 // bytes
	// InFlightMax bounds the appends waiting for a commit. When it is
	// reached, Append blocks: back-pressure reaches the connections instead
	// of memory growing.
	InFlightMax = 8192 // appends
	// AckTimeout bounds the wait for JetStream to acknowledge a publish.
	AckTimeout = 30 * time.Second
	// envelopeOverhead is room for the NATS headers around the largest body.
	envelopeOverhead = 128 << 10 // bytes
)

// Config describes the log's streams. The zero value is valid.
type Config struct {
	Stream          string
	DuplicateWindow time.Duration
	BytesMax        int64
	WALBytesMax     int64
	// BodySizeMax is the largest body the node accepts; the streams' message
	// size limits are set above it.
	BodySizeMax int
	Replicas    int
	// CommitConn, if set, is a second connection to the same server that
	// carries only the write-ahead commits. The server reads each
	// connection in order on one goroutine, so on the shared connection a
	// commit waits behind every event-stream publish sent before it; on
	// its own it is stored while those are still being read. Nil uses the
	// log's connection for both.
	CommitConn *nats.Conn
	// AckTimeout bounds each wait for JetStream to answer the log: a
	// commit, a publish, a look at the write-ahead stream. Zero means
	// AckTimeout. A wait also ends when its connection drops (dropWatch).
	AckTimeout time.Duration
	// ExclusiveWriter says that nobody but the log can publish on the
	// event stream's subjects, as on the embedded server (its readers are
	// in another account). The publisher then asks JetStream to
	// acknowledge only the last event of each run. Unset (an operator's
	// own NATS), every event's publish is acknowledged: a stranger's
	// message stored just before a run took the first event's place, and
	// the run's later events, whose preconditions it satisfied, were
	// stored after it, so the last event's ack hid the loss.
	ExclusiveWriter bool
	// Owner names who writes the log: for the node, its name and key id.
	// It is kept in the event stream's metadata (MetaOwner), and Open
	// refuses a log another owner wrote. A node's own messages (mints,
	// registry entries) are made under its name and key and checked
	// against them on replay: a node started again under another --name
	// on the same store replayed every mint as refused and showed empty
	// balances. A log without one takes this one; "" checks nothing.
	Owner string
	// TakeOver makes Owner the log's owner even when another wrote it:
	// for an operator who lost the node key, or renames the node,
	// knowing that the earlier owner's own messages are void on replay.
	TakeOver bool
	// StoreDown, if set, says why the store under the streams can take
	// nothing more, in a way the NATS protocol does not tell: the
	// embedded server's stream write error (Server.JetStreamDown), after
	// which its streams answer no publish at all. While it says so,
	// appends are refused at once (503) and Healthy reports it, instead
	// of every batch waiting out AckTimeout, twice for a frame queued
	// behind another.
	StoreDown func() error
}

// jsErrInsufficientResources is JetStream's error code for a store that
// cannot grant a stream's reservation (nats-server's
// JSStorageResourcesExceededErr); the client names no constant for it.
const jsErrInsufficientResources jetstream.ErrorCode = 10047

// jsErrStoreLimit is JetStream's error code for a write refused because
// the store holds what the server lets it (nats-server's
// JSInsufficientResourcesErr, "insufficient resources"; Server.StoreUsage).
const jsErrStoreLimit jetstream.ErrorCode = 10023

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
	if c.WALBytesMax <= 0 {
		c.WALBytesMax = WALBytesMaxDefault
	}
	if c.BodySizeMax <= 0 {
		c.BodySizeMax = protocol.BodySizeMaxDefault
	}
	if c.Replicas <= 0 {
		c.Replicas = 1
	}
	if c.AckTimeout <= 0 {
		c.AckTimeout = AckTimeout
	}
	return c
}

// walStream and walSubject name the write-ahead stream of an event stream.
func (c Config) walStream() string  { return c.Stream + "_WAL" }
func (c Config) walSubject() string { return "aglx.wal." + c.Stream }

// StreamConfig is the event stream: one message per event, on the subjects
// consumers filter by. Deletes and purges are denied: it is the system of
// record. It is written only from committed batches of the write-ahead
// stream, so it can use JetStream's asynchronous persistence (flushed every
// EventSyncInterval): anything it loses in a crash is in the write-ahead
// stream and is put back at start (see recover.go).
func (c Config) StreamConfig() jetstream.StreamConfig {
	c = c.withDefaults()
	sc := jetstream.StreamConfig{
		Name:        c.Stream,
		Description: "AGLX event log: every received message, append-only",
		Subjects:    []string{SubjectPrefix + ".>"},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardNew,
		MaxBytes:    c.BytesMax,
		MaxMsgSize:  int32(c.eventSizeMax()),
		Duplicates:  c.DuplicateWindow,
		Replicas:    c.Replicas,
		DenyDelete:  true,
		DenyPurge:   true,
	}
	if c.Replicas == 1 {
		sc.PersistMode = jetstream.AsyncPersistMode
	}
	return sc
}

// walMsgSlack is room in a write-ahead message for its NATS headers (the
// batch's first sequence and count, and the expected stream and last
// sequence).
const walMsgSlack = 1 << 10 // bytes

// walMessageMax is the largest write-ahead batch the connections can
// carry: the server's max_payload, less room for the headers. It refuses
// a server whose max_payload is below the largest event, which could then
// never be stored.
func walMessageMax(nc *nats.Conn, cfg Config) (int, error) {
	mp := nc.MaxPayload()
	if cfg.CommitConn != nil {
		mp = min(mp, cfg.CommitConn.MaxPayload())
	}
	if need := int64(cfg.eventSizeMax()) + walMsgSlack; mp < need {
		return 0, fmt.Errorf("events: the NATS server takes messages of at most %d bytes (max_payload); the node needs %d (the body limit, %d, plus %d for headers): raise max_payload or lower --body-max",
			mp, need, cfg.BodySizeMax, need-int64(cfg.BodySizeMax))
	}
	return int(mp - walMsgSlack), nil
}

// eventSizeMax is the event stream's message size limit: the largest body
// with room for its envelope. Append refuses an event that would not fit
// (size.go).
func (c Config) eventSizeMax() int { return c.BodySizeMax + envelopeOverhead }

// WALConfig is the write-ahead stream: one message per group commit, synced
// to disk before any event in it is acknowledged. It keeps its newest
// WALBytesMax bytes; it is bounded by size, never by age, so a node that
// was down for a day still finds the batches it needs at start.
func (c Config) WALConfig() jetstream.StreamConfig {
	c = c.withDefaults()
	return jetstream.StreamConfig{
		Name:        c.walStream(),
		Description: "AGLX write-ahead batches: the durable copy of the newest events",
		Subjects:    []string{c.walSubject()},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		MaxBytes:    c.WALBytesMax,
		MaxMsgSize:  int32(max(BatchBytesMax, c.BodySizeMax) + envelopeOverhead),
		Replicas:    c.Replicas,
		DenyDelete:  true,
		// A purge would drop batches the event stream may still lack.
		DenyPurge: true,
	}
}

// Log is the append-only event log. Appends are group-committed: the events
// waiting when a commit ends are written together as one batch to the
// write-ahead stream, which costs one fsync; once that is on disk they are
// acknowledged and then published one by one to the event stream, each at
// the sequence it was promised.
type Log struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	walJS  jetstream.JetStream // the write-ahead commits' (Config.CommitConn)
	stream jetstream.Stream
	// info is the event stream asked through the commits' connection,
	// for ProbeLastSeq: the health check's question waited on the shared
	// one behind the events a replay was reading, and /healthz failed with
	// a timeout while a node caught up after a start (helper-74).
	info jetstream.Stream
	// meta is the event stream's metadata as last read or written (Meta).
	metaMu sync.Mutex
	meta   map[string]string
	// takeOver is the owner a take-over replaces until RecordTakeOver.
	takeOver string
	wal      jetstream.Stream // nil for a read-only (attached) log
	cfg      Config
	lg       *slog.Logger

	queue     chan *Pending // appends waiting for the committer
	toPublish chan *batch   // committed batches waiting for the publisher
	ids       *idIndex      // client IDs seen in the duplicate window

	// Owned by the committer goroutine once it runs.
	nextSeq uint64 // the sequence the next event gets
	// durable is nextSeq-1 as readers may see it: the last sequence an
	// acknowledgement may have named (Durable).
	durable atomic.Uint64
	// carry is an append taken from the queue that did not fit the batch
	// before: it starts the next one.
	carry   *Pending
	walLast uint64 // the write-ahead stream's last sequence
	// commitFails bounds the log lines of commits that keep failing the
	// same way (commit); the committer's alone.
	commitFails repeatedFailure

	pubMu     sync.Mutex
	published uint64        // last sequence confirmed in the event stream
	pubCh     chan struct{} // closed and replaced when published grows
	// unhealthy is why the log refuses appends, nil while it takes them.
	unhealthy errSlot
	// lastCommitErr is why JetStream refused the last group commit, nil
	// once a batch is stored. Healthy reports it even after resync has
	// found the stream readable again: a full disk refuses every batch,
	// yet answers the stream info that resync asks for, and /healthz
	// flickered to "ok" between two refused batches.
	lastCommitErr errSlot
	// pubErr is why the event stream refuses events, nil while it takes
	// them. While it is set the log takes no new appends: the write-ahead
	// stream may hold only so much that the event stream lacks (it drops
	// its oldest batches when full), so acknowledging more would risk
	// losing acknowledged events (setPublisherFailing).
	pubErr errSlot
	ring   recent // the newest published events
	stats  commitStats
	// drops and walDrops end the requests in flight on the log's
	// connection and on the commit connection when it drops.
	drops, walDrops *dropWatch
	// walMsgMax is the largest write-ahead message the server takes, and
	// batchBytesMax the batch bound collect keeps to (walMessageMax).
	walMsgMax, batchBytesMax int

	stopOnce sync.Once
	stop     chan struct{}
	// committerGone is closed when the committer has returned: an append
	// queued after that would wait for ever, so it is failed instead
	// (failStranded).
	committerGone chan struct{}
	wg            sync.WaitGroup
}

// Open creates the streams if they do not exist or brings their
// configuration up to date, repairs the event stream from the write-ahead
// stream (see recover.go), and starts the committer. Close stops it.
func Open(ctx context.Context, nc *nats.Conn, cfg Config, lg *slog.Logger) (*Log, error) {
	cfg = cfg.withDefaults()
	if lg == nil {
		lg = slog.Default()
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(publishPendingMax), jetstream.WithPublishAsyncTimeout(cfg.AckTimeout))
	if err != nil {
		return nil, fmt.Errorf("events: jetstream: %w", err)
	}
	meta, was, err := checkExisting(ctx, js, cfg)
	if err != nil {
		return nil, err
	}
	sc := cfg.StreamConfig()
	sc.Metadata = meta
	st, err := js.CreateOrUpdateStream(ctx, sc)
	if err != nil {
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && apiErr.ErrorCode == jsErrInsufficientResources {
			// Seen on a disk with 1.1 GiB free: the server counts the
			// write-ahead stream's reservation against the free space
			// when it loads the streams, and the refusal named only this
			// stream (helper-61).
			return nil, fmt.Errorf("events: open stream %s: %w (a start needs about %d MiB free besides what the streams hold; docs/HOST.md, \"The disk\"): %w",
				cfg.Stream, ErrTooLittleDisk, freeForReservation(cfg.WALBytesMax)>>20, err)
		}
		return nil, fmt.Errorf("events: create stream %s: %w", cfg.Stream, err)
	}
	wc := cfg.WALConfig()
	if wm := walMeta(meta); len(wm) > 0 {
		wc.Metadata = wm
	}
	wal, err := js.CreateOrUpdateStream(ctx, wc)
	if err != nil {
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && apiErr.ErrorCode == jsErrInsufficientResources {
			return nil, fmt.Errorf("events: create stream %s: %w: it reserves %d MiB of the JetStream store, and JetStream grants a reservation only within three quarters of the free disk (a start needs about %d MiB free besides what the streams hold): %w",
				cfg.walStream(), ErrTooLittleDisk, cfg.WALBytesMax>>20, freeForReservation(cfg.WALBytesMax)>>20, err)
		}
		return nil, fmt.Errorf("events: create stream %s: %w", cfg.walStream(), err)
	}
	walMsgMax, err := walMessageMax(nc, cfg)
	if err != nil {
		return nil, err
	}
	walJS := js
	if cfg.CommitConn != nil {
		if walJS, err = jetstream.New(cfg.CommitConn); err != nil {
			return nil, fmt.Errorf("events: jetstream: %w", err)
		}
	}
	info := st
	if cfg.CommitConn != nil {
		if info, err = walJS.Stream(ctx, st.CachedInfo().Config.Name); err != nil {
			return nil, fmt.Errorf("events: stream info: %w", err)
		}
	}
	l := &Log{
		nc: nc, js: js, walJS: walJS, stream: st, info: info, wal: wal, cfg: cfg, lg: lg,
		meta:      maps.Clone(st.CachedInfo().Config.Metadata),
		takeOver:  was,
		walMsgMax: walMsgMax, batchBytesMax: min(BatchBytesMax, walMsgMax),
		queue:     make(chan *Pending, InFlightMax),
		toPublish: make(chan *batch, InFlightMax/BatchEventsMax+1),
		ids:       newIDIndex(dedupRetention(cfg.DuplicateWindow), DedupEntriesMax),
		stop:      make(chan struct{}),
		pubCh:     make(chan struct{}),

		committerGone: make(chan struct{}),
	}
	if err := l.recover(ctx); err != nil {
		return nil, err
	}
	l.drops = watchDrops(nc)
	l.walDrops = l.drops
	if cfg.CommitConn != nil {
		l.walDrops = watchDrops(cfg.CommitConn)
	}
	l.wg.Add(2)
	go l.commitLoop()
	go l.publishLoop()
	return l, nil
}

// checkReplicas refuses to open an existing log with a replica count that
// its streams cannot be updated to in place. A single-copy event stream
// uses asynchronous persistence, a replicated one cannot, and JetStream
// never changes a stream's persistence mode; the update would fail with
// the server's terse "can not change persist mode". Between 3 and 5 copies
// the update is allowed and left to the server.
func checkReplicas(info *jetstream.StreamInfo, cfg Config) error {
	have := info.Config.Replicas
	if have == cfg.Replicas || (have > 1 && cfg.Replicas > 1) {
		return nil
	}
	return fmt.Errorf("events: stream %s has replicas=%d and cannot be changed to replicas=%d in place (a single copy is persisted asynchronously, a replicated stream cannot be); run with --replicas %d, or copy the streams into new ones (docs/OPERATIONS.md)",
		cfg.Stream, have, cfg.Replicas, have)
}

// Replicas is how many servers keep a copy of each of the log's streams;
// the node's other state in JetStream (the relay's cursor) uses the same.
func (l *Log) Replicas() int { return l.cfg.Replicas }

// Attach opens an existing log read-only, for readers such as `aglx tail`
// that must neither reconfigure nor write the node's streams.
func Attach(ctx context.Context, nc *nats.Conn, stream string) (*Log, error) {
	if stream == "" {
		stream = StreamNameDefault
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("events: jetstream: %w", err)
	}
	st, err := js.Stream(ctx, stream)
	if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("events: stream %s: no such stream here, or not one this connection may read (the embedded server's readers see %s only): %w", stream, StreamNameDefault, err)
	}
	if err != nil {
		return nil, fmt.Errorf("events: stream %s: %w", stream, err)
	}
	return &Log{nc: nc, js: js, stream: st, info: st, cfg: Config{Stream: stream}.withDefaults(),
		meta: maps.Clone(st.CachedInfo().Config.Metadata)}, nil
}

// Close stops taking appends, commits what it holds, publishes what the
// event stream will take, and returns when the committer and publisher
// have stopped or ctx ends. Every acknowledged event is in the write-ahead
// stream; if the event stream refused some or could not be reached, they
// are copied there at the next Open, not here. The caller must stop
// calling Append first.
func (l *Log) Close(ctx context.Context) error {
	if l.wal == nil {
		return nil
	}
	l.stopOnce.Do(func() { close(l.stop) })
	done := make(chan struct{})
	go func() {
		l.wg.Wait()
		l.drops.stop()
		if l.walDrops != l.drops {
			l.walDrops.stop()
		}
		close(done)
	}()
	select {
	case <-done:
		// The committer has stopped, so nextSeq is settled. Whatever was
		// committed and not published is safe in the write-ahead stream
		// and is copied at the next start, but the caller should know.
		if committed, published := l.nextSeq-1, l.Published(); published < committed {
			why := "the next start copies them"
			if err := l.Healthy(); err != nil {
				// A stranger in the event stream, or a store that takes
				// nothing: the next start does not simply copy them, it
				// refuses or fails until that is put right (helper-104).
				why = "the next start copies them once this is put right: " + err.Error()
			}
			return fmt.Errorf("events: close: events %d to %d are durable in the write-ahead stream but not yet in the event stream; %s", published+1, committed, why)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("events: close: the log did not finish its commits and copies in time, so the stop leaves them to the next start (what it acknowledged is durable; what it did not, its senders resend): %w", ctx.Err())
	}
}

// Stream is the name of the event stream.
func (l *Log) Stream() string { return l.cfg.Stream }

// Appended is where an append landed.
type Appended struct {
	EventID string
	Seq     uint64
	// Duplicate is set when the log already held an event with the same
	// client ID; EventID and Seq are then those of the first one.
	Duplicate bool
}

// Pending is an append in flight. Its result is known once Poll is true.
type Pending struct {
	env *Envelope
	// size is encodedSize(env), taken once: Append checks it and the
	// committer closes batches by it.
	size int
	done chan struct{}
	res  Appended
	err  error
	// durableAt is when the commit made it durable (or found it a
	// duplicate), on the monotonic clock; set before done is closed.
	durableAt time.Time
}

// DurableAt is when the append was found durable, once Poll is true: a
// reply that waits for the projections counts its least wait from it.
func (p *Pending) DurableAt() time.Time {
	<-p.done
	return p.durableAt
}

// Append queues env for the next group commit and returns at once, unless
// InFlightMax appends are already waiting, in which case it blocks until
// there is room or ctx ends. env.ID and env.MsgID must be set; env must not
// change afterwards.
func (l *Log) Append(ctx context.Context, env *Envelope) *Pending {
	p := newPending(env)
	if l.wal == nil {
		p.fail(errors.New("events: the log is open read-only"))
		return p
	}
	if l.StoreDown() != nil {
		p.fail(errStoreDownForClients)
		return p
	}
	if err := l.connDown(ConnDownGrace); err != nil {
		p.fail(err)
		return p
	}
	if err := l.unhealthy.get(); err != nil {
		p.fail(err)
		return p
	}
	if err := l.pubErr.get(); err != nil {
		p.fail(err)
		return p
	}
	if err := checkSize(env, l.cfg.eventSizeMax()); err != nil {
		p.fail(err)
		return p
	}
	if !utf8.ValidString(env.Type) || !utf8.ValidString(env.From) || !utf8.ValidString(env.To) {
		// The envelope's JSON would carry U+FFFD where the subject keeps
		// the bytes, and every read would skip the event as one off its
		// subject (Read). The bridge never gives such an envelope.
		p.fail(&protocol.Error{Status: protocol.StatusBadRequest, Reason: "TYPE, FROM and TO must be valid UTF-8"})
		return p
	}
	if p.size > l.walMsgMax {
		p.fail(&protocol.Error{Status: protocol.StatusTooLarge, Reason: fmt.Sprintf(
			"the message would take %d bytes in a write-ahead batch; the NATS server takes at most %d (max_payload)", p.size, l.walMsgMax)})
		return p
	}
	select {
	case <-l.stop:
		// Stopped: refused without a try at the queue, where select
		// would pick at random. Appends that kept coming while the
		// committer drained the queue at close kept it committing, and
		// the close waiting, for as long as they came.
		p.fail(errClosing)
		return p
	default:
	}
	select {
	case l.queue <- p:
		// With the log stopped, select may still pick the queue; if the
		// committer has already gone, nobody would take p, and its
		// writer would wait for ever (helper-86). If it has not, it
		// takes p, or fails it as it leaves.
		select {
		case <-l.committerGone:
			l.failStranded()
		default:
		}
	case <-l.stop:
		p.fail(errClosing)
	case <-ctx.Done():
		p.fail(ctx.Err())
	}
	return p
}

// errClosing fails the appends that came too late for the committer.
var errClosing = errors.New("events: the log is closing")

// failStranded fails every append left in the queue once the committer
// has gone. Each is taken off the queue by one receive, so none is failed
// twice, whoever else drains at the same time.
func (l *Log) failStranded() {
	for {
		select {
		case p := <-l.queue:
			p.fail(errClosing)
		default:
			return
		}
	}
}

// newPending is an append of env, not yet queued.
func newPending(env *Envelope) *Pending {
	return &Pending{env: env, size: encodedSize(env), done: make(chan struct{})}
}

func (p *Pending) resolve(a Appended) { p.res = a; close(p.done) }
func (p *Pending) fail(err error)     { p.err = err; close(p.done) }

// Poll reports, without blocking, whether the result is in. A writer uses it
// to flush the replies it holds before it waits.
func (p *Pending) Poll() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Wait blocks until the append is durable (with sync always: on disk) or
// has failed, or ctx ends. A failure is a *protocol.Error with status 503:
// the event may or may not be stored, and a resend with the same ID is safe.
func (p *Pending) Wait(ctx context.Context) (Appended, error) {
	select {
	case <-p.done:
	case <-ctx.Done():
		return Appended{}, unavailable(ctx.Err())
	}
	if p.err != nil {
		return Appended{}, unavailable(p.err)
	}
	return p.res, nil
}

// unavailable is what an append's sender hears of err: a protocol error
// as it is, a store at JetStream's limit without the server's internals
// (helper-106), anything else as a 503 naming it.
func unavailable(err error) error {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe
	}
	if atStoreLimit(err) {
		return errStoreDownForClients
	}
	return &protocol.Error{Status: protocol.StatusUnavailable, Reason: fmt.Sprintf("the event log did not store the message (%v); resending it with the same ID header is safe", err)}
}

// Durable is the last sequence the log has made durable, and so the
// highest an acknowledgement may have named; the event stream may still
// lack the last few (Published). A read that asks for a position past it
// asks for something no acknowledgement named.
func (l *Log) Durable() uint64 { return l.durable.Load() }

// Published is the last sequence known to be in the event stream.
func (l *Log) Published() uint64 {
	l.pubMu.Lock()
	defer l.pubMu.Unlock()
	return l.published
}

func (l *Log) setPublished(seq uint64) {
	l.pubMu.Lock()
	defer l.pubMu.Unlock()
	if seq > l.published {
		l.published = seq
		close(l.pubCh)
		l.pubCh = make(chan struct{})
	}
}

// WaitPublished blocks until the event at seq is in the event stream, where
// Get, Read and every consumer can see it. An acknowledged append is durable
// at once, and visible there a moment later.
func (l *Log) WaitPublished(ctx context.Context, seq uint64) error {
	for {
		l.pubMu.Lock()
		done, ch := l.published >= seq, l.pubCh
		l.pubMu.Unlock()
		if done {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("events: waiting for seq %d to be published: %w", seq, ctx.Err())
		}
	}
}

// LastSeq is the sequence of the newest event in the event stream, 0 for an
// empty log. Events acknowledged a moment ago may not be there yet; use
// Published to wait for them.
func (l *Log) LastSeq(ctx context.Context) (uint64, error) {
	return lastSeq(ctx, l.stream)
}

// ProbeLastSeq is LastSeq asked through the commits' connection
// (Config.CommitConn), for a health check that must not wait behind the
// events a read is pulling on the shared one. The log's own waits do not
// use it: they end when the shared connection drops (dropWatch), and a
// question lost with the other connection then waited out the whole ack
// timeout (a clean-clone CI run of TestNATSServerRestart, whose ack
// timeout is 10 minutes, hung in the publisher's repair). The caller
// bounds it with its own deadline.
func (l *Log) ProbeLastSeq(ctx context.Context) (uint64, error) {
	return lastSeq(ctx, l.info)
}

func lastSeq(ctx context.Context, st jetstream.Stream) (uint64, error) {
	info, err := st.Info(ctx)
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

// JetStream is the client the log uses, for the node's own consumers (the
// relay).
func (l *Log) JetStream() jetstream.JetStream { return l.js }
