package events

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aglx/ledger/protocol"
	"github.com/nats-io/nats.go"
)

// openTestLog starts an embedded server in a temporary directory with the
// production configuration (sync always) and opens the log on it.
func openTestLog(t *testing.T, dir string) (*Log, *nats.Conn) {
	t.Helper()
	nc := connectTestServer(t, ServerConfig{DataDir: dir, Listen: "127.0.0.1:0"})
	l, err := Open(context.Background(), nc, Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(context.Background()) })
	return l, nc
}

func testEnvelope(i int, typ, from, to string) *Envelope {
	id := fmt.Sprintf("01TEST%020d", i)
	return &Envelope{
		ID: id, MsgID: id, Type: typ, From: from, To: to,
		Transport: TransportTCP, Declared: "TCP", Peer: "127.0.0.1:5555",
		ReceivedAt: time.Date(2025, 10, 29, 18, 0, i, 0, time.UTC),
		Headers: []protocol.Header{
			{Name: "FROM", Value: from}, {Name: "to", Value: to}, {Name: "TYPE", Value: typ},
			{Name: "X-Unknown", Value: "kept ü"},
		},
		Body: []byte("{\n    \"amount\": 1.50 }"),
	}
}

func appendAll(t *testing.T, l *Log, envs ...*Envelope) []Appended {
	t.Helper()
	ctx := context.Background()
	pend := make([]*Pending, len(envs))
	for i, e := range envs {
		pend[i] = l.Append(ctx, e)
	}
	out := make([]Appended, len(envs))
	for i, p := range pend {
		a, err := p.Wait(ctx)
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		out[i] = a
	}
	// Acknowledged means durable; visible to readers a moment later.
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, a := range out {
		if err := l.WaitPublished(wctx, a.Seq); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func TestAppendGetRoundTrip(t *testing.T) {
	l, _ := openTestLog(t, t.TempDir())
	e := testEnvelope(1, "credit.transfer", "agent://alpha.local", "agent://beta.local")
	a := appendAll(t, l, e)[0]
	if a.Seq != 1 || a.EventID != e.ID || a.Duplicate {
		t.Fatalf("Append = %+v, want seq 1, id %s", a, e.ID)
	}
	got, err := l.Get(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	e.Seq = 1
	if fmt.Sprint(got) != fmt.Sprint(e) {
		t.Fatalf("Get(1) = %+v\nwant %+v", got, e)
	}
	if !bytes.Equal(got.Body, e.Body) {
		t.Fatalf("body = %q, want %q", got.Body, e.Body)
	}
}

func TestAppendIsIdempotentByMsgID(t *testing.T) {
	l, _ := openTestLog(t, t.TempDir())
	first := testEnvelope(1, "task.assign", "agent://a.local", "agent://b.local")
	again := testEnvelope(2, "task.assign", "agent://a.local", "agent://b.local")
	first.MsgID = "id:agent://a.local:x"
	again.MsgID = first.MsgID
	got := appendAll(t, l, first, again)
	if !got[1].Duplicate || got[1].Seq != got[0].Seq || got[1].EventID != first.ID {
		t.Fatalf("second append = %+v, want duplicate of %+v", got[1], got[0])
	}
	if last, _ := l.LastSeq(context.Background()); last != 1 {
		t.Fatalf("LastSeq = %d, want 1", last)
	}
}

// TestAppendRefusesAnotherMessageUnderAUsedID: FROM is not
// authenticated, so an ID is only a resend's key if the resend says the
// same (TYPE, TO, body); another message under it is refused with 409
// instead of being answered as a duplicate of the first and never stored.
func TestAppendRefusesAnotherMessageUnderAUsedID(t *testing.T) {
	l, _ := openTestLog(t, t.TempDir())
	first := testEnvelope(1, "task.assign", "agent://a.local", "agent://b.local")
	first.MsgID = ClientKey("agent://a.local", "x")
	appendAll(t, l, first)
	tests := []struct {
		name string
		edit func(e *Envelope)
		want protocol.Status // 0: a duplicate of the first
	}{
		{"the same message", func(*Envelope) {}, 0},
		{"another body", func(e *Envelope) { e.Body = []byte(`{"amount": 1000}`) }, protocol.StatusConflict},
		{"another TYPE", func(e *Envelope) { e.Type = "task.cancel" }, protocol.StatusConflict},
		{"another TO", func(e *Envelope) { e.To = "agent://c.local" }, protocol.StatusConflict},
		{"another CREDITS", func(e *Envelope) {
			e.Headers = append(e.Headers, protocol.Header{Name: protocol.HeaderCredits, Value: "5000"})
		}, protocol.StatusConflict},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := testEnvelope(10+i, "task.assign", "agent://a.local", "agent://b.local")
			e.MsgID = first.MsgID
			tc.edit(e)
			appendUnderUsedID(t, l, e, first.ID, tc.want)
		})
	}
	if last, _ := l.LastSeq(context.Background()); last != 1 {
		t.Fatalf("LastSeq = %d, want 1: nothing but the first was stored", last)
	}
}

// TestAppendWeighsEveryHeaderOfAResend: an answer that names another
// request (IN-REPLY-TO) or another outcome (STATUS) under a used ID is
// another message: 409, not a duplicate of the first, whose request would
// then stay open (helper-86). A header spelt in other letters, or the
// headers in another order, still make the same message.
func TestAppendWeighsEveryHeaderOfAResend(t *testing.T) {
	l, _ := openTestLog(t, t.TempDir())
	first := testEnvelope(1, "credit.deny", "agent://a.local", "agent://b.local")
	first.MsgID = ClientKey("agent://a.local", "7")
	first.Headers = append(first.Headers, protocol.Header{Name: protocol.HeaderInReplyTo, Value: "req-1"}, protocol.Header{Name: protocol.HeaderStatus, Value: "200 OK"})
	appendAll(t, l, first)
	tests := []struct {
		name    string
		headers []protocol.Header // after testEnvelope's own
		want    protocol.Status   // 0: a duplicate of the first
	}{
		{"the same", []protocol.Header{{Name: "IN-REPLY-TO", Value: "req-1"}, {Name: "STATUS", Value: "200 OK"}}, 0},
		{"in other letters and order", []protocol.Header{{Name: "status", Value: "200 OK"}, {Name: "In-Reply-To", Value: "req-1"}}, 0},
		{"another IN-REPLY-TO", []protocol.Header{{Name: "IN-REPLY-TO", Value: "req-2"}, {Name: "STATUS", Value: "200 OK"}}, protocol.StatusConflict},
		{"no IN-REPLY-TO", []protocol.Header{{Name: "STATUS", Value: "200 OK"}}, protocol.StatusConflict},
		{"another STATUS", []protocol.Header{{Name: "IN-REPLY-TO", Value: "req-1"}, {Name: "STATUS", Value: "500 boom"}}, protocol.StatusConflict},
		{"one more header", []protocol.Header{{Name: "IN-REPLY-TO", Value: "req-1"}, {Name: "STATUS", Value: "200 OK"}, {Name: "X-Note", Value: "n"}}, protocol.StatusConflict},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := testEnvelope(10+i, "credit.deny", "agent://a.local", "agent://b.local")
			e.MsgID = first.MsgID
			e.Headers = append(e.Headers, tc.headers...)
			appendUnderUsedID(t, l, e, first.ID, tc.want)
		})
	}
}

