package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The writer's lease. Sequence promises need one writer (docs/DESIGN.md,
// "Single writer"). On the embedded server the data dir's lock gives it;
// on an operator's NATS (--nats-url) two nodes on two machines, a standby
// started by mistake beside the primary, say, would both take appends and
// adopt each other's batches, both relay every message, both push to
// peers. So a node that writes streams it does not host holds a lease in
// a key-value bucket beside them: one key, created only if absent,
// renewed well within the bucket's TTL, deleted at a clean stop. A second
// node finds it held and refuses to start; one that crashed leaves it to
// expire within the TTL.

// LeaseBucket is the key-value bucket that holds the writer's lease.
const LeaseBucket = "AGLX_LEASE"

// leaseKey is the lease's one key.
const leaseKey = "writer"

// LeaseTTLDefault is how long a lease outlives its holder's last renewal:
// how long a successor waits after a crash. Renewals come every third of
// it, so a holder survives two lost renewals (a NATS leader election, a
// long pause) before its lease can expire.
const LeaseTTLDefault = 15 * time.Second

// leaseValidShare is the share of the TTL, counted from when the last
// successful write of the lease was sent, during which its holder counts
// it as held. The server counts the TTL from when it stored the write,
// which is later, so a holder whose renewals fail stops writing before a
// successor can take the lease, whatever part of the cluster it still
// reaches; the rest of the TTL covers the two clocks' rates and writes in
// flight. Until a renewal succeeds again, Lost says so.
const leaseValidShare = 5.0 / 6

// LeaseHolder says who holds the lease, for the node that finds it held.
type LeaseHolder struct {
	Node  string    `json:"node"` // the node's URI
	Host  string    `json:"host"`
	PID   int       `json:"pid"`
	Run   string    `json:"run"` // random, one per start: tells a holder its own lease
	Since time.Time `json:"since"`
}

// ErrLeaseHeld is the error a start gets when another node holds the
// lease (a *LeaseHeldError).
var ErrLeaseHeld = errors.New("events: another node writes these streams")

// LeaseHeldError names the holder of a lease that was wanted.
type LeaseHeldError struct {
	Holder  LeaseHolder
	Renewed time.Time // the holder's last renewal, by the server's clock
	TTL     time.Duration
}

func (e *LeaseHeldError) Error() string {
	return fmt.Sprintf("%v: %s on host %s (pid %d) holds the writer's lease in the %s bucket since %s, renewed at %s; a second writer would hand out the same sequences. Stop it; if it is gone, its lease expires %s after its last renewal",
		ErrLeaseHeld, e.Holder.Node, e.Holder.Host, e.Holder.PID, LeaseBucket, e.Holder.Since.UTC().Format(time.RFC3339), e.Renewed.UTC().Format(time.RFC3339), e.TTL)
}

func (e *LeaseHeldError) Is(target error) bool { return target == ErrLeaseHeld }

// Lease is a held writer's lease. Lost says when it is not held any more.
type Lease struct {
	kv     jetstream.KeyValue
	ttl    time.Duration
	holder LeaseHolder
	value  []byte
	lg     *slog.Logger

	rev   uint64 // of the lease's last write; only the renewal goroutine touches it after Acquire
	lost  atomic.Pointer[error]
	lostC chan struct{} // closed once lost is set
	// base and validUntil (since base, on the monotonic clock) say until
	// when the lease counts as held without another successful write.
	base       time.Time
	validUntil atomic.Int64
	renewedAt  atomic.Int64 // since base: when the last successful write was sent
	stop       chan struct{}
	done       chan struct{}
	release    sync.Once
}

