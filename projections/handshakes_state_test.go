package projections

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/ledger/statecodec"
	"github.com/aglx/ledger/ledger/statecodec/statetest"
	"github.com/aglx/ledger/protocol"
	"github.com/aglx/ledger/reputation"
)

// Tests of the saved state of the tracker, the reputation fold and the
// stats (handshakes_state.go, reputation_state.go, stats_state.go), which
// share one walk: fold a log through the node's folds (NewFolds), and at
// chosen events save those three, load them into a fresh NewFolds of the
// same configuration, and require the same folds, field for field
// (statetest.Diff), and the same bytes saved again. Then fold the rest of
// the log, or a window of it, through the saved folds and restored ones
// side by side, and require them the same again.
//
// The tracker and the reputation fold read the registry and the ledger as
// they apply an event (keys, refusals, the mentor directory), whose own
// saved state is another change's. So the restored folds that go on
// folding are made as NewFolds makes them, but reading the saved set's
// registry and ledger (besideFolds): the two sets see the very same
// registry and ledger at every event, and any difference is the
// tracker's, the reputation fold's or the stats'.

// stateCfg is the configuration the state tests fold under: newHarness's,
// with a fresh outbox (the ledger and the registry answer into it).
func stateCfg() RegistryConfig {
	return RegistryConfig{NodeURI: testNode, NodeKey: nodeKey, Zones: testZonesDefault, TokenKey: testTokenKey,
		SyncFrom: []string{testPeer}, Outbox: NewOutbox()}
}

// stateSkips are the fields a saved state leaves out, by fold: wiring to
// the other folds (the registry and the ledger the tracker asks, the
// tracker and the registry the reputation fold reads), which NewFolds
// gives a restored fold and which are saved, if at all, as their own
// folds.
var stateSkips = []string{"Handshakes.refusers", "handshakeBook.auth", "Reputation.registry", "Reputation.handshakes"}

// savedFolds is the three folds' saved states, in the order of mine.
type savedFolds [3][]byte

func (s savedFolds) equal(o savedFolds) bool {
	return bytes.Equal(s[0], o[0]) && bytes.Equal(s[1], o[1]) && bytes.Equal(s[2], o[2])
}

// mine lists the folds these tests save.
func mine(f *Folds) [3]StateSaver { return [3]StateSaver{f.Handshakes, f.Reputation, f.Stats} }

func saveFolds(t testing.TB, f *Folds) savedFolds {
	t.Helper()
	var out savedFolds
	for i, s := range mine(f) {
		var w statecodec.Writer
		if err := s.SaveState(&w); err != nil {
			t.Fatalf("%s: SaveState: %v", s.(Projection).Name(), err)
		}
		out[i] = w.Bytes()
	}
	return out
}

func loadFolds(t testing.TB, f *Folds, saved savedFolds) {
	t.Helper()
	for i, s := range mine(f) {
		r := statecodec.NewReader(saved[i])
		if err := s.LoadState(r); err != nil {
			t.Fatalf("%s: LoadState: %v", s.(Projection).Name(), err)
		}
		if err := r.Done(); err != nil {
			t.Fatalf("%s: LoadState: %v", s.(Projection).Name(), err)
		}
	}
}

// diffFolds compares the three folds of a and b, and what Diff does not
// see (pendingNow is an atomic).
func diffFolds(a, b *Folds) string {
	d := statetest.Diff(a.Handshakes, b.Handshakes, stateSkips...) + statetest.Diff(a.Reputation, b.Reputation, stateSkips...) +
		statetest.Diff(a.Stats, b.Stats, stateSkips...)
	if p, q := a.Handshakes.Pending(), b.Handshakes.Pending(); p != q {
		d += fmt.Sprintf("Pending() %d, restored %d\n", p, q)
	}
	return d
}

// besideFolds is NewFolds' tracker, reputation fold and stats, made as
// NewFolds makes them but reading o's registry and ledger.
func besideFolds(o *Folds) *Folds {
	hs := NewHandshakes(o.Registry, o.Registry, o.Credits)
	return &Folds{Registry: o.Registry, Credits: o.Credits, Handshakes: hs, Reputation: NewReputation(reputation.New(), o.Registry, hs), Stats: NewStats()}
}

