package bridge

import (
	"testing"
	"time"

	"github.com/aglx/ledger/events"
	"github.com/nats-io/nats-server/v2/server"
)

// TestRetryQueueOrderAndCursor: retries come out by due time (ties by
// sequence), and the relay's cursor never passes a message still waiting
// for another attempt, however late it falls due.
func TestRetryQueueOrderAndCursor(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	q := newRetryQueue()
	st := &relayRun{retries: q, next: 101} // events up to 100 considered
	if got := st.settled(); got != 100 {
		t.Fatalf("settled with nothing waiting = %d, want 100", got)
	}
	for _, it := range []struct {
		seq uint64
		due time.Duration
	}{{90, 30 * time.Second}, {40, 5 * time.Second}, {70, time.Second}, {60, time.Second}} {
		q.push(&retryItem{env: &events.Envelope{Seq: it.seq}, due: t0.Add(it.due)})
	}
	if got := st.settled(); got != 39 {
		t.Fatalf("settled = %d, want 39: the lowest waiting is 40", got)
	}
	var order []uint64
	for q.len() > 0 {
		if got, want := st.settled(), q.minSeq()-1; got != want {
			t.Fatalf("settled = %d, want %d", got, want)
		}
		order = append(order, q.pop().env.Seq)
	}
	if want := []uint64{60, 70, 40, 90}; !equalSeqs(order, want) {
		t.Fatalf("retries came out as %v, want %v (by due time, then sequence)", order, want)
	}
	if got := st.settled(); got != 100 {
		t.Fatalf("settled after the queue emptied = %d, want 100", got)
	}
}

func equalSeqs(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestRelayable: the relay delivers the TYPEs agents address to each
// other, and its stream filter covers exactly those.
func TestRelayable(t *testing.T) {
	for typ, want := range map[string]bool{
		"task.assign": true, "task.result": true, "credit.transfer": true, "ack": true, "error": true,
		"mentor.request": true, "mentor.feedback": true, "registry.exchange": true, "plan.propose": true,
		"registry.update": false, "auth.request": false, "agent.announce": false, "mentor.register": false, "zone.join": false,
	} {
		if got := relayable(typ); got != want {
			t.Errorf("relayable(%q) = %v, want %v", typ, got, want)
		}
		subject := events.Subject(typ, "agent://a.local", "agent://b.local")
		matched := false
		for _, f := range relaySubjects() {
			matched = matched || server.SubjectMatchesFilter(subject, f)
		}
		if matched != want {
			t.Errorf("the relay's stream filter matches %s: %v, want %v", subject, matched, want)
		}
	}
}