// AcquireLease creates the bucket if needed (with replicas copies) and
// takes the lease for holder, or returns a *LeaseHeldError naming whoever
// has it. The lease is renewed until Release.
func AcquireLease(ctx context.Context, js jetstream.JetStream, replicas int, ttl time.Duration, holder LeaseHolder, lg *slog.Logger) (*Lease, error) {
	if ttl <= 0 {
		ttl = LeaseTTLDefault
	}
	if lg == nil {
		lg = slog.Default()
	}
	cfg := jetstream.KeyValueConfig{
		Bucket:      LeaseBucket,
		Description: "AGLX: the lease of the one node that writes the AGLX streams",
		History:     1,
		TTL:         ttl,
		Replicas:    max(replicas, 1),
	}
	// The bucket is made if missing, but its settings are changed only by
	// the node that then holds the lease (below): a node that is refused
	// must leave the holder's lease as it is (helper-128).
	kv, err := js.KeyValue(ctx, LeaseBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		if kv, err = js.CreateKeyValue(ctx, cfg); errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = js.KeyValue(ctx, LeaseBucket)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("events: the writer's lease bucket %s: %w", LeaseBucket, err)
	}
	value, err := json.Marshal(holder)
	if err != nil {
		return nil, err
	}
	l := &Lease{kv: kv, ttl: ttl, holder: holder, value: value, lg: lg, stop: make(chan struct{}), done: make(chan struct{}), lostC: make(chan struct{}), base: time.Now()}
	sent := time.Now()
	rev, err := kv.Create(ctx, leaseKey, value)
	for wait := 10 * time.Millisecond; (errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders)) && ctx.Err() == nil && wait < 2*time.Second; wait *= 2 {
		// A bucket just made on a cluster may not answer at once.
		time.Sleep(wait)
		sent = time.Now()
		rev, err = kv.Create(ctx, leaseKey, value)
	}
	if errors.Is(err, jetstream.ErrKeyExists) {
		herr := l.heldError(ctx)
		if !errors.Is(herr, jetstream.ErrKeyNotFound) {
			return nil, herr
		}
		// Expired between the two questions: ask once more.
		sent = time.Now()
		if rev, err = kv.Create(ctx, leaseKey, value); errors.Is(err, jetstream.ErrKeyExists) {
			return nil, l.heldError(ctx)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("events: taking the writer's lease in %s: %w", LeaseBucket, err)
	}
	l.rev = rev
	l.written(sent)
	l.settle(ctx, js, cfg)
	go l.renew()
	return l, nil
}

// settle gives the bucket the holder's TTL and copies. The lease's
// validity is reckoned with the holder's TTL, so a bucket that expires
// keys sooner (made by a node with another setting) would let a successor
// in while the holder still writes: where the bucket cannot be changed,
// the shorter TTL is the one reckoned with.
func (l *Lease) settle(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig) {
	st, err := l.kv.Status(ctx)
	if err != nil {
		return
	}
	bs, ok := st.(*jetstream.KeyValueBucketStatus)
	if ok && bs.TTL() == cfg.TTL && bs.StreamInfo() != nil && bs.StreamInfo().Config.Replicas == cfg.Replicas {
		return
	}
	if _, err := js.UpdateKeyValue(ctx, cfg); err != nil {
		l.lg.Warn("the writer's lease bucket keeps its own settings", "bucket", LeaseBucket, "ttl", st.TTL(), "want_ttl", cfg.TTL, "err", err)
		if t := st.TTL(); t > 0 && t < l.ttl {
			l.ttl = t
			l.written(l.base.Add(time.Duration(l.renewedAt.Load()))) // the last write, reckoned with the shorter TTL
		}
	}
}

// written notes a successful write of the lease sent at sent.
func (l *Lease) written(sent time.Time) {
	at := sent.Sub(l.base)
	l.renewedAt.Store(int64(at))
	l.validUntil.Store(int64(at + time.Duration(float64(l.ttl)*leaseValidShare)))
}

// heldError reads who holds the lease.
func (l *Lease) heldError(ctx context.Context) error {
	e, err := l.kv.Get(ctx, leaseKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return err
	}
	if err != nil {
		return fmt.Errorf("%w (its holder could not be read: %v)", ErrLeaseHeld, err)
	}
	var h LeaseHolder
	if err := json.Unmarshal(e.Value(), &h); err != nil {
		return fmt.Errorf("%w (its holder is not recorded as a node records it: %v)", ErrLeaseHeld, err)
	}
	return &LeaseHeldError{Holder: h, Renewed: e.Created(), TTL: l.ttl}
}

// Lost is nil while the lease is held, and says why not once another node
// has taken it: from then on this node must not write (Config.StoreDown).
//
// It also says so, for as long as it lasts, once the renewals have failed
// for so long that the lease may expire on the server (leaseValidShare):
// another node may take it then, and this one must not write meanwhile,
// even if it still reaches the streams.
func (l *Lease) Lost() error {
	if p := l.lost.Load(); p != nil {
		return *p
	}
	if now := time.Since(l.base); int64(now) > l.validUntil.Load() {
		return fmt.Errorf("events: the writer's lease in %s was last renewed %s ago and may expire (its TTL is %s): this node writes nothing until a renewal succeeds",
			LeaseBucket, (now - time.Duration(l.renewedAt.Load())).Round(time.Millisecond), l.ttl)
	}
	return nil
}

// taken is Lost's answer once another node has taken the lease, nil before.
func (l *Lease) taken() error {
	if p := l.lost.Load(); p != nil {
		return *p
	}
	return nil
}