// applyBeside applies e to o's folds and to each of bs's own, in the
// runner's order: the registry and the ledger once, then each tracker,
// each reputation fold (after its tracker), each stats.
func applyBeside(o *Folds, bs []*Folds, e *Event) {
	o.Registry.Apply(e)
	o.Credits.Apply(e)
	for _, f := range append([]*Folds{o}, bs...) {
		f.Handshakes.Apply(e)
	}
	for _, f := range append([]*Folds{o}, bs...) {
		f.Reputation.Apply(e)
		f.Stats.Apply(e)
	}
}

// checkStateWalk folds evs through NewFolds(cfg) and, before the events at
// the indexes in at (len(evs) for after the last), saves the three folds
// and checks them restored; each restored set then folds on beside the
// saved one for window events (0: to the end), and is compared again.
func checkStateWalk(t *testing.T, evs []*Event, at []int, window int) {
	t.Helper()
	o := NewFolds(stateCfg())
	type side struct {
		f      *Folds
		from   int
		until  int
		loaded savedFolds
	}
	var sides []side
	compare := func(s side) {
		t.Helper()
		if d := diffFolds(o, s.f); d != "" {
			t.Fatalf("saved before event %d, after %d more the folds differ (-saved +restored):\n%s", s.from, s.until-s.from, d)
		}
		for i, p := range mine(o) {
			want, _ := p.(Snapshotter).Snapshot()
			got, _ := mine(s.f)[i].(Snapshotter).Snapshot()
			if !bytes.Equal(want, got) {
				t.Fatalf("saved before event %d: %s's snapshots differ after %d more:\n%s\n%s", s.from, p.(Projection).Name(), s.until-s.from, want, got)
			}
		}
		if a, b := saveFolds(t, o), saveFolds(t, s.f); !a.equal(b) {
			t.Fatalf("saved before event %d: the folds save to other bytes after %d more", s.from, s.until-s.from)
		}
	}
	for i := 0; i <= len(evs); i++ {
		if slices.Contains(at, i) {
			saved := saveFolds(t, o)
			if again := saveFolds(t, o); !again.equal(saved) {
				t.Fatalf("before event %d: the same folds saved twice give other bytes", i)
			}
			fresh := NewFolds(stateCfg())
			loadFolds(t, fresh, saved)
			if d := diffFolds(o, fresh); d != "" {
				t.Fatalf("before event %d: the restored folds differ (-saved +restored):\n%s", i, d)
			}
			if again := saveFolds(t, fresh); !again.equal(saved) {
				t.Fatalf("before event %d: the restored folds save to other bytes than they were loaded from", i)
			}
			until := len(evs)
			if window > 0 {
				until = min(i+window, len(evs))
			}
			b := besideFolds(o)
			loadFolds(t, b, saved)
			sides = append(sides, side{f: b, from: i, until: until, loaded: saved})
		}
		kept := sides[:0]
		for _, s := range sides {
			if s.until == i {
				compare(s)
			} else {
				kept = append(kept, s)
			}
		}
		sides = kept
		if i == len(evs) {
			break
		}
		bs := make([]*Folds, len(sides))
		for j, s := range sides {
			bs[j] = s.f
		}
		applyBeside(o, bs, evs[i])
	}
}

// everyFew is 0 to n in steps of about n/parts, and n.
func everyFew(n, parts int) []int {
	var at []int
	for i := 0; i < n; i += max(1, n/parts) {
		at = append(at, i)
	}
	return append(at, n)
}

// referenceFrames is every frame of testdata/reference, one after another.
func referenceFrames(tb testing.TB) []byte {
	tb.Helper()
	files, err := filepath.Glob("../testdata/reference/*.aglx")
	if err != nil || len(files) == 0 {
		tb.Fatalf("reference frames: %v", err)
	}
	var all []byte
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			tb.Fatal(err)
		}
		all = append(all, b...)
	}
	return all
}

