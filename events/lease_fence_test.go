package events

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// cutKV is a key-value bucket whose writes can be cut off, as for a node
// that reaches the event streams but not the lease bucket's leader (a
// partial partition on a cluster, a long election of the bucket's group).
type cutKV struct {
	jetstream.KeyValue
	cut atomic.Bool
}

func (k *cutKV) Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	if k.cut.Load() {
		return 0, context.DeadlineExceeded
	}
	return k.KeyValue.Update(ctx, key, value, rev)
}

func (k *cutKV) Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
	if k.cut.Load() {
		return 0, context.DeadlineExceeded
	}
	return k.KeyValue.Create(ctx, key, value, opts...)
}

func (k *cutKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	if k.cut.Load() {
		return nil, context.DeadlineExceeded
	}
	return k.KeyValue.Get(ctx, key)
}

// cutOff puts the lease's renewals behind a cutKV.
func cutOff(l *Lease) *cutKV {
	k := &cutKV{KeyValue: l.kv}
	rewire(l, k)
	return k
}

// rewire has the lease renewed through kv from now on.
func rewire(l *Lease, kv jetstream.KeyValue) {
	close(l.stop)
	<-l.done
	l.kv = kv
	l.stop, l.done = make(chan struct{}), make(chan struct{})
	go l.renew()
}

// TestAHolderThatCannotRenewStopsWritingBeforeItsLeaseExpires: a holder
// whose renewals fail must count its lease as gone before the server lets
// it expire, or a successor takes it while the holder still writes.
func TestAHolderThatCannotRenewStopsWritingBeforeItsLeaseExpires(t *testing.T) {
	ctx := context.Background()
	js := leaseJetStream(t)
	a := acquire(t, js, "registry://a.local", "run-a")
	defer a.Release(ctx)
	k := cutOff(a)
	k.cut.Store(true)
	b := acquireOnceFree(t, js, "registry://b.local", "run-b")
	defer b.Release(ctx)
	if err := a.Lost(); err == nil {
		t.Fatal("b holds the lease and a, which has not renewed it for longer than its TTL, still counts it as held: two writers")
	}
	// Back in touch: a finds b's lease, and stays out.
	k.cut.Store(false)
	time.Sleep(leaseTestTTL)
	if err := a.Lost(); err == nil {
		t.Fatal("a counts the lease as held again while b holds it")
	}
}

// TestALeaseTakenAndReleasedMeanwhileIsLost: while a could not renew, b
// took the expired lease, wrote, and stopped cleanly (deleting it). a must
// not take it "again" as if nobody had written in between.
func TestALeaseTakenAndReleasedMeanwhileIsLost(t *testing.T) {
	ctx := context.Background()
	js := leaseJetStream(t)
	a := acquire(t, js, "registry://a.local", "run-a")
	defer a.Release(ctx)
	k := cutOff(a)
	k.cut.Store(true)
	b := acquireOnceFree(t, js, "registry://b.local", "run-b")
	b.Release(ctx) // b wrote meanwhile, then stopped cleanly
	k.cut.Store(false)
	time.Sleep(2 * leaseTestTTL) // renewals' time
	if err := a.Lost(); err == nil {
		t.Fatal("a took the lease again after b had held and released it: a's view of the streams is stale, and it writes on as if nobody had")
	}
	kv, err := js.KeyValue(ctx, LeaseBucket)
	if err != nil {
		t.Fatal(err)
	}
	if e, err := kv.Get(ctx, leaseKey); err == nil {
		var h LeaseHolder
		json.Unmarshal(e.Value(), &h)
		t.Fatalf("the lease is held again, by %+v", h)
	} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatal(err)
	}
}

// TestAnExpiredLeaseNobodyTookIsTakenAgain: renewals that fail for longer
// than the TTL, with nobody else writing the bucket, leave the holder
// unable to write meanwhile, and holding the lease again once they work.
func TestAnExpiredLeaseNobodyTookIsTakenAgain(t *testing.T) {
	ctx := context.Background()
	js := leaseJetStream(t)
	a := acquire(t, js, "registry://a.local", "run-a")
	defer a.Release(ctx)
	kv, err := js.KeyValue(ctx, LeaseBucket)
	if err != nil {
		t.Fatal(err)
	}
	k := cutOff(a)
	k.cut.Store(true)
	for deadline := time.Now().Add(20 * leaseTestTTL); ; time.Sleep(20 * time.Millisecond) {
		if _, err := kv.Get(ctx, leaseKey); errors.Is(err, jetstream.ErrKeyNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the lease never expired")
		}
	}
	if a.Lost() == nil {
		t.Fatal("an expired lease counts as held")
	}
	k.cut.Store(false)
	for deadline := time.Now().Add(10 * leaseTestTTL); a.Lost() != nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the holder did not take its expired lease again: %v", a.Lost())
		}
	}
	e, err := kv.Get(ctx, leaseKey)
	if err != nil {
		t.Fatal(err)
	}
	var h LeaseHolder
	if json.Unmarshal(e.Value(), &h); h.Run != "run-a" {
		t.Fatalf("the lease: %+v", h)
	}
}

// ackLostKV writes, then loses the acknowledgement of, the next update.
type ackLostKV struct {
	jetstream.KeyValue
	lose atomic.Bool
}

func (k *ackLostKV) Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	n, err := k.KeyValue.Update(ctx, key, value, rev)
	if err == nil && k.lose.CompareAndSwap(true, false) {
		return 0, context.DeadlineExceeded
	}
	return n, err
}

// TestALostAcknowledgementKeepsTheLease: a renewal that was stored but
// whose acknowledgement was lost neither fences the holder nor lets the
// lease lapse.
func TestALostAcknowledgementKeepsTheLease(t *testing.T) {
	ctx := context.Background()
	js := leaseJetStream(t)
	a := acquire(t, js, "registry://a.local", "run-a")
	defer a.Release(ctx)
	k := &ackLostKV{KeyValue: a.kv}
	rewire(a, k)
	// Never taken for another's; a moment unconfirmed at most (the test's
	// TTL leaves a renewal 200 ms to spare, which -race may use up).
	for range 3 {
		k.lose.Store(true)
		for end := time.Now().Add(leaseTestTTL); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
			if err := a.taken(); err != nil {
				t.Fatalf("after a lost acknowledgement: %v", err)
			}
		}
	}
	for deadline := time.Now().Add(5 * leaseTestTTL); a.Lost() != nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after lost acknowledgements: %v", a.Lost())
		}
	}
	kv, err := js.KeyValue(ctx, LeaseBucket)
	if err != nil {
		t.Fatal(err)
	}
	if e, err := kv.Get(ctx, leaseKey); err != nil || !strings.Contains(string(e.Value()), "run-a") {
		t.Fatalf("the lease after lost acknowledgements: %v", err)
	}
}
