package events

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A message the node did not write can reach the event stream: on an
// operator's NATS anyone allowed to publish to its subjects can put one
// there, and on any server a JetStream API reply sent to a reply subject
// inside them lands there too. Where such a message takes a sequence the
// node promised to an acknowledged event, the repair used to skip that
// event as stored: it was lost without a word. These tests hold the node
// to refusing instead.

// TestForeignMessageInAnAckedEventsPlaceStopsAppends: at run time the
// publish of the displaced event fails, the repair finds the foreign
// message where the event was promised, and the log refuses appends.
func TestForeignMessageInAnAckedEventsPlaceStopsAppends(t *testing.T) {
	l, nc := openTestLog(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	appendAll(t, l, taskEnvelopes(1)...) // seq 1
	if _, err := testJetStream(t, nc).Publish(ctx, SubjectPrefix+".task.assign.x.y", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	e := testEnvelope(7, "task.assign", "agent://a.local", "agent://b.local")
	a, err := l.Append(ctx, e).Wait(ctx)
	if err != nil {
		t.Fatalf("append: %v", err) // acknowledged: it is in the write-ahead stream
	}
	for l.Healthy() == nil {
		if ctx.Err() != nil {
			t.Fatalf("event %s was promised seq %d, a foreign message holds it, and the log still reports healthy", e.ID, a.Seq)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := l.Healthy(); !errors.Is(err, errForeign) {
		t.Fatalf("Healthy() = %v; want the foreign message named", err)
	}
	if _, err := l.Append(ctx, testEnvelope(8, "task.assign", "agent://a.local", "agent://b.local")).Wait(ctx); err == nil {
		t.Fatal("an append was taken after the event stream lost an acknowledged event's place")
	}
}

// TestForeignMessageInAnAckedEventsPlaceStopsStart: the same found at
// start, after a crash left the event only in the write-ahead stream.
func TestForeignMessageInAnAckedEventsPlaceStopsStart(t *testing.T) {
	nc := connectTest(t, t.TempDir())
	ctx := context.Background()
	appendAndClose(t, nc) // seq 1 everywhere
	l, err := Open(ctx, nc, Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	stopWorkers(l)
	writeWALOnly(t, l, 10, 2) // acknowledged as seq 2 and 3, only in the write-ahead stream
	if _, err := testJetStream(t, nc).Publish(ctx, SubjectPrefix+".task.assign.x.y", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if l, err = Open(ctx, nc, Config{}, nil); err == nil {
		l.Close(ctx)
		t.Fatal("Open went on with a foreign message where acknowledged event 2 was promised")
	} else if !errors.Is(err, errForeign) {
		t.Fatalf("Open: %v; want the foreign message named", err)
	}
}

// TestForeignMessagePastTheNodesEventsIsSkipped: a foreign message after
// the node's last event displaced nothing; the node starts, its events go
// on after it, and readers skip it.
func TestForeignMessagePastTheNodesEventsIsSkipped(t *testing.T) {
	nc := connectTest(t, t.TempDir())
	ctx := context.Background()
	appendAndClose(t, nc) // seq 1
	if _, err := testJetStream(t, nc).Publish(ctx, SubjectPrefix+".task.assign.x.y", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	l, err := Open(ctx, nc, Config{}, nil)
	if err != nil {
		t.Fatalf("Open with a foreign message past the node's events: %v", err)
	}
	defer l.Close(ctx)
	if a := appendAll(t, l, testEnvelope(20, "task.assign", "agent://a.local", "agent://b.local")); a[0].Seq != 3 {
		t.Fatalf("the next event took seq %d; want 3, after the foreign message", a[0].Seq)
	}
}