// handshakeTraffic is a log of handshakes of every kind and every end,
// with keys: signed mentor requests answered by a registered mentor's
// signed feedback (scores move), copies of signed requests and answers
// (remembered, refused), tasks answered, retried, cancelled and refused
// by the ledger, credit requests matched by amount with one pending for
// 1e3 (an amount whose text and exponent differ), shutdowns and plans,
// 300 requests falling due at once (the state saved at overdue marks
// holds pending handshakes past their deadline), a day's jump that
// expires the rest and the remembered copies, and late answers. overdue
// is the index of the event after the 300 fell due.
func handshakeTraffic(t *testing.T) (evs []*Event, overdue int) {
	h := newHSHarness(t)
	const owner, worker, mentor = hsOwner, hsWorker, hsOther
	workerKey, mentorKey := newEd25519(t), newEd25519(t)
	h.bindKey(worker, workerKey, h.at)
	h.catchUp()
	repMentor(t, h, mentor, mentorKey)
	byWorker := func(f *protocol.Frame) *protocol.Frame {
		return signed(t, workerKey, stamped(f, h.at.Add(time.Second)))
	}
	byMentor := func(f *protocol.Frame) *protocol.Frame {
		return signed(t, mentorKey, stamped(f, h.at.Add(time.Second)))
	}
	creditRequest := func(from, to, amount, id string) *protocol.Frame {
		return withHeader(frame(from, to, protocol.TypeCreditRequest, fmt.Sprintf(`{"requested_amount":%s,"purpose":"p"}`, amount)), protocol.HeaderID, id)
	}
	sec := time.Second

	ask := askFor(t, h, worker, mentor, workerKey, "t-1")
	h.send(ask, sec)
	h.send(ask, sec) // a copy: repeated
	praise := byMentor(feedback(mentor, worker, "0.25"))
	h.send(praise, sec)
	h.send(askFor(t, h, worker, mentor, workerKey, "t-2"), sec)
	h.send(praise, sec) // a copy of an answer: ends nothing
	h.send(byMentor(feedback(mentor, worker, "-0.5")), sec)

	h.send(frame(owner, worker, protocol.TypeTaskAssign, `{"task":"a","task_id":"t-1"}`), sec)
	h.send(byWorker(frame(worker, owner, protocol.TypeTaskResult, `{"task_id":"t-1","status":"SUCCESS"}`)), sec)
	h.send(frame(owner, worker, protocol.TypeTaskAssign, `{"task":"a","task_id":"t-2"}`), sec)
	h.send(frame(worker, owner, protocol.TypeTaskReject, `{"task_id":"t-2","reason":"busy"}`), sec) // unsigned, from a keyed worker
	h.send(frame(owner, mentor, protocol.TypeTaskRetry, `{"original_task_id":"t-2","attempt":2}`), sec)
	h.send(frame(owner, worker, protocol.TypeTaskAssign, `{"task":"a"}`), sec) // named by its event id
	h.send(frame(owner, worker, protocol.TypeTaskAssign, `{"task":"a","task_id":"t-3"}`), sec)
	h.send(frame(owner, worker, protocol.TypeTaskCancel, `{"task_id":"t-3","reason":"changed my mind"}`), sec)
	h.send(frame(owner, worker, protocol.TypeTaskCancel, `{"task_id":"t-9"}`), sec) // unmatched
	h.send(withHeader(frame(owner, worker, protocol.TypeTaskAssign, `{"task":"a","task_id":"t-4"}`), protocol.HeaderCredits, "1000"), sec)

	h.send(byWorker(creditRequest(worker, owner, "5", "c-1")), sec)
	h.send(byWorker(creditRequest(worker, owner, "1e3", "c-2")), sec)
	h.send(byWorker(creditRequest(worker, owner, "7.50", "c-3")), sec)
	h.send(stamped(frame(owner, worker, protocol.TypeCreditDeny, `{"requested_amount":5,"reason":"no"}`), h.at.Add(sec)), sec)
	h.send(withHeader(stamped(frame(owner, worker, protocol.TypeCreditDeny, `{"requested_amount":7.5,"reason":"no"}`), h.at.Add(sec)),
		protocol.HeaderInReplyTo, "c-3"), sec)
	h.send(stamped(creditRequest(owner, mentor, "2.50", "c-4"), h.at.Add(sec)), sec)

	h.send(frame(owner, worker, protocol.TypeShutdownRequest, `{"request_id":"s-1","reason":"done"}`), sec)
	h.send(byWorker(frame(worker, owner, protocol.TypeShutdownResponse, `{"request_id":"s-1","approve":false,"reason":"busy"}`)), sec)
	h.send(byWorker(frame(worker, owner, protocol.TypePlanApproval, `{"request_id":"p-1","plan":"migrate"}`)), sec)
	h.send(frame(owner, worker, protocol.TypeShutdownRequest, `{"request_id":"s-2"}`), sec)
	h.send(frame(worker, owner, protocol.TypeShutdownResponse, `{"request_id":"s-2","approve":true}`), sec) // unsigned, from a keyed worker

	for i := range 300 {
		teammate := fmt.Sprintf("agent://t%d.local", i/HandshakesPairMax)
		h.send(frame(owner, teammate, protocol.TypeShutdownRequest, fmt.Sprintf(`{"request_id":"b-%d"}`, i)), 0)
	}
	h.send(frame(worker, owner, protocol.TypeTaskResult, `{"task_id":"x","status":"ok"}`), HandshakeShutdownTTL+sec)
	overdue = len(h.events)
	if _, pending := h.hs.Counts(); pending < 300-HandshakesExpiryMax {
		t.Fatalf("%d pending after the 300 fell due; the test needs some past their deadline", pending)
	}
	h.send(frame("agent://t2.local", owner, protocol.TypeShutdownResponse, `{"request_id":"b-299","approve":true}`), sec) // late
	h.send(frame(owner, worker, protocol.TypeShutdownRequest, `{"request_id":"s-3"}`), sec)

	h.send(frame(owner, worker, protocol.TypeShutdownRequest, `{"request_id":"s-4"}`), 25*time.Hour)
	h.send(byMentor(feedback(mentor, worker, "0.5")), sec) // its request expired: late or unmatched
	h.send(askFor(t, h, worker, mentor, workerKey, "t-3"), sec)
	h.send(byMentor(feedback(mentor, worker, "0.75")), sec)
	h.send(frame(owner, worker, protocol.TypeTaskAssign, `{"task":"a","task_id":"t-5"}`), sec)

	if c := h.scores.Counts(); c.Applied < 2 {
		t.Fatalf("the traffic moved %d scores; the test needs some", c.Applied)
	}
	counts, _ := h.hs.Counts()
	if counts.Repeated == 0 || counts.Late == 0 || counts.Unauthenticated == 0 || len(counts.Unmatched) == 0 || len(counts.Ended) < 4 {
		t.Fatalf("the traffic does not move every total: %+v", counts)
	}
	return h.events, overdue
}

