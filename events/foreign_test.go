package events

import (
	"context"
	"errors"
	"fmt"
	"github.com/aglx/ledger/protocol"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
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

// TestForeignMessageMidRunStopsStart: a stranger's message took the place
// of the first event of a run, and the run's second event, whose
// precondition ("the last sequence is the first event's") it satisfied,
// was stored after it. At the next start the node's last event is where it
// belongs, and the checks at and above it passed: acknowledged event 2 was
// lost without a word. The start now checks the events the publisher may
// not have seen confirmed, and refuses.
func TestForeignMessageMidRunStopsStart(t *testing.T) {
	nc := connectTest(t, t.TempDir())
	ctx := context.Background()
	appendAndClose(t, nc) // seq 1
	l, err := Open(ctx, nc, Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	stopWorkers(l)
	b := &batch{firstSeq: l.nextSeq}
	for j := range 2 {
		e := testEnvelope(10+j, "task.assign", "agent://a.local", "agent://b.local")
		e.Seq = b.firstSeq + uint64(j)
		b.events = append(b.events, e)
	}
	walSeq, err := l.writeBatch(b, encodeBatch(nil, b)) // acknowledged as seq 2 and 3
	if err != nil {
		t.Fatal(err)
	}
	js := testJetStream(t, nc)
	if _, err := js.Publish(ctx, SubjectPrefix+".task.assign.x.y", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if ack, err := js.PublishMsg(ctx, toMsg(b.events[1], walSeq), jetstream.WithExpectLastSequence(2)); err != nil || ack.Sequence != 3 {
		t.Fatalf("event 3: %+v, %v", ack, err)
	}
	if l, err = Open(ctx, nc, Config{}, nil); err == nil {
		l.Close(ctx)
		t.Fatalf("Open went on; acknowledged event %s (seq 2) is lost", b.events[0].ID)
	} else if !errors.Is(err, errForeign) || !strings.Contains(err.Error(), b.events[0].ID) {
		t.Fatalf("Open: %v; want the foreign message at event %s's place named", err, b.events[0].ID)
	}
}

// TestForeignMessageBeforeABurstStopsAppends: the same at run time, where
// others may publish (Config.ExclusiveWriter unset). A stranger's message
// lands while the node is idle, then a burst is appended: the first
// event's place is taken, the events after it are stored, and the log
// must notice rather than stay healthy with an acknowledged event gone.
func TestForeignMessageBeforeABurstStopsAppends(t *testing.T) {
	l, nc := openTestLog(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	appendAll(t, l, testEnvelope(1, "task.assign", "agent://a.local", "agent://b.local")) // seq 1
	if _, err := testJetStream(t, nc).Publish(ctx, SubjectPrefix+".task.assign.x.y", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	var pend []*Pending
	for i := range 200 {
		pend = append(pend, l.Append(ctx, testEnvelope(100+i, "task.assign", "agent://a.local", "agent://b.local")))
	}
	for _, p := range pend {
		p.Wait(ctx)
	}
	for l.Healthy() == nil {
		if ctx.Err() != nil {
			t.Fatal("a stranger holds an acknowledged event's place, and the log still reports healthy")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := l.Healthy(); !errors.Is(err, errForeign) {
		t.Fatalf("Healthy() = %v; want the foreign message named", err)
	}
}

// TestStrangerWithAHeadersOnlyMarkIsSkipped: a read fails on an event of
// the node's delivered without its body, but anyone can put JetStream's
// headers-only mark on a message of their own. Such a stranger must stay
// a stranger, skipped, not stop the node's start and every read.
func TestStrangerWithAHeadersOnlyMarkIsSkipped(t *testing.T) {
	nc := connectTest(t, t.TempDir())
	ctx := context.Background()
	appendAndClose(t, nc) // seq 1
	m := &nats.Msg{Subject: SubjectPrefix + ".task.assign.x.y", Header: nats.Header{headersOnlySize: {"2"}}}
	if _, err := testJetStream(t, nc).PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	l, err := Open(ctx, nc, Config{}, nil)
	if err != nil {
		t.Fatalf("Open with a stranger marked headers-only at the end: %v", err)
	}
	defer l.Close(ctx)
	var seen []string
	if err := l.Read(ctx, ReadOptions{}, func(e *Envelope) error {
		seen = append(seen, fmt.Sprintf("%d foreign=%v", e.Seq, e.Foreign != nil))
		return nil
	}); err != nil || len(seen) != 2 || seen[1] != "2 foreign=true" {
		t.Fatalf("Read: %v, saw %v; want seq 1 and the stranger at 2, skipped", err, seen)
	}
}

// TestEventOffItsSubjectIsSkipped: an event of the node's form published
// by another writer on a subject other than its own was read as an event
// by a reader of everything and missed by one that filters by subject,
// so the two saw different logs: the node's start checked its key against
// its own rotations (one subject) and its folds against all of them
// (helper-117). Every read now skips it, as a stranger's.
func TestEventOffItsSubjectIsSkipped(t *testing.T) {
	nc := connectTest(t, t.TempDir())
	ctx := context.Background()
	appendAndClose(t, nc) // seq 1
	m := toMsg(testEnvelope(2, "key.rotate", "registry://localhost", "registry://localhost"), 0)
	m.Subject = Subject("credit.transfer", "registry://localhost", "agent://a.local")
	if _, err := testJetStream(t, nc).PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	l, err := Open(ctx, nc, Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx)
	var seen []string
	if err := l.Read(ctx, ReadOptions{}, func(e *Envelope) error {
		seen = append(seen, fmt.Sprintf("%d foreign=%v", e.Seq, errors.Is(e.Foreign, errMisplaced)))
		return nil
	}); err != nil || len(seen) != 2 || seen[1] != "2 foreign=true" {
		t.Fatalf("Read: %v, saw %v; want seq 1 and the misplaced event at 2, skipped", err, seen)
	}
}

// TestAppendRefusesNamesThatAreNotUTF8: an envelope whose TYPE, FROM or
// TO is not valid UTF-8 would be stored on a subject its JSON header no
// longer gives back, and every read would skip it (helper-118): refused
// before it is stored.
func TestAppendRefusesNamesThatAreNotUTF8(t *testing.T) {
	nc := connectTest(t, t.TempDir())
	ctx := context.Background()
	l, err := Open(ctx, nc, Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx)
	for i, env := range []*Envelope{
		testEnvelope(1, "task.assign\xff", "agent://a.local", "agent://b.local"),
		testEnvelope(2, "task.assign", "agent://a\xff.local", "agent://b.local"),
		testEnvelope(3, "task.assign", "agent://a.local", "agent://b\xc3.local"),
	} {
		_, err := l.Append(ctx, env).Wait(ctx)
		var pe *protocol.Error
		if !errors.As(err, &pe) || pe.Status != protocol.StatusBadRequest {
			t.Errorf("envelope %d: %v; want 400", i, err)
		}
	}
	if last, err := l.LastSeq(ctx); err != nil || last != 0 {
		t.Fatalf("the log holds %d events (%v); want none", last, err)
	}
}
