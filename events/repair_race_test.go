package events

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestRepairBeforeABatchReachesTheWALKeepsItsPromise: a repair at run time
// (the publisher's, after a dropped connection or a failed publish) that
// reads the streams while the committer's next batch is still on its way
// to the write-ahead stream finds a stranger past the node's last event
// and no promise there yet. It must not count the stranger's sequence as
// published: the committer has promised (or is about to promise) it to
// the next event, and the publisher skips every event at or below
// Published as put back by a repair. Until review-132 the repair set
// Published to the stranger's sequence, the next event was acknowledged
// at that sequence and then skipped, and the log stayed healthy: the
// acknowledged event was in neither the event stream nor any fold, and
// only the next start refused.
func TestRepairBeforeABatchReachesTheWALKeepsItsPromise(t *testing.T) {
	l, nc := openTestLog(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	appendAll(t, l, taskEnvelopes(1)...) // seq 1
	if _, err := testJetStream(t, nc).Publish(ctx, SubjectPrefix+".task.assign.x.y", []byte(`{}`)); err != nil {
		t.Fatal(err) // the stranger, at seq 2
	}
	// The publisher is idle (everything it had is confirmed): a repair it
	// runs now is one that began before the next batch was committed.
	l.repair(nil)
	e := testEnvelope(7, "task.assign", "agent://a.local", "agent://b.local")
	a, err := l.Append(ctx, e).Wait(ctx)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	if a.Seq != 2 {
		t.Fatalf("the append was promised seq %d; this test expects the stranger's, 2", a.Seq)
	}
	for l.Healthy() == nil {
		if ctx.Err() != nil {
			got, gerr := l.Get(context.Background(), a.Seq)
			t.Fatalf("event %s was acknowledged at seq %d, the stream holds %+v (%v) there, Published is %d, and the log still reports healthy",
				e.ID, a.Seq, got, gerr, l.Published())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := l.Healthy(); !errors.Is(err, errForeign) {
		t.Fatalf("Healthy() = %v; want the foreign message named", err)
	}
}