// randomTraffic is TestHandshakesProperties' traffic from a fixed seed:
// three agents, one with a key whose messages are signed, forged or not,
// and a clock that jumps past deadlines and steps back.
func randomTraffic(t *testing.T, seed uint64, n int) []*Event {
	h := newHSHarness(t)
	rng := rand.New(rand.NewPCG(seed, 11))
	agents := []string{hsOwner, hsWorker, hsOther}
	k := newEd25519(t)
	h.register(hsOther, 3600, h.at)
	repMentor(t, h, hsOther, k)
	for range n {
		from, to := agents[rng.IntN(3)], agents[rng.IntN(3)]
		id := rng.IntN(4)
		step := time.Duration([]int64{-30, 1, 60, 700, 90_000}[rng.IntN(5)]) * time.Second
		var f *protocol.Frame
		switch rng.IntN(15) {
		case 0:
			f = frame(from, to, protocol.TypeTaskAssign, fmt.Sprintf(`{"task":"a","task_id":"t-%d"}`, id))
		case 1:
			f = frame(from, to, protocol.TypeTaskResult, fmt.Sprintf(`{"task_id":"t-%d","status":"SUCCESS"}`, id))
		case 2:
			f = frame(from, to, protocol.TypeTaskReject, fmt.Sprintf(`{"task_id":"t-%d","reason":"r"}`, id))
		case 3:
			f = frame(from, to, protocol.TypeTaskCancel, fmt.Sprintf(`{"task_id":"t-%d"}`, id))
		case 4:
			f = frame(from, to, protocol.TypeTaskRetry, fmt.Sprintf(`{"original_task_id":"t-%d","attempt":2}`, id))
		case 5:
			f = withHeader(frame(from, to, protocol.TypeCreditRequest, fmt.Sprintf(`{"requested_amount":%d,"timestamp":"2026-11-01T10:00:00Z"}`, 1+id%2)),
				protocol.HeaderID, fmt.Sprintf("m-%d", id))
		case 6:
			f = frame(from, to, protocol.TypeCreditDeny, fmt.Sprintf(`{"requested_amount":%d,"reason":"no","timestamp":"2026-11-01T10:00:00Z"}`, 1+id%2))
			if rng.IntN(2) == 0 {
				f = withHeader(f, protocol.HeaderInReplyTo, fmt.Sprintf("m-%d", id))
			}
		case 7:
			f = frame(from, to, protocol.TypeMentorRequest, `{"task_id":"t"}`)
		case 8:
			f = frame(from, to, protocol.TypeMentorFeedback, `{"score":0.5}`)
		case 9:
			f = frame(from, to, protocol.TypeShutdownRequest, fmt.Sprintf(`{"request_id":"s-%d"}`, id))
		case 10:
			f = frame(from, to, protocol.TypeShutdownResponse, fmt.Sprintf(`{"request_id":"s-%d","approve":%v}`, id, rng.IntN(2) == 0))
		case 11:
			f = frame(from, to, protocol.TypePlanApprovalResponse, fmt.Sprintf(`{"request_id":"s-%d","approve":true}`, id))
		case 12:
			f = frame(from, testNode, protocol.TypeMentorRegister, `{"agent_name":"M","expertise":["x"],"available":true}`)
		case 13:
			f = frame(from, to, protocol.TypePlanApproval, fmt.Sprintf(`{"request_id":"s-%d","plan":"p"}`, id))
		default:
			f = frame(from, to, protocol.TypeMentorFeedback, fmt.Sprintf(`{"score":0.5,"reputation_delta":%.2f}`, float64(rng.IntN(41)-20)/20))
		}
		if from == hsOther && rng.IntN(3) > 0 {
			signer := k
			if rng.IntN(4) == 0 {
				signer = newEd25519(t)
			}
			f = signed(t, signer, stamped(f, h.at.Add(step)))
		}
		h.send(f, step)
	}
	return h.events
}

