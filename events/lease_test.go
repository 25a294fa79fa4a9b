package events

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// leaseTestTTL is short, so that expiry is seen within a test.
const leaseTestTTL = 1200 * time.Millisecond

func leaseJetStream(t *testing.T) jetstream.JetStream {
	t.Helper()
	s, err := StartServer(ServerConfig{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	nc, err := s.Connect("lease-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return testJetStream(t, nc)
}

func holder(node, run string) LeaseHolder {
	return LeaseHolder{Node: node, Host: "test", PID: 1, Run: run, Since: time.Now()}
}

// acquire takes the lease for node in run, with the tests' TTL, or fails
// the test.
func acquire(t *testing.T, js jetstream.JetStream, node, run string) *Lease {
	t.Helper()
	l, err := AcquireLease(context.Background(), js, 1, leaseTestTTL, holder(node, run), nil)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// acquireOnceFree takes the lease for node in run as soon as it is free
// (its holder gone, its lease expired), or fails the test after many TTLs.
func acquireOnceFree(t *testing.T, js jetstream.JetStream, node, run string) *Lease {
	t.Helper()
	for deadline := time.Now().Add(20 * leaseTestTTL); ; time.Sleep(20 * time.Millisecond) {
		l, err := AcquireLease(context.Background(), js, 1, leaseTestTTL, holder(node, run), nil)
		if err == nil {
			return l
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lease never came free: %v", err)
		}
	}
}

// TestTheLeaseKeepsASecondWriterOut: while a node holds the writer's
// lease, renewing it, another cannot take it, however long it waits, and
// is told who holds it; once released, it takes it at once.
func TestTheLeaseKeepsASecondWriterOut(t *testing.T) {
	ctx := context.Background()
	js := leaseJetStream(t)
	a := acquire(t, js, "registry://a.local", "run-a")
	for range 4 { // well past the TTL: the renewals keep it
		_, err := AcquireLease(ctx, js, 1, leaseTestTTL, holder("registry://b.local", "run-b"), nil)
		var held *LeaseHeldError
		if !errors.As(err, &held) || !errors.Is(err, ErrLeaseHeld) || held.Holder.Node != "registry://a.local" || !strings.Contains(err.Error(), "registry://a.local") {
			t.Fatalf("a second writer while the first holds the lease: %v; want it refused, naming the holder", err)
		}
		time.Sleep(leaseTestTTL / 2)
	}
	if err := a.Lost(); err != nil {
		t.Fatalf("the holder lost its lease while renewing it: %v", err)
	}
	a.Release(ctx)
	b, err := AcquireLease(ctx, js, 1, leaseTestTTL, holder("registry://b.local", "run-b"), nil)
	if err != nil {
		t.Fatalf("after the release: %v", err)
	}
	b.Release(ctx)
}

// TestADeadHoldersLeaseExpires: a holder that stops renewing without
// releasing (a crash) keeps a successor out only until its lease expires.
func TestADeadHoldersLeaseExpires(t *testing.T) {
	ctx := context.Background()
	js := leaseJetStream(t)
	a := acquire(t, js, "registry://a.local", "run-a")
	close(a.stop) // dies: no more renewals, no release
	<-a.done
	if _, err := AcquireLease(ctx, js, 1, leaseTestTTL, holder("registry://b.local", "run-b"), nil); !errors.Is(err, ErrLeaseHeld) {
		t.Fatalf("right after the holder died: %v; want the lease still held", err)
	}
	acquireOnceFree(t, js, "registry://b.local", "run-b").Release(ctx)
}

// TestATakenLeaseFencesItsHolder: a holder whose lease another node now
// holds learns it at its next renewal, says so in Lost (which refuses its
// appends: Config.StoreDown), and does not take the lease back.
func TestATakenLeaseFencesItsHolder(t *testing.T) {
	ctx := context.Background()
	js := leaseJetStream(t)
	a := acquire(t, js, "registry://a.local", "run-a")
	kv, err := js.KeyValue(ctx, LeaseBucket)
	if err != nil {
		t.Fatal(err)
	}
	// An expiry nobody else wrote after: TestAnExpiredLeaseNobodyTookIsTakenAgain.
	// (A purge, as this test made before, is a write by someone else.)
	// Taken by another node.
	other, _ := json.Marshal(holder("registry://b.local", "run-b"))
	if _, err := kv.Put(ctx, leaseKey, other); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * leaseTestTTL); a.Lost() == nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the holder never noticed its lease was taken")
		}
	}
	if err := a.Lost(); !strings.Contains(err.Error(), "registry://b.local") {
		t.Fatalf("Lost: %v; want it to name the node that took the lease", err)
	}
	select {
	case <-a.LostC(): // what the node sends besides its log stops on it
	default:
		t.Fatal("LostC is open after the lease was lost")
	}
	time.Sleep(leaseTestTTL / 2) // a renewal's time, within the other's TTL
	e, err := kv.Get(ctx, leaseKey)
	if err != nil {
		t.Fatal(err)
	}
	if string(e.Value()) != string(other) {
		t.Fatalf("the fenced holder wrote the lease again: %s", e.Value())
	}
	a.Release(ctx) // fenced: deletes nothing
	if e, err := kv.Get(ctx, leaseKey); err != nil || string(e.Value()) != string(other) {
		t.Fatalf("a fenced holder's release touched the other's lease: %v", err)
	}
}

// TestARefusedNodeLeavesTheHoldersBucketAlone: a node refused the lease
// does not change the bucket's settings (its TTL, its copies) under the
// holder; the holder's own settings are the bucket's.
func TestARefusedNodeLeavesTheHoldersBucketAlone(t *testing.T) {
	ctx := context.Background()
	js := leaseJetStream(t)
	a := acquire(t, js, "registry://a.local", "run-a")
	defer a.Release(ctx)
	if _, err := AcquireLease(ctx, js, 1, 50*time.Millisecond, holder("registry://b.local", "run-b"), nil); !errors.Is(err, ErrLeaseHeld) {
		t.Fatalf("a second node: %v; want it refused", err)
	}
	kv, err := js.KeyValue(ctx, LeaseBucket)
	if err != nil {
		t.Fatal(err)
	}
	st, err := kv.Status(ctx)
	if err != nil || st.TTL() != leaseTestTTL {
		t.Fatalf("the bucket's TTL after a refused node asked for 50ms: %v %v; want the holder's %v", st.TTL(), err, leaseTestTTL)
	}
	time.Sleep(3 * leaseTestTTL / 2)
	if err := a.Lost(); err != nil {
		t.Fatalf("the holder lost its lease after a refused node asked: %v", err)
	}
}