// appendUnderUsedID appends e, sent under the ID of the event firstID,
// and checks the answer: with want 0, a duplicate of that event; else an
// error with status want.
func appendUnderUsedID(t *testing.T, l *Log, e *Envelope, firstID string, want protocol.Status) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := l.Append(ctx, e).Wait(ctx)
	switch {
	case want == 0 && (err != nil || !a.Duplicate || a.EventID != firstID):
		t.Fatalf("resend = %+v, %v; want a duplicate of %s", a, err, firstID)
	case want != 0 && protocol.StatusOf(err) != want:
		t.Fatalf("another message under the ID = %+v, %v; want %d", a, err, want)
	}
}

func TestReadFilters(t *testing.T) {
	l, _ := openTestLog(t, t.TempDir())
	appendAll(t, l,
		testEnvelope(1, "task.assign", "agent://a.local", "agent://b.local"),
		testEnvelope(2, "credit.transfer", "agent://a.local", "agent://c.local"),
		testEnvelope(3, "credit.transfer", "agent://b.local", "agent://a.local"),
		testEnvelope(4, "agent.announce", "agent://c.local", ""),
		testEnvelope(5, "ack", "registry://localhost", "agent://a.local"),
	)
	a, b := URIToken("agent://a.local"), URIToken("agent://b.local")
	tests := []struct {
		name string
		opts ReadOptions
		want []uint64
	}{
		{"all", ReadOptions{}, []uint64{1, 2, 3, 4, 5}},
		{"from seq", ReadOptions{StartSeq: 4}, []uint64{4, 5}},
		{"past the end", ReadOptions{StartSeq: 9}, nil},
		{"by group", ReadOptions{Subjects: []string{SubjectPrefix + ".credit.>"}}, []uint64{2, 3}},
		{"by type", ReadOptions{Subjects: []string{SubjectPrefix + ".agent.announce.>"}}, []uint64{4}},
		{"generic type", ReadOptions{Subjects: []string{SubjectPrefix + ".ack._.>"}}, []uint64{5}},
		{"by sender", ReadOptions{Subjects: []string{SubjectPrefix + ".*.*." + a + ".*"}}, []uint64{1, 2}},
		{"by recipient", ReadOptions{Subjects: []string{SubjectPrefix + ".*.*.*." + a}}, []uint64{3, 5}},
		{"by sender or recipient", ReadOptions{Subjects: []string{SubjectPrefix + ".*.*." + b + ".*", SubjectPrefix + ".*.*.*." + b}}, []uint64{1, 3}},
		{"no match", ReadOptions{Subjects: []string{SubjectPrefix + ".zone.>"}}, nil},
		// Nothing to read from a start inside the log: the read must end,
		// not wait for an event that may never come.
		{"no match from a seq", ReadOptions{StartSeq: 2, Subjects: []string{SubjectPrefix + ".task.>"}}, nil},
		{"no match from the last seq", ReadOptions{StartSeq: 5, Subjects: []string{SubjectPrefix + ".credit.>"}}, nil},
		{"after the last event", ReadOptions{StartTime: time.Now().Add(time.Hour)}, nil},
		{"after the last event, filtered", ReadOptions{StartTime: time.Now().Add(time.Hour), Subjects: []string{SubjectPrefix + ".credit.>"}}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var got []uint64
			err := l.Read(ctx, tc.opts, func(e *Envelope) error { got = append(got, e.Seq); return nil })
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("Read(%+v) = %v, want %v", tc.opts, got, tc.want)
			}
		})
	}
}