// manySenders is n events from as many senders, on two transports, that
// do not decode: only the stats count them.
func manySenders(n int) []*Event {
	evs := make([]*Event, n)
	for i := range evs {
		transport := events.TransportTLS
		if i%3 == 0 {
			transport = events.TransportUDP
		}
		evs[i] = &Event{Envelope: &events.Envelope{ID: fmt.Sprintf("01JSTATS%018d", i+1), Seq: uint64(i + 1), Type: fmt.Sprintf("x.%d", i%5),
			From: fmt.Sprintf("agent://s%d.local", i), Transport: transport, ReceivedAt: regT0.Add(time.Duration(i) * time.Second)}}
	}
	return evs
}

// TestFoldStateRoundTrip: the tracker, the reputation fold and the stats,
// saved at many points of several logs, restore to the same folds and
// fold on as the saved ones.
func TestFoldStateRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		evs  func(t *testing.T) ([]*Event, []int)
	}{
		{name: "no events", evs: func(*testing.T) ([]*Event, []int) { return nil, []int{0} }},
		{name: "the signed seed and the reference frames, twice", evs: func(t *testing.T) ([]*Event, []int) {
			refs := referenceFrames(t)
			evs := fuzzEvents(append(append(signedSeed(t), refs...), refs...))
			return evs, everyFew(len(evs), 12)
		}},
		{name: "handshakes of every kind and end", evs: func(t *testing.T) ([]*Event, []int) {
			evs, overdue := handshakeTraffic(t)
			return evs, append(everyFew(len(evs), 15), overdue, overdue+1)
		}},
		{name: "more senders than the stats count by name", evs: func(*testing.T) ([]*Event, []int) {
			evs := manySenders(StatsSendersMax + 50)
			return evs, []int{StatsSendersMax - 1, StatsSendersMax + 10, len(evs)}
		}},
		{name: "random handshake traffic", evs: func(t *testing.T) ([]*Event, []int) {
			evs := randomTraffic(t, 1, 300)
			return evs, everyFew(len(evs), 15)
		}},
		{name: "random handshake traffic, another seed", evs: func(t *testing.T) ([]*Event, []int) {
			evs := randomTraffic(t, 2, 300)
			return evs, everyFew(len(evs), 15)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			evs, at := tc.evs(t)
			checkStateWalk(t, evs, at, 0)
		})
	}
}

