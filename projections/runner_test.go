package projections

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/ledger/statecodec/statetest"
	"github.com/aglx/ledger/protocol"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func openLog(t *testing.T) *events.Log {
	t.Helper()
	l, _ := openLogConn(t)
	return l
}

// openLogConn starts an embedded server, opens the log on it, and returns
// the connection too, for readers of the same log; all end with the test.
func openLogConn(t *testing.T) (*events.Log, *nats.Conn) {
	t.Helper()
	s, err := events.StartServer(events.ServerConfig{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	nc, err := s.Connect("test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	l, err := events.Open(context.Background(), nc, events.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(context.Background()) })
	return l, nc
}

var (
	testTypes  = []string{"task.assign", "task.result", "credit.transfer", "agent.announce", "ack", "zone.join"}
	testAgents = []string{"agent://a.local", "agent://b.local", "agent://c.local", "registry://r.local"}
)

func randomEnvelope(r *rand.Rand, i int) *events.Envelope {
	typ := testTypes[r.IntN(len(testTypes))]
	to := testAgents[r.IntN(len(testAgents))]
	if typ == "agent.announce" {
		to = ""
	}
	id := fmt.Sprintf("01RANDOM%018d", i)
	return &events.Envelope{
		ID: id, MsgID: id, Type: typ, From: testAgents[r.IntN(len(testAgents))], To: to,
		Transport:  []string{events.TransportTCP, events.TransportUDP}[r.IntN(2)],
		ReceivedAt: time.Date(2025, 10, 29, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Second),
		Headers:    []protocol.Header{{Name: "TYPE", Value: typ}},
		Body:       []byte(`{}`),
	}
}

func appendAll(t *testing.T, l *events.Log, envs []*events.Envelope) {
	t.Helper()
	ps := make([]*events.Pending, len(envs))
	for i, e := range envs {
		ps[i] = l.Append(context.Background(), e)
	}
	for _, p := range ps {
		if _, err := p.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

func snapshot(t *testing.T, r *Runner, s *Stats) []byte {
	t.Helper()
	var b []byte
	var err error
	r.View(func(uint64) { b, err = s.Snapshot() })
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestReplayEqualsLive is the determinism property for the node's folds
// (NewFolds: registry, ledger, handshakes, reputation, stats): runners
// that followed the log while it was written, and runners that replay it
// afterwards from the stream (events.Attach, the read-only path a
// restarted node's history comes through, not the writer's memory of
// recent events), end in byte-identical state, for logs of signed frames
// (keys bound and rotated, mints, transfers, requests, mentoring) with
// copies of them under new IDs and plain random events mixed in. Until
// 2026-12-02 the replay read the writer's ring and held only the stats,
// and a runner that dropped one event in fifty passed (helper-110).
func TestReplayEqualsLive(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			l, nc := openLogConn(t)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cfg := newHarness(t).cfg
			r := rand.New(rand.NewPCG(seed, seed))
			var envs []*events.Envelope
			signed := fuzzEvents(signedSeed(t))
			for i, ev := range signed {
				envs = append(envs, ev.Envelope)
				for range r.IntN(3) { // random events between the signed ones
					envs = append(envs, randomEnvelope(r, 1000*int(seed)+len(envs)))
				}
				if i > 0 && r.IntN(3) == 0 { // a copy of an earlier frame, under a new ID
					c := *signed[r.IntN(i)].Envelope
					c.ID = fmt.Sprintf("01COPY%020d", len(envs))
					c.MsgID = c.ID
					envs = append(envs, &c)
				}
			}
			for _, e := range envs {
				e.Seq = 0 // the log assigns it
			}
			n := uint64(len(envs))
			liveCfg := withOutbox(cfg)
			live := NewFolds(liveCfg)
			lr := NewRunner(l, nil, live.All()...)
			// The live folds' state is saved where a stop would have saved
			// it, at a point the seed chooses, for a start to take up.
			cut := 1 + r.Uint64N(n)
			var saved []byte
			var saveErr error
			lr.AtSeq(cut, func(ev *Event) {
				saved, saveErr = EncodeState(StateHeader{Seq: ev.Seq, EventID: ev.ID}, live, liveCfg.Outbox)
			})
			defer replayUntilReady(ctx, t, lr)()
			for i := 0; i < len(envs); i += 7 { // in bursts, so the live runner sees the log grow
				appendAll(t, l, envs[i:min(i+7, len(envs))])
			}
			if err := lr.WaitFor(ctx, n); err != nil {
				t.Fatal(err)
			}
			if err := l.WaitPublished(ctx, n); err != nil {
				t.Fatal(err)
			}

			ro, err := events.Attach(ctx, nc, events.StreamNameDefault)
			if err != nil {
				t.Fatal(err)
			}
			replayed := NewFolds(cfg)
			rr := NewRunner(ro, nil, replayed.All()...)
			defer replayUntilReady(ctx, t, rr)()
			if rr.Applied() != n || replayed.Stats.Events != n {
				t.Fatalf("the replay applied to seq %d, %d events; want %d", rr.Applied(), replayed.Stats.Events, n)
			}
			a, b := foldSnapshots(t, lr, live), foldSnapshots(t, rr, replayed)
			for i, p := range live.All() {
				if string(a[i]) != string(b[i]) {
					t.Fatalf("the replayed %s differs from the live one:\nlive   %s\nreplay %s", p.Name(), a[i], b[i])
				}
			}
			// A start from the saved state, through the stream as well:
			// the runner takes up the log after the saved event, and ends
			// where the others did.
			if saveErr != nil || saved == nil {
				t.Fatalf("saving the live folds at %d: %v", cut, saveErr)
			}
			resumedCfg := withOutbox(cfg)
			resumed := NewFolds(resumedCfg)
			if h, err := LoadState(saved, resumed, resumedCfg.Outbox); err != nil || h.Seq != cut {
				t.Fatalf("loading the state saved at %d: %+v %v", cut, h, err)
			}
			sr := NewRunner(ro, nil, resumed.All()...)
			sr.Resume(cut)
			defer replayUntilReady(ctx, t, sr)()
			if sr.Applied() != n || resumed.Stats.Events != n {
				t.Fatalf("the start from the state at %d applied to seq %d, %d events; want %d", cut, sr.Applied(), resumed.Stats.Events, n)
			}
			for i, got := range foldSnapshots(t, sr, resumed) {
				if string(a[i]) != string(got) {
					t.Fatalf("the %s taken up at %d differs from the live one:\nlive    %s\nresumed %s", live.All()[i].Name(), cut, a[i], got)
				}
			}
			var d string
			lr.View(func(uint64) { sr.View(func(uint64) { d = statetest.Diff(live, resumed, stateDiffSkip...) }) })
			if d != "" {
				t.Fatalf("the folds taken up at %d differ from the live ones (-live +resumed):\n%s", cut, d)
			}
			var postings int
			lr.View(func(uint64) { postings = live.Credits.L.Freeze().Postings() })
			if live.Stats.Events != n || postings < 2 {
				t.Fatalf("the live folds saw %d events of %d, and %d postings: the log did not exercise them", live.Stats.Events, n, postings)
			}
		})
	}
}

// withOutbox is cfg with an outbox of its own, as a node's live folds have.
func withOutbox(cfg RegistryConfig) RegistryConfig {
	cfg.Outbox = NewOutbox()
	return cfg
}

// foldSnapshots takes the snapshot of each of f's folds under r's lock.
func foldSnapshots(t *testing.T, r *Runner, f *Folds) [][]byte {
	t.Helper()
	var out [][]byte
	var err error
	r.View(func(uint64) {
		for _, p := range f.All() {
			var b []byte
			if b, err = p.(Snapshotter).Snapshot(); err != nil {
				return
			}
			out = append(out, b)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// runFor runs r in the background until the test ends: at its cleanup the
// run is cancelled and waited for, before the cleanups registered earlier
// stop the server under it (helper-110: runners outlived their tests).
func runFor(t *testing.T, ctx context.Context, cancel context.CancelFunc, r *Runner) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
}

func TestWaitFor(t *testing.T) {
	l := openLog(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := NewRunner(l, nil, NewStats())
	runFor(t, ctx, cancel, r)
	select {
	case <-r.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("empty log: runner not ready")
	}

	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	if err := r.WaitFor(short, 1); err == nil {
		t.Fatal("WaitFor(1) on an empty log returned nil, want a timeout")
	}

	done := make(chan error, 1)
	go func() {
		wctx, c := context.WithTimeout(ctx, 10*time.Second)
		defer c()
		done <- r.WaitFor(wctx, 3)
	}()
	envs := make([]*events.Envelope, 3)
	rng := rand.New(rand.NewPCG(9, 9))
	for i := range envs {
		envs[i] = randomEnvelope(rng, i)
	}
	appendAll(t, l, envs)
	if err := <-done; err != nil {
		t.Fatalf("WaitFor(3) after three appends = %v", err)
	}
	if got := r.Applied(); got < 3 {
		t.Fatalf("Applied() = %d after WaitFor(3)", got)
	}
}

// TestRunnerWaitsForItsServer: a reader's runner started while its NATS
// server is down (where the log ends cannot be read yet) keeps trying, and
// folds the log once the server is back, instead of giving up for good.
func TestRunnerWaitsForItsServer(t *testing.T) {
	dir := t.TempDir()
	start := func(listen string) *events.Server {
		// Tried for a while: on its second start the port was just freed,
		// and on a shared machine it may be slow to come free (helper-110).
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			s, err := events.StartServer(events.ServerConfig{DataDir: dir, Listen: listen})
			if err == nil {
				return s
			}
			if time.Now().After(deadline) {
				t.Fatal(err)
			}
		}
	}
	s := start("127.0.0.1:0")
	url := s.ClientURL()
	nc, err := s.Connect("writer")
	if err != nil {
		t.Fatal(err)
	}
	l, err := events.Open(context.Background(), nc, events.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(4, 4))
	envs := make([]*events.Envelope, 3)
	for i := range envs {
		envs[i] = randomEnvelope(rng, i)
	}
	appendAll(t, l, envs)
	l.Close(context.Background())
	nc.Close()

	// No reconnect buffer: requests fail at once while the server is away.
	reader, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond), nats.ReconnectBufSize(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	rl, err := events.Attach(context.Background(), reader, "")
	if err != nil {
		t.Fatal(err)
	}
	s.Shutdown()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := NewRunner(rl, nil, NewStats())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	// Let the first reads of the log's end fail against the stopped server.
	deadline := time.Now().Add(10 * time.Second)
	for reader.Status() == nats.CONNECTED && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("Run returned %v while the server was down", err)
	case <-r.Ready():
		t.Fatal("ready with the server down")
	case <-time.After(300 * time.Millisecond):
	}

	s = start(strings.TrimPrefix(url, "nats://"))
	defer s.Shutdown()
	select {
	case <-r.Ready():
	case err := <-done:
		t.Fatalf("Run returned %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the runner did not get ready once the server was back")
	}
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if err := r.WaitFor(wctx, 3); err != nil {
		t.Fatalf("WaitFor(3) after the server came back: %v", err)
	}
}

// TestRunnerSkipsAForeignMessage: the event stream takes anything a NATS
// client with the right to publish puts on its subjects. A message that is
// not one of the node's events made the read fail, and the runner retried
// it for ever: nothing after it was applied, and every answer was a 202.
func TestRunnerSkipsAForeignMessage(t *testing.T) {
	l, nc := openLogConn(t)
	rng := rand.New(rand.NewPCG(7, 7))
	appendAll(t, l, []*events.Envelope{randomEnvelope(rng, 0), randomEnvelope(rng, 1)})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := l.WaitPublished(ctx, 2); err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: "aglx.ev.junk._.x.y", Data: []byte("hello")}); err != nil {
		t.Fatal(err)
	}
	rl, err := events.Attach(ctx, nc, "") // a reader of the log, as on a restart
	if err != nil {
		t.Fatal(err)
	}
	stats := NewStats()
	r := NewRunner(rl, nil, stats)
	runFor(t, ctx, cancel, r)
	select {
	case <-r.Ready():
	case <-ctx.Done():
		t.Fatalf("the runner did not get past the foreign message: applied %d of 3", r.Applied())
	}
	if r.Applied() != 3 {
		t.Fatalf("applied %d, want 3", r.Applied())
	}
	r.View(func(uint64) {
		// The stranger is no event: Stats counted it as one of TYPE "".
		if stats.Events != 2 || stats.ByType[""] != 0 || stats.Last.IsZero() {
			t.Errorf("stats: %d events, %d of no TYPE, last %v; want the node's 2", stats.Events, stats.ByType[""], stats.Last)
		}
	})
}

// TestAtSeqLooksAtExactlyThatEvent: AtSeq's look comes right after the
// event at its sequence, before the next is applied, even when the
// runner applies the log in one stretch (as a replay does, while the node
// already takes frames).
func TestAtSeqLooksAtExactlyThatEvent(t *testing.T) {
	l := openLog(t)
	envs := make([]*events.Envelope, 10)
	rng := rand.New(rand.NewPCG(5, 5))
	for i := range envs {
		envs[i] = randomEnvelope(rng, i)
	}
	appendAll(t, l, envs)
	if err := l.WaitPublished(context.Background(), 10); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		seq       uint64
		wantExact bool
	}{
		{1, true},
		{7, true},
		{10, true},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		s := NewStats()
		r := NewRunner(l, nil, s)
		got := make(chan [2]uint64, 1)
		r.AtSeq(tc.seq, func(ev *Event) {
			var e uint64
			if ev.Seq == tc.seq && ev.ID == envs[tc.seq-1].ID {
				e = 1
			}
			got <- [2]uint64{r.Applied(), e}
		})
		runFor(t, ctx, cancel, r)
		select {
		case g := <-got:
			if g[0] != tc.seq || (g[1] == 1) != tc.wantExact {
				t.Errorf("AtSeq(%d) looked at applied %d, exact %v", tc.seq, g[0], g[1] == 1)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("AtSeq(%d) never looked", tc.seq)
		}
		<-r.Ready()
		cancel()
	}
}
