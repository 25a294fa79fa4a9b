package events

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestFailedCommitIsRefusedAndTheLogGoesOn makes the write-ahead stream
// refuse batches for a while. The appends meanwhile fail (their callers
// get an error, never an ack), take no sequence, and reach neither stream;
// once the stream takes batches again, appends go on at the next
// sequence, with no gap in the event stream. Healthy (what /healthz
// reports) names the failure from the first refused batch until a batch is
// stored again, even while the stream still answers the log's questions.
func TestFailedCommitIsRefusedAndTheLogGoesOn(t *testing.T) {
	l, nc := openTestLog(t, t.TempDir())
	ctx := context.Background()
	js := testJetStream(t, nc)
	envs := taskEnvelopes(11)
	appendAll(t, l, envs[:5]...)

	walCfg := l.cfg.WALConfig()
	refusing := walCfg
	refusing.MaxMsgSize = 16 // bytes: smaller than any batch
	if _, err := js.UpdateStream(ctx, refusing); err != nil {
		t.Fatal(err)
	}
	for i, e := range envs[5:8] {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		a, err := l.Append(wctx, e).Wait(wctx)
		cancel()
		if err == nil {
			t.Fatalf("append %d while the write-ahead stream refuses batches: acknowledged as %+v", 5+i, a)
		}
		if l.Healthy() == nil {
			t.Fatalf("append %d was refused, yet the log says it is healthy", 5+i)
		}
	}
	if _, err := js.UpdateStream(ctx, walCfg); err != nil {
		t.Fatal(err)
	}

	// The first append after may still be refused while the stream's
	// update settles (the log asks the stream where it ends before it
	// takes appends again); a refused append takes no sequence, so the
	// caller resends it, as a client would.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		a, err := l.Append(wctx, envs[8]).Wait(wctx)
		cancel()
		if err == nil {
			if a.Seq != 6 {
				t.Fatalf("the first append after the refusals got seq %d, want 6", a.Seq)
			}
			if err := l.Healthy(); err != nil {
				t.Fatalf("a batch was stored, yet the log reports: %v", err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("appends are still refused after the write-ahead stream took batches again: %v", err)
		}
	}
	got := appendAll(t, l, envs[9:]...)
	for i, a := range got {
		if a.Seq != uint64(7+i) {
			t.Fatalf("append %d after the refusals got seq %d, want %d", 9+i, a.Seq, 7+i)
		}
	}
	if last, err := l.LastSeq(ctx); err != nil || last != 8 {
		t.Fatalf("the event stream ends at %d (%v), want 8", last, err)
	}
	for seq, want := range map[uint64]*Envelope{5: envs[4], 6: envs[8], 8: envs[10]} {
		e, err := l.Get(ctx, seq)
		if err != nil || e.ID != want.ID {
			t.Fatalf("Get(%d) = %v, %v; want event %s", seq, e, err, want.ID)
		}
	}
}

// TestResyncTakesUpABatchWhoseAckWasLost stores a batch in the write-ahead
// stream behind the log's back, as a commit whose acknowledgement was lost
// leaves it: the log still thinks the stream ends before it. The next
// commit fails its expected-last-sequence check and is refused; the log
// then takes the batch up (its events reach the event stream at their
// sequences, and their IDs count as duplicates from then on) and goes on
// after it.
func TestResyncTakesUpABatchWhoseAckWasLost(t *testing.T) {
	l, nc := openTestLog(t, t.TempDir())
	ctx := context.Background()
	js := testJetStream(t, nc)
	envs := taskEnvelopes(10)
	appendAll(t, l, envs[:5]...)

	// The lost batch: events 6 and 7, the log's next sequences.
	walLast := walLastSeq(t, js, l)
	lost := &batch{firstSeq: 6}
	for j, e := range envs[5:7] {
		e.MsgID = fmt.Sprintf("id:agent://a.local:lost-%d", j) // a client's ID header
		c := *e
		c.Seq = 6 + uint64(j)
		lost.events = append(lost.events, &c)
	}
	if _, err := js.PublishMsg(ctx, l.walMsg(lost, encodeBatch(nil, lost)), jetstream.WithExpectLastSequence(walLast)); err != nil {
		t.Fatal(err)
	}

	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if a, err := l.Append(wctx, envs[7]).Wait(wctx); err == nil {
		t.Fatalf("the commit after the lost batch was acknowledged as %+v; it must fail its expected-last-sequence check", a)
	}
	// While the log takes the batch up it refuses appends at once (503);
	// a client resends.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		a, err := l.Append(wctx, envs[8]).Wait(wctx)
		if err == nil {
			if a.Seq != 8 {
				t.Fatalf("the append after the lost batch got seq %d, want 8", a.Seq)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("appends are still refused after the lost batch: %v", err)
		}
	}
	if dup, err := l.Append(wctx, envs[5]).Wait(wctx); err != nil || !dup.Duplicate || dup.Seq != 6 {
		t.Fatalf("resending an event of the lost batch = %+v, %v; want a duplicate of seq 6", dup, err)
	}
	if err := l.WaitPublished(wctx, 8); err != nil {
		t.Fatal(err)
	}
	for seq, want := range map[uint64]*Envelope{6: envs[5], 7: envs[6], 8: envs[8]} {
		e, err := l.Get(ctx, seq)
		if err != nil || e.ID != want.ID {
			t.Fatalf("Get(%d) = %v, %v; want event %s", seq, e, err, want.ID)
		}
	}
}

// testJetStream is a JetStream handle on nc, for a test that changes or
// reads the log's streams behind its back.
func testJetStream(t *testing.T, nc *nats.Conn) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// taskEnvelopes returns n test envelopes of one kind, numbered from 0.
func taskEnvelopes(n int) []*Envelope {
	envs := make([]*Envelope, n)
	for i := range envs {
		envs[i] = testEnvelope(i, "task.assign", "agent://a.local", "agent://b.local")
	}
	return envs
}

// walLastSeq is the write-ahead stream's last sequence, read from the
// server.
func walLastSeq(t *testing.T, js jetstream.JetStream, l *Log) uint64 {
	t.Helper()
	ctx := context.Background()
	wal, err := js.Stream(ctx, l.cfg.walStream())
	if err != nil {
		t.Fatal(err)
	}
	info, err := wal.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.LastSeq
}

// TestResyncCorrectsAWriteAheadEndTooFar: if the log ever takes a
// write-ahead sequence beyond the stream's real end (an acknowledgement
// that was not JetStream's), resync takes the stream's end, once it has
// checked that the stream's last batch is the last the log committed; a
// stream that ends elsewhere leaves the log refusing appends, with why.
func TestResyncCorrectsAWriteAheadEndTooFar(t *testing.T) {
	nc := connectTest(t, t.TempDir())
	l, err := Open(context.Background(), nc, Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	appendAll(t, l, taskEnvelopes(3)...)
	stopWorkers(l) // no committer: the test plays it (and the log stays stopped)
	real := l.walLast

	l.walLast = 987654
	if !l.resync() || l.walLast != real || l.unhealthy.get() != nil {
		t.Fatalf("resync over a forged end: walLast %d (want %d), health %v", l.walLast, real, l.unhealthy.get())
	}

	l.walLast, l.nextSeq = 987654, l.nextSeq+5 // the log claims events the stream lacks
	if l.resync() || l.unhealthy.get() == nil || !strings.Contains(l.unhealthy.get().Error(), "but the log committed events up to") {
		t.Fatalf("resync over an end it cannot explain: health %v, want a refusal", l.unhealthy.get())
	}
}

// TestHealthyAfterALostAck: a batch the committer did not see lands in the
// write-ahead stream (as one whose acknowledgement was lost does). The next
// commit fails on its expected last sequence, resync takes the batch up,
// and the log takes appends again; Healthy (what /healthz reports) must
// then say so without waiting for another batch, or an idle node would
// look broken for good.
func TestHealthyAfterALostAck(t *testing.T) {
	ctx := context.Background()
	l, nc := openTestLog(t, t.TempDir())
	js := testJetStream(t, nc)
	appendAll(t, l, taskEnvelopes(1)...)
	e := testEnvelope(50, "task.assign", "agent://a.local", "agent://b.local")
	e.Seq = 2
	b := &batch{firstSeq: 2, events: []*Envelope{e}}
	if _, err := js.PublishMsg(ctx, l.walMsg(b, encodeBatch(nil, b))); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, testEnvelope(51, "task.assign", "agent://a.local", "agent://b.local")).Wait(ctx); err == nil {
		t.Fatal("an append behind a batch the log did not know of was acknowledged")
	}
	for deadline := time.Now().Add(20 * time.Second); l.unhealthy.get() != nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the log still refuses appends: %v", l.unhealthy.get())
		}
	}
	if err := l.Healthy(); err != nil {
		t.Fatalf("the log takes appends again, yet Healthy reports: %v", err)
	}
}