// TestHandshakesStateAtTheBounds: the tracker saved while it lets ended
// handshakes go (HandshakesEndedMax), compacts its page order and its
// ended list, and drops and compacts the signed requests it remembers,
// restores to the same tracker, which folds on as the saved one. Some
// 140,000 requests expire one by one as the clock passes their deadline;
// the first 1,100 are signed.
func TestHandshakesStateAtTheBounds(t *testing.T) {
	if testing.Short() || raceEnabled {
		// .ci/run runs it without the race detector, under which it took
		// 4.5 minutes of the package's 10 (go-cmp walking 66,000
		// handshakes at every point), and the tracker is one goroutine.
		t.Skip("folds some 140,000 events; run without -race or -short")
	}
	h := newHSHarness(t)
	const signer = "agent://signer.local"
	k := newEd25519(t)
	h.bindKey(signer, k, h.at)
	evs := h.events
	const signedN, n = 1100, 160_000
	at := h.at
	for i := range n {
		at = at.Add(time.Second)
		responder := fmt.Sprintf("agent://r%d.local", i%20)
		var f *protocol.Frame
		switch {
		case i < signedN:
			f = signed(t, k, stamped(frame(signer, responder, protocol.TypeShutdownRequest, fmt.Sprintf(`{"request_id":"s-%d"}`, i)), at))
		case i%7 == 0:
			// Answers the request 70 before it, if still pending.
			f = frame(fmt.Sprintf("agent://r%d.local", (i-70)%20), "agent://u.local", protocol.TypeShutdownResponse,
				fmt.Sprintf(`{"request_id":"u-%d","approve":true}`, i-70))
		default:
			f = frame("agent://u.local", responder, protocol.TypeShutdownRequest, fmt.Sprintf(`{"request_id":"u-%d"}`, i))
		}
		evs = append(evs, h.event(f, at))
	}
	// Where the tracker's memories are at their most involved: just before
	// and after the signed copies' queue compacts its dropped head, and
	// the page order's and the ended list's compactions; and the end. A
	// first walk finds where they are (and that the ended handshakes are
	// let go before them).
	o := NewFolds(stateCfg())
	var copiesCompact, firstLetGo, orderCompact, endedCompact int
	for i, e := range evs {
		bk := &o.Handshakes.book
		head, endedHead, order := bk.copies.head, bk.endedHead, len(bk.order)
		for _, p := range o.All() {
			p.Apply(e)
		}
		switch {
		case copiesCompact == 0 && bk.copies.head < head:
			copiesCompact = i
		case firstLetGo == 0 && bk.endedHead > 0:
			firstLetGo = i
		case orderCompact == 0 && len(bk.order) < order:
			orderCompact = i
		case endedCompact == 0 && bk.endedHead < endedHead:
			endedCompact = i
		}
	}
	if copiesCompact == 0 || firstLetGo == 0 || orderCompact == 0 || endedCompact == 0 {
		t.Fatalf("the log reaches not every bound: copies compacted at %d, first let go at %d, order compacted at %d, ended list at %d",
			copiesCompact, firstLetGo, orderCompact, endedCompact)
	}
	// Just before the order compacts it holds more than a thousand seqs
	// let go, and just before the ended list compacts its head is at
	// HandshakesEndedMax.
	checkStateWalk(t, evs, []int{copiesCompact - 30, copiesCompact + 1, orderCompact, orderCompact + 1,
		endedCompact, endedCompact + 1, len(evs)}, 3000)
}