// LostC is closed once the lease is lost for good, to another node (Lost
// says why; a lease merely unconfirmed for a while does not close it): what else the
// node writes or sends besides the log (the relay, pushes to peers) stops
// then, or the new holder's would be doubled.
func (l *Lease) LostC() <-chan struct{} { return l.lostC }

// renew writes the lease every third of its TTL, each write conditional
// on the last one, so that it never takes a lease another node holds.
func (l *Lease) renew() {
	defer close(l.done)
	t := time.NewTicker(l.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		if l.renewOnce() {
			return
		}
	}
}

// renewOnce renews the lease and reports whether it is lost for good.
func (l *Lease) renewOnce() (lost bool) {
	ctx, cancel := context.WithTimeout(context.Background(), l.ttl/3)
	defer cancel()
	sent := time.Now()
	rev, err := l.kv.Update(ctx, leaseKey, l.value, l.rev)
	if err == nil {
		// Conditional on this node's last write: nobody wrote in between.
		l.rev = rev
		l.written(sent)
		return false
	}
	if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) && !errors.Is(err, jetstream.ErrKeyExists) && !errors.Is(err, jetstream.ErrKeyNotFound) && !wrongLastSeq(err) {
		// NATS unreachable or slow: nobody writes meanwhile, this node
		// included (its commits fail too). The next renewal decides.
		l.lg.Warn("the writer's lease could not be renewed; trying again", "bucket", LeaseBucket, "err", err, "ttl", l.ttl)
		return false
	}
	// The lease is not as this node left it: expired (renewals failed for
	// longer than the TTL), or taken.
	e, gerr := l.kv.Get(ctx, leaseKey)
	switch {
	case errors.Is(gerr, jetstream.ErrKeyNotFound):
		// Gone: expired, or deleted. Only if the bucket holds no write
		// after this node's last did nobody take it in between (one that
		// took it, wrote the streams and stopped, deleting it, or crashed,
		// leaving it to expire, leaves a later write behind). A write of
		// this node's whose acknowledgement was lost counts as another's:
		// it cannot be told apart.
		st, serr := l.kv.Status(ctx)
		if serr != nil {
			return false
		}
		bs, ok := st.(*jetstream.KeyValueBucketStatus)
		if !ok || bs.StreamInfo() == nil {
			return false
		}
		if last := bs.StreamInfo().State.LastSeq; last != l.rev {
			lostErr := fmt.Errorf("events: the writer's lease in %s is gone, and was written after this node's last renewal (revision %d, now %d): another node may have held it and written these streams meanwhile; this node writes nothing more and must be stopped",
				LeaseBucket, l.rev, last)
			l.markLost(lostErr)
			return true
		}
		sent := time.Now()
		if rev, cerr := l.kv.Create(ctx, leaseKey, l.value); cerr == nil {
			l.rev = rev
			l.written(sent)
			l.lg.Warn("the writer's lease had expired (renewals failed for longer than its TTL) and nobody had taken it: taken again", "bucket", LeaseBucket, "ttl", l.ttl)
			return false
		}
		return false // raced with another taker: the next renewal finds out
	case gerr != nil:
		return false
	}
	var h LeaseHolder
	if json.Unmarshal(e.Value(), &h) == nil && h.Run == l.holder.Run {
		// Our own write whose acknowledgement was lost: renewed on it
		// at once (when it was sent is not known here).
		l.rev = e.Revision()
		sent := time.Now()
		if rev, err := l.kv.Update(ctx, leaseKey, l.value, l.rev); err == nil {
			l.rev = rev
			l.written(sent)
		}
		return false
	}
	lostErr := fmt.Errorf("events: the writer's lease was taken by %s on host %s (pid %d) at %s: this node writes nothing more and must be stopped (another node may write these streams now)",
		h.Node, h.Host, h.PID, e.Created().UTC().Format(time.RFC3339))
	l.markLost(lostErr)
	return true
}

// markLost records that the lease is lost for good, and why.
func (l *Lease) markLost(err error) {
	l.lost.Store(&err)
	close(l.lostC)
	l.lg.Error("THE WRITER'S LEASE IS LOST: appends are refused from now on; stop this node", "bucket", LeaseBucket, "err", err)
}

// Release stops renewing and, if the lease is still this node's, deletes
// it, so that a successor need not wait for it to expire. Call it once the
// log is closed.
func (l *Lease) Release(ctx context.Context) {
	l.release.Do(func() {
		close(l.stop)
		<-l.done
		if l.taken() != nil {
			return
		}
		if err := l.kv.Delete(ctx, leaseKey, jetstream.LastRevision(l.rev)); err != nil {
			l.lg.Warn("the writer's lease was not released: a successor waits for it to expire", "bucket", LeaseBucket, "ttl", l.ttl, "err", err)
		}
	})
}