func TestReadByTime(t *testing.T) {
	l, _ := openTestLog(t, t.TempDir())
	appendAll(t, l, testEnvelope(1, "ack", "agent://a.local", "agent://b.local"))
	mid := time.Now()
	appendAll(t, l, testEnvelope(2, "ack", "agent://a.local", "agent://b.local"))
	var got []uint64
	err := l.Read(context.Background(), ReadOptions{StartTime: mid}, func(e *Envelope) error { got = append(got, e.Seq); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[2]" {
		t.Fatalf("Read(since %v) = %v, want [2]", mid, got)
	}
}

func TestLogSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	{
		s, err := StartServer(ServerConfig{DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		nc, err := s.Connect("test")
		if err != nil {
			t.Fatal(err)
		}
		l, err := Open(context.Background(), nc, Config{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		appendAll(t, l, testEnvelope(1, "ack", "agent://a.local", "agent://b.local"))
		l.Close(context.Background())
		nc.Close()
		s.Shutdown()
	}
	l, _ := openTestLog(t, dir)
	if last, err := l.LastSeq(context.Background()); err != nil || last != 1 {
		t.Fatalf("after restart LastSeq = %d, %v; want 1", last, err)
	}
}

// TestOpenRefusesAReplicaChange: a log made with one copy cannot be
// reopened with three in place (JetStream cannot change the event stream's
// persistence mode); Open says so and what to do, instead of passing on
// the server's terse refusal, and leaves the streams as they were.
func TestOpenRefusesAReplicaChange(t *testing.T) {
	nc := connectTest(t, t.TempDir())
	ctx := context.Background()
	appendAndClose(t, nc)
	if _, err := Open(ctx, nc, Config{Replicas: 3}, nil); err == nil || !strings.Contains(err.Error(), "has replicas=1 and cannot be changed to replicas=3 in place") {
		t.Fatalf("Open with 3 replicas over a 1-replica log: %v", err)
	}
	l, err := Open(ctx, nc, Config{Replicas: 1}, nil)
	if err != nil {
		t.Fatalf("reopening as it was: %v", err)
	}
	defer l.Close(ctx)
	if last, _ := l.LastSeq(ctx); last != 1 {
		t.Fatalf("the log ends at %d, want 1", last)
	}
}

// TestRecentHoldsAtMostItsBytes: the ring of recent events is bounded by
// bytes as well as by count. By count alone, 16,384 events of 1 MiB bodies
// with their parsed payloads would have held some 80 GiB.
func TestRecentHoldsAtMostItsBytes(t *testing.T) {
	tests := []struct {
		name      string
		body      int
		events    int
		wantAbove uint64 // every event from this sequence on is held
	}{
		{"small events: the count bounds", 300, 20000, 20000 - RecentMax + 1},
		{"large events: the bytes bound", 1 << 20, 200, 200 - RecentBytesMax/(6<<20) + 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r recent
			body := make([]byte, tt.body)
			for seq := uint64(1); seq <= uint64(tt.events); seq++ {
				r.put(&Envelope{Seq: seq, Body: body})
				if held := r.held(); held > RecentBytesMax {
					t.Fatalf("after seq %d the ring holds %d bytes, more than %d", seq, held, RecentBytesMax)
				}
			}
			for seq := uint64(1); seq <= uint64(tt.events); seq++ {
				_, ok := r.get(seq)
				if seq >= tt.wantAbove && !ok {
					t.Fatalf("seq %d is not held, though it is among the newest", seq)
				}
				if seq < tt.wantAbove-1 && ok && tt.body > 1000 {
					t.Fatalf("seq %d is still held", seq)
				}
			}
		})
	}
}

// TestReadLeavesNoConsumers: every Read made an ordered consumer that
// stayed on the server for 5 minutes after the read ended; a runner or
// relay catching up a stretch at a time piled them up.
func TestReadLeavesNoConsumers(t *testing.T) {
	l, _ := openTestLog(t, t.TempDir())
	ctx := context.Background()
	appendAll(t, l, testEnvelope(1, "task.result", "agent://a.local", "agent://b.local"), testEnvelope(2, "task.result", "agent://a.local", "agent://b.local"))
	if err := l.WaitPublished(ctx, 2); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		if err := l.Read(ctx, ReadOptions{StartSeq: 2}, func(*Envelope) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	info, err := l.stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := info.State.Consumers; n > 0 {
		t.Fatalf("after 20 finished reads the event stream has %d consumers", n)
	}
}

// TestAppendAfterCloseIsAnswered: an append that races the log's close
// gets an answer, never a wait for ever. Append's select picked the queue
// half the time even with the log stopped, and with the committer gone
// nobody took it: the connection's writer waited on it until the process
// ended (helper-86).
func TestAppendAfterCloseIsAnswered(t *testing.T) {
	l, _ := openTestLog(t, t.TempDir())
	ctx := context.Background()
	appendAll(t, l, testEnvelope(1, "ack", "agent://a.local", "agent://b.local"))
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 2; i < 66; i++ {
		p := l.Append(ctx, testEnvelope(i, "ack", "agent://a.local", "agent://b.local"))
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := p.Wait(wctx)
		timedOut := wctx.Err() != nil
		cancel()
		if err == nil || timedOut {
			t.Fatalf("append %d after close: %v, want the log's refusal at once", i, err)
		}
	}
}

// TestAppendsRacingCloseAreAnswered: appends made while the log closes,
// from many goroutines that go on until after it has closed, are each
// answered (stored, or refused as the log closes), and the close ends.
// Append's select picked the queue at random with the log stopped: the
// committer, draining the queue at close, kept committing what kept
// coming and the close never returned (helper-101's request for this
// test found it). An append queued after the committer's last look at the
// queue is failed as it leaves (failStranded).
func TestAppendsRacingCloseAreAnswered(t *testing.T) {
	for round := range 5 {
		l, _ := openTestLog(t, t.TempDir())
		ctx := context.Background()
		var (
			wg       sync.WaitGroup
			mu       sync.Mutex
			pendings []*Pending
		)
		start, closed := make(chan struct{}), make(chan struct{})
		for g := range 16 {
			wg.Go(func() {
				<-start
				// Appends before, during and after the close, until a
				// few after it returned.
				for i, after := 0, 0; after < 20; i++ {
					select {
					case <-closed:
						after++
					default:
					}
					p := l.Append(ctx, testEnvelope(2+g*1_000_000+i, "ack", "agent://a.local", "agent://b.local"))
					mu.Lock()
					pendings = append(pendings, p)
					mu.Unlock()
				}
			})
		}
		close(start)
		if err := l.Close(ctx); err != nil && !strings.Contains(err.Error(), "not yet in the event stream") {
			t.Fatal(err)
		}
		close(closed)
		wg.Wait()
		for _, p := range pendings {
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_, err := p.Wait(wctx)
			timedOut := wctx.Err() != nil
			cancel()
			if timedOut {
				t.Fatalf("round %d: an append racing the close was never answered: %v", round, err)
			}
		}
	}
}