// TestHandshakesLoadStateRefuses: a saved book the tracker could not have
// kept is refused, above all one that would panic it later. Each case
// breaks a tracker folded from handshakeTraffic, saves it, and loads it.
func TestHandshakesLoadStateRefuses(t *testing.T) {
	evs, overdue := handshakeTraffic(t)
	pendingSeq := func(b *handshakeBook) uint64 { return b.deadlines[len(b.deadlines)-1].Seq }
	endedSeq := func(b *handshakeBook) uint64 { return b.ended[len(b.ended)-1] }
	tests := []struct {
		name  string
		spoil func(b *handshakeBook)
	}{
		{name: "as folded"},
		{name: "a pending handshake missing from the heap", spoil: func(b *handshakeBook) { b.deadlines = b.deadlines[:len(b.deadlines)-1] }},
		{name: "a pending handshake twice in the heap", spoil: func(b *handshakeBook) { b.deadlines[len(b.deadlines)-1] = b.deadlines[0] }},
		{name: "an ended handshake in the heap", spoil: func(b *handshakeBook) { b.deadlines[len(b.deadlines)-1] = b.bySeq[endedSeq(b)] }},
		{name: "the heap out of order", spoil: func(b *handshakeBook) {
			d := b.deadlines
			d[0], d[len(d)-1] = d[len(d)-1], d[0]
		}},
		{name: "a kept handshake after the last seq applied", spoil: func(b *handshakeBook) { b.lastSeq = pendingSeq(b) - 1 }},
		{name: "an ended handshake missing from the ended list", spoil: func(b *handshakeBook) { b.ended = b.ended[:len(b.ended)-1] }},
		{name: "a pending handshake in the ended list", spoil: func(b *handshakeBook) { b.ended = append(b.ended, pendingSeq(b)) }},
		{name: "an ended handshake twice in the ended list", spoil: func(b *handshakeBook) { b.ended = append(b.ended, endedSeq(b)) }},
		{name: "a handshake let go in the ended list", spoil: func(b *handshakeBook) { b.ended = append(b.ended, b.lastSeq) }},
		{name: "the ended list's head past its end", spoil: func(b *handshakeBook) { b.endedHead = len(b.ended) + 1 }},
		{name: "the page order out of order", spoil: func(b *handshakeBook) { slices.Reverse(b.order) }},
		{name: "the page order missing a handshake", spoil: func(b *handshakeBook) { b.order = b.order[1:] }},
		{name: "a name of no handshake", spoil: func(b *handshakeBook) { b.byKey["nobody's"] = pendingSeq(b) }},
		{name: "a message id of a handshake let go", spoil: func(b *handshakeBook) { b.byMessage["gone"] = b.lastSeq }},
		{name: "a state no handshake is in", spoil: func(b *handshakeBook) { b.bySeq[endedSeq(b)].State = "lost" }},
		{name: "an amount past an Amount's bounds", spoil: func(b *handshakeBook) {
			for _, q := range b.bySeq {
				if q.amount != nil {
					q.amount.Exponent = 1 << 20
				}
			}
		}},
		{name: "a signed copy remembered twice", spoil: func(b *handshakeBook) {
			b.copies.queue = append(b.copies.queue, b.copies.queue[len(b.copies.queue)-1])
		}},
		{name: "signed copies out of time order", spoil: func(b *handshakeBook) {
			q := b.copies.queue[b.copies.head:]
			q[0].until, q[len(q)-1].until = q[len(q)-1].until, q[0].until
		}},
		{name: "a signed copies' head past where it compacts", spoil: func(b *handshakeBook) {
			c := &b.answerCopies
			c.queue = append(make([]signedCopy, signedCopiesCompactAt+1), c.queue[c.head:]...)
			c.head = signedCopiesCompactAt + 1
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := NewFolds(stateCfg())
			for _, e := range evs[:overdue] {
				for _, p := range o.All() {
					p.Apply(e)
				}
			}
			b := &o.Handshakes.book
			if len(b.deadlines) < 2 || len(b.ended) < 2 || len(b.copies.queue)-b.copies.head < 2 || len(b.answerCopies.queue) < 1 {
				t.Fatalf("the traffic leaves too little to break: %d pending, %d ended, %d copies", len(b.deadlines), len(b.ended), len(b.copies.queue))
			}
			if tc.spoil != nil {
				tc.spoil(b)
			}
			var w statecodec.Writer
			if err := o.Handshakes.SaveState(&w); err != nil {
				t.Fatal(err)
			}
			err := NewFolds(stateCfg()).Handshakes.LoadState(statecodec.NewReader(w.Bytes()))
			if (err == nil) != (tc.spoil == nil) {
				t.Fatalf("LoadState = %v", err)
			}
		})
	}
}