// TestEveryAppendIsAnsweredWhileTheEventStreamRefuses: while the event
// stream refuses events, every append is answered within moments, ack or
// refusal, including the one the committer carried over to its next batch
// because it did not fit the one before (it is in neither the queue nor a
// batch).
func TestEveryAppendIsAnsweredWhileTheEventStreamRefuses(t *testing.T) {
	ctx := context.Background()
	l, nc := openTestLog(t, t.TempDir())
	appendAll(t, l, taskEnvelopes(1)...)
	cfg := l.cfg.StreamConfig()
	cfg.MaxMsgSize = 2048 // bytes: the event stream refuses every big event
	if _, err := testJetStream(t, nc).UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	envs := taskEnvelopes(61)[1:]
	for _, e := range envs {
		e.Body = []byte(`"` + strings.Repeat("x", 600<<10) + `"`) // about 7 to a batch: one is carried
	}
	pend := make([]*Pending, len(envs))
	for i, e := range envs {
		pend[i] = l.Append(ctx, e)
	}
	deadline := time.After(30 * time.Second)
	for i, p := range pend {
		select {
		case <-p.done:
		case <-deadline:
			t.Fatalf("append %d of %d is still unanswered; Healthy: %v", i, len(pend), l.Healthy())
		}
	}
	if l.Healthy() == nil {
		t.Fatal("the event stream refuses events, yet the log says it is healthy")
	}
	// Acknowledged appends the event stream lacks are safe in the
	// write-ahead stream; closing says so rather than report all is well.
	acked := 0
	for _, p := range pend {
		if p.err == nil {
			acked++
		}
	}
	err := l.Close(ctx)
	if acked > 0 && (err == nil || !strings.Contains(err.Error(), "not yet in the event stream")) {
		t.Fatalf("Close with %d acknowledged events missing from the event stream = %v", acked, err)
	}
}