// stateFuzzFrames are frames for the fuzz tests to fold after a load:
// requests and answers of every family between a few agents, with
// message ids, an IN-REPLY-TO and an amount written as 1e3.
func stateFuzzFrames() []byte {
	const a, b, c = "agent://fz-a.local", "agent://fz-b.local", "agent://fz-c.local"
	fs := []*protocol.Frame{
		frame(a, b, protocol.TypeTaskAssign, `{"task":"x","task_id":"t-1"}`),
		frame(b, a, protocol.TypeTaskResult, `{"task_id":"t-1","status":"SUCCESS"}`),
		frame(a, b, protocol.TypeTaskAssign, `{"task":"x","task_id":"t-2"}`),
		frame(a, c, protocol.TypeTaskRetry, `{"original_task_id":"t-2","attempt":2}`),
		frame(a, c, protocol.TypeTaskCancel, `{"task_id":"t-2"}`),
		withHeader(frame(b, a, protocol.TypeCreditRequest, `{"requested_amount":1e3,"purpose":"p","timestamp":"2025-10-29T18:00:00Z"}`), protocol.HeaderID, "c-1"),
		withHeader(frame(b, a, protocol.TypeCreditRequest, `{"requested_amount":5,"purpose":"p","timestamp":"2025-10-29T18:00:00Z"}`), protocol.HeaderID, "c-2"),
		withHeader(frame(a, b, protocol.TypeCreditDeny, `{"requested_amount":5,"reason":"no","timestamp":"2025-10-29T18:00:00Z"}`), protocol.HeaderInReplyTo, "c-2"),
		frame(a, b, protocol.TypeCreditDeny, `{"requested_amount":1000,"reason":"no","timestamp":"2025-10-29T18:00:00Z"}`),
		frame(c, a, protocol.TypeMentorRequest, `{"task_id":"t"}`),
		frame(a, c, protocol.TypeMentorFeedback, `{"score":0.5,"reputation_delta":0.5}`),
		frame(a, b, protocol.TypeShutdownRequest, `{"request_id":"s-1"}`),
		frame(a, c, protocol.TypeShutdownRequest, `{"request_id":"s-1"}`),
		frame(c, a, protocol.TypeShutdownResponse, `{"request_id":"s-1","approve":true}`),
		frame(b, a, protocol.TypePlanApproval, `{"request_id":"p-1","plan":"p"}`),
		frame(a, b, protocol.TypePlanApprovalResponse, `{"request_id":"p-1","approve":false}`),
	}
	var out []byte
	for _, f := range fs {
		out = append(out, protocol.Encode(f)...)
	}
	return out
}

// stateFuzzAfter is what the fuzz tests fold after a load: the reference
// frames and stateFuzzFrames.
func stateFuzzAfter(tb testing.TB) []byte { return append(referenceFrames(tb), stateFuzzFrames()...) }

// addStateSeeds adds, as seeds of f, the saved state pick chooses of folds
// fresh, after the signed seed and the reference frames, and after
// stateFuzzFrames too.
func addStateSeeds(f *testing.F, pick func(*Folds) StateSaver) {
	refs := referenceFrames(f)
	for _, data := range [][]byte{nil, append(signedSeed(f), refs...), append(append(signedSeed(f), refs...), stateFuzzFrames()...)} {
		folds := NewFolds(stateCfg())
		for _, e := range fuzzEvents(data) {
			for _, p := range folds.All() {
				p.Apply(e)
			}
		}
		var w statecodec.Writer
		if err := pick(folds).SaveState(&w); err != nil {
			f.Fatal(err)
		}
		f.Add(w.Bytes())
	}
}

// fuzzLoadState loads data into the fold pick chooses of fresh folds; if it
// loads, the folds are read and fold the frames after (stateFuzzAfter),
// numbered after lastSeq and received from a day after clock on, so that
// they answer, expire and open handshakes after the loaded ones. None of
// it may panic.
func fuzzLoadState(t *testing.T, data, after []byte, pick func(*Folds) StateSaver, lastSeq func(*Folds) uint64, clock func(*Folds) time.Time) {
	folds := NewFolds(stateCfg())
	if pick(folds).LoadState(statecodec.NewReader(data)) != nil {
		return
	}
	read := func() {
		for _, p := range folds.All() {
			if _, err := p.(Snapshotter).Snapshot(); err != nil {
				t.Fatalf("%s: Snapshot: %v", p.Name(), err)
			}
		}
		folds.Handshakes.Page(HandshakeFilter{})
		folds.Handshakes.Counts()
	}
	read()
	evs := fuzzEvents(after)
	base, at := lastSeq(folds), clock(folds).Add(24*time.Hour)
	for i, e := range evs {
		if base < 1<<62 {
			e.Seq = base + uint64(i) + 1
		}
		e.ReceivedAt = at.Add(time.Duration(i) * time.Minute)
		if i == len(evs)/2 {
			at = at.Add(25 * time.Hour)
		}
		for _, p := range folds.All() {
			p.Apply(e)
		}
	}
	read()
}

// FuzzLoadStateHandshakes: no input panics the tracker's LoadState, nor
// the tracker it loads when it is read and folds on.
func FuzzLoadStateHandshakes(f *testing.F) {
	pick := func(f *Folds) StateSaver { return f.Handshakes }
	addStateSeeds(f, pick)
	after := stateFuzzAfter(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzLoadState(t, data, after, pick, func(f *Folds) uint64 { return f.Handshakes.book.lastSeq },
			func(f *Folds) time.Time { return f.Handshakes.book.now })
	})
}
