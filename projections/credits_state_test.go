package projections

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/ledger"
	"github.com/aglx/ledger/ledger/statecodec"
	"github.com/aglx/ledger/ledger/statecodec/statetest"
	"github.com/aglx/ledger/protocol"
)

// creditsStateSkip lists what Credits.LoadState leaves as NewCredits made
// it (credits_state.go): the authenticator and the outbox (wiring: the
// test's two fold sets have registries and outboxes of their own), and
// Warm's scratch. The ledger's own: the slots of its hash indexes, rebuilt
// under a fresh seed, and the sink of Warm's reads (ledger/state.go).
var creditsStateSkip = []string{
	"Credits.auth", "Credits.outbox", "Credits.warm",
	"hashIndex.seed", "hashIndex.dir", "hashIndex.depth", "hashIndex.spare", "Ledger.warmSink",
}

// Keys of the script's agents, the same in every process, so that a
// fuzzing worker makes the same names (replayKey) as the coordinator's
// seeds hold.
var (
	stateAlice crypto.Signer = ed25519.NewKeyFromSeed([]byte("aglx credits state test: alice!!"))
	stateBob   crypto.Signer = ed25519.NewKeyFromSeed([]byte("aglx credits state test: bob!!!!"))
)

const (
	stAlice = "agent://st-alice.local"
	stBob   = "agent://st-bob.local"
	stCarol = "agent://st-carol.local"
)

// stateScript builds events as the log holds them: frames received one
// second apart, each signed message stamped with its receive time.
type stateScript struct {
	tb   testing.TB
	seq  uint64
	at   time.Time
	step time.Duration // between two frames received; a second if 0
	evs  []*Event
}

// add appends the frame make builds for the next receive time.
func (s *stateScript) add(make func(at time.Time) *protocol.Frame) *protocol.Frame {
	s.at = s.at.Add(max(s.step, time.Second))
	if s.step != 0 {
		s.at = s.at.Add(s.step - time.Second)
	}
	f := make(s.at)
	s.addFrame(f)
	return f
}

// addFrame appends f as received now (a copy of an earlier frame).
func (s *stateScript) addFrame(f *protocol.Frame) {
	s.seq++
	s.evs = append(s.evs, stateEvent(s.tb, s.seq, f, s.at))
}

// stateEvent is the event the log gives the folds for f (harness.event).
func stateEvent(tb testing.TB, seq uint64, f *protocol.Frame, at time.Time) *Event {
	msg, err := protocol.Parse(f)
	if err != nil {
		tb.Fatalf("Parse(%s) = %v", f.Type(), err)
	}
	id := fmt.Sprintf("01JSTATE%018d", seq)
	env := &events.Envelope{ID: id, MsgID: id, Seq: seq, Type: msg.Info.Name, From: msg.From.String(), To: msg.To.String(),
		Transport: events.TransportTLS, Declared: f.Transport, Peer: "127.0.0.1:40001", ReceivedAt: at,
		Headers: append([]protocol.Header(nil), f.Headers...), Body: append([]byte(nil), f.Body...)}
	return &Event{Envelope: env, Msg: msg}
}

// signedBy signs f with k.
func signedBy(tb testing.TB, k crypto.Signer, f *protocol.Frame) *protocol.Frame {
	if err := protocol.SignFrame(k, f); err != nil {
		tb.Fatal(err)
	}
	return f
}

func (s *stateScript) signed(k crypto.Signer, from, to, typ, body string) *protocol.Frame {
	return s.add(func(at time.Time) *protocol.Frame {
		return signedBy(s.tb, k, frame(from, to, typ, fmt.Sprintf(`{%s,"timestamp":%q}`, body, ts(at))))
	})
}

// creditsScript is a life of the ledger through the folds: keys bound,
// mints, transfers, an approval settled and one left to expire, task
// holds placed and ended, a request and its denial, a reward, an
// adjustment, a false claim, and flood refusals of signed transfers: past
// a sender's share of the memory (a seal), copies refused, then the
// memory forgetting them all into seals once the window has passed (its
// order compacted past 1024 names), and the seals swept a day later. It
// returns the events and, by name, the index of the first event of each
// stage, where the tests cut. flood sets the refusals of alice (bob's
// are a tenth).
func creditsScript(tb testing.TB, flood int) ([]*Event, map[string]int) {
	s := &stateScript{tb: tb, at: regT0}
	stages := map[string]int{}
	stage := func(name string) { stages[name] = len(s.evs) }
	for _, a := range []struct {
		uri string
		k   crypto.Signer
	}{{stAlice, stateAlice}, {stBob, stateBob}} {
		s.add(func(time.Time) *protocol.Frame {
			return frame(a.uri, testNode, protocol.TypeRegistryUpdate, fmt.Sprintf(`{"agent_name":%q,"agent_type":"worker","capabilities":["data.analyze"],"status":"READY","ttl":864000}`, a.uri))
		})
		s.signed(a.k, a.uri, testNode, protocol.TypeAuthRequest, fmt.Sprintf(`"agent_id":"st","public_key":%q`, pubTextOf(a.k)))
	}
	s.signed(nodeKey, testNode, stAlice, protocol.TypeCreditTransfer, `"amount":"50","currency":"AGLX","transaction_id":"st-m-1"`)
	s.signed(nodeKey, testNode, stBob, protocol.TypeCreditTransfer, `"amount":"10.50","currency":"AGLX","transaction_id":"st-m-2"`)
	stage("ledger")
	s.signed(stateAlice, stAlice, stBob, protocol.TypeCreditTransfer, `"amount":"5","currency":"AGLX","transaction_id":"st-t-1"`)
	s.signed(stateAlice, stAlice, stBob, protocol.TypeCreditApprove, `"approved_amount":"4","transaction_id":"st-a-1"`)
	s.signed(stateAlice, stAlice, stCarol, protocol.TypeCreditApprove, `"approved_amount":"3","transaction_id":"st-a-2"`)
	s.signed(stateBob, stBob, stAlice, protocol.TypeCreditRequest, `"requested_amount":"2","purpose":"p"`)
	s.signed(stateBob, stBob, stAlice, protocol.TypeCreditRequest, `"requested_amount":"7","purpose":"q"`)
	s.signed(stateAlice, stAlice, stBob, protocol.TypeCreditDeny, `"requested_amount":"2","reason":"no"`)
	s.add(func(at time.Time) *protocol.Frame {
		f := frame(stAlice, stCarol, protocol.TypeTaskAssign, fmt.Sprintf(`{"task":"analyze","task_id":"st-job-1","timestamp":%q}`, ts(at)))
		f.Headers = append(f.Headers, protocol.Header{Name: protocol.HeaderCredits, Value: "2"})
		return signedBy(tb, stateAlice, f)
	})
	s.add(func(at time.Time) *protocol.Frame {
		f := frame(stBob, stCarol, protocol.TypeTaskAssign, fmt.Sprintf(`{"task":"analyze","timestamp":%q}`, ts(at)))
		f.Headers = append(f.Headers, protocol.Header{Name: protocol.HeaderCredits, Value: "1.5"})
		return signedBy(tb, stateBob, f)
	})
	s.signed(stateAlice, stAlice, stBob, protocol.TypeCreditTransfer, `"amount":"4","currency":"AGLX","transaction_id":"st-a-1"`)
	s.signed(stateAlice, stAlice, stBob, protocol.TypeCreditReward, `"amount":"0.25","reason":"thanks"`)
	s.signed(nodeKey, testNode, stBob, protocol.TypeCreditAdjust, `"adjustment":"-0.5","reason":"fix","transaction_id":"st-t-1"`)
	s.signed(stateBob, stBob, stAlice, protocol.TypeCreditReceived, `"amount":"6","transaction_id":"st-t-1"`)
	s.add(func(at time.Time) *protocol.Frame { // unsigned: refused, 401
		return frame(stBob, stAlice, protocol.TypeCreditTransfer, fmt.Sprintf(`{"amount":"1","currency":"AGLX","transaction_id":"st-u-1","timestamp":%q}`, ts(at)))
	})
	stage("flood")
	// The flood comes fast, so that alice's share fills within the time
	// a refusal is remembered.
	s.step = 100 * time.Millisecond
	var refusedFirst *protocol.Frame
	for i := range flood + flood/10 {
		k, from, to := stateAlice, stAlice, stBob
		if i >= flood {
			k, from, to = stateBob, stBob, stAlice
		}
		f := s.signed(k, from, to, protocol.TypeCreditTransfer, fmt.Sprintf(`"amount":"1000","currency":"AGLX","transaction_id":"st-f-%d"`, i))
		if i == 0 {
			refusedFirst = f
		}
		if i == flood/2 {
			stage("mid-flood")
			s.addFrame(withID(refusedFirst, "st-copy-1")) // 409
		}
	}
	s.step = 0
	stage("sealed")
	s.addFrame(withID(refusedFirst, "st-copy-2"))
	s.signed(stateAlice, stAlice, stBob, protocol.TypeCreditTransfer, `"amount":"1","currency":"AGLX","transaction_id":"st-t-2"`)
	// Past the window: the refusals are forgotten into their senders'
	// seals, and alice's approval to carol is still live.
	s.at = s.at.Add(2*SignatureWindowDefault + refusedSkew + time.Minute)
	stage("forgotten")
	s.signed(nodeKey, testNode, stAlice, protocol.TypeCreditTransfer, `"amount":"1","currency":"AGLX","transaction_id":"st-m-3"`)
	s.addFrame(withID(refusedFirst, "st-copy-3"))
	s.signed(stateBob, stBob, stCarol, protocol.TypeCreditTransfer, `"amount":"1","currency":"AGLX","transaction_id":"st-t-3"`)
	s.add(func(at time.Time) *protocol.Frame {
		return signedBy(tb, stateAlice, frame(stCarol, stAlice, protocol.TypeTaskResult, fmt.Sprintf(`{"task_id":"st-job-1","status":"SUCCESS","timestamp":%q}`, ts(at))))
	})
	// A day on: the holds expire and the seals are swept.
	s.at = s.at.Add(25 * time.Hour)
	stage("expired")
	s.signed(nodeKey, testNode, stBob, protocol.TypeCreditTransfer, `"amount":"1","currency":"AGLX","transaction_id":"st-m-4"`)
	s.signed(stateAlice, stAlice, stBob, protocol.TypeCreditTransfer, `"amount":"2","currency":"AGLX","transaction_id":"st-t-4"`)
	s.signed(stateBob, stBob, stAlice, protocol.TypeCreditBalance, `"balance":"1"`)
	stage("end")
	return s.evs, stages
}

// stateFolds is the node's folds for the tests, replying into an outbox
// of their own.
func stateFolds(t testing.TB) *Folds {
	cfg := RegistryConfig{NodeURI: testNode, NodeKey: nodeKey, Zones: testZonesDefault, TokenKey: testTokenKey, SyncFrom: []string{testPeer}}
	cfg.Outbox = NewOutbox()
	return NewFolds(cfg)
}

func foldEvents(f *Folds, evs []*Event) {
	for _, e := range evs {
		for _, p := range f.All() {
			p.Apply(e)
		}
	}
}

func saveCredits(t testing.TB, c *Credits) []byte {
	t.Helper()
	w := statecodec.NewWriter(nil)
	if err := c.SaveState(w); err != nil {
		t.Fatalf("SaveState: %v", err)
	}
	return w.Bytes()
}

func loadCredits(b []byte, into *Credits) error {
	r := statecodec.NewReader(b)
	if err := into.LoadState(r); err != nil {
		return err
	}
	return r.Done()
}

// TestCreditsStateRoundTrip: the Credits fold, saved at each stage of
// creditsScript and loaded into a fresh NewFolds's Credits, is the same
// fold field for field and saves the same bytes. Put in place of the
// Credits of a second fold set that folded the same events (its registry,
// handshakes and reputation then stand as the first set's: a stand-in for
// their own LoadState, written apart), it answers every later event as
// the saved one does, and the two sets end the same, fold for fold.
func TestCreditsStateRoundTrip(t *testing.T) {
	evs, stages := creditsScript(t, RefusedCopiesPerSenderMax+1)
	for _, name := range []string{"ledger", "mid-flood", "sealed", "forgotten", "expired", "end"} {
		t.Run(name, func(t *testing.T) {
			cut := stages[name]
			saved := stateFolds(t)
			foldEvents(saved, evs[:cut])
			c := saved.Credits
			switch name { // the stages reach the states they are named for
			case "sealed":
				if m := c.refused; len(m.seals) == 0 || len(m.byName) < RefusedCopiesPerSenderMax {
					t.Fatalf("at %s: %d seals, %d refusals remembered", name, len(m.seals), len(m.byName))
				}
			case "expired":
				// All forgotten, order compacted once past 1024 names.
				if m := c.refused; m.head == 0 || m.head > 1024 || len(m.byName) != 0 || len(m.seals) == 0 {
					t.Fatalf("at %s: head %d, %d remembered, %d seals", name, m.head, len(m.byName), len(m.seals))
				}
			}
			b := saveCredits(t, c)
			restored := stateFolds(t).Credits
			if err := loadCredits(b, restored); err != nil {
				t.Fatalf("LoadState: %v", err)
			}
			if d := statetest.Diff(c, restored, creditsStateSkip...); d != "" {
				t.Fatalf("restored Credits differs (-saved +restored):\n%s", d)
			}
			if again := saveCredits(t, c); !bytes.Equal(again, b) {
				t.Fatal("saving the same fold twice gave different bytes")
			}
			if resaved := saveCredits(t, restored); !bytes.Equal(resaved, b) {
				t.Fatal("the restored fold saves other bytes than it was loaded from")
			}

			twin := stateFolds(t)
			foldEvents(twin, evs[:cut])
			restored.auth = twin.Registry
			twin.Handshakes.refusers = []EventRefuser{twin.Registry, restored}
			twin.Credits = restored
			var want, got []ledger.Outcome
			c.Observe = func(_ *Event, o ledger.Outcome) { want = append(want, o) }
			restored.Observe = func(_ *Event, o ledger.Outcome) { got = append(got, o) }
			foldEvents(saved, evs[cut:])
			foldEvents(twin, evs[cut:])
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("the restored fold's outcomes differ:\n got %+v\nwant %+v", got, want)
			}
			if d := statetest.Diff(c, restored, creditsStateSkip...); d != "" {
				t.Fatalf("continued Credits differs (-saved +restored):\n%s", d)
			}
			for i, p := range saved.All() {
				a, err1 := p.(Snapshotter).Snapshot()
				b, err2 := twin.All()[i].(Snapshotter).Snapshot()
				if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
					t.Fatalf("the continued %s folds differ (%v, %v)", p.Name(), err1, err2)
				}
			}
		})
	}
}

// TestCreditsLoadStateRefusesDamage: a saved Credits state cut short, or
// with its memory of refusals out of the bounds the memory keeps, is
// refused; a memory whose entries are not in its order is not saved.
func TestCreditsLoadStateRefusesDamage(t *testing.T) {
	evs, stages := creditsScript(t, 30)
	f := stateFolds(t)
	foldEvents(f, evs[:stages["sealed"]+2])
	base := saveCredits(t, f.Credits)
	cutAt := len(base)
	if m := f.Credits.refused; len(m.byName) < 30 {
		t.Fatalf("the fixture remembers %d refusals", len(m.byName))
	}
	{ // where the ledger starts: every cut before it
		w := statecodec.NewWriter(nil)
		if err := f.Credits.L.SaveState(w); err != nil {
			t.Fatal(err)
		}
		cutAt -= len(w.Bytes())
	}
	for n := range cutAt {
		if err := loadCredits(base[:n], stateFolds(t).Credits); err == nil {
			t.Fatalf("LoadState of the first %d bytes: no error", n)
		}
	}
	tests := []struct {
		name   string
		damage func(m *refusedCopies)
		want   string
	}{
		{"forgotten names the memory compacts", func(m *refusedCopies) {
			m.order = append(make([]string, 5000), m.order[m.head:]...)
			m.head = 5000
		}, "compacts"},
		{"a sender past its share", func(m *refusedCopies) {
			for i := range RefusedCopiesPerSenderMax + 1 {
				name := fmt.Sprintf("extra-%d", i)
				m.byName[name] = refusedCopy{from: stAlice, status: 402}
				m.order = append(m.order, name)
			}
		}, "more than"},
		{"a status that is none", func(m *refusedCopies) {
			c := m.byName[m.order[m.head]]
			c.status = 7
			m.byName[m.order[m.head]] = c
		}, "status"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := stateFolds(t).Credits
			if err := loadCredits(base, c); err != nil {
				t.Fatal(err)
			}
			tc.damage(c.refused)
			err := loadCredits(saveCredits(t, c), stateFolds(t).Credits)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("LoadState: %v, want an error about %q", err, tc.want)
			}
		})
	}
	// What SaveState refuses to write, a state made by hand.
	for _, damage := range []func(m *refusedCopies){
		func(m *refusedCopies) { m.byName["outside the order"] = refusedCopy{from: stBob, status: 402} },
		func(m *refusedCopies) { m.order = append(m.order, m.order[m.head]) },
	} {
		c := stateFolds(t).Credits
		if err := loadCredits(base, c); err != nil {
			t.Fatal(err)
		}
		damage(c.refused)
		if err := c.SaveState(statecodec.NewWriter(nil)); err == nil {
			t.Fatal("SaveState of a memory whose entries are not each once in its order: no error")
		}
	}
	w := statecodec.NewWriter(nil)
	w.Time(regT0)
	w.Time(regT0)
	w.Len(0) // head
	w.Len(2)
	for range 2 {
		w.String("twice")
		w.Bool(true)
		w.String(stAlice)
		w.Uint(5)
		w.Int(402)
		w.Time(regT0)
		w.Time(regT0)
	}
	w.Len(0) // seals
	r := statecodec.NewReader(w.Bytes())
	if newRefusedCopies().load(r); r.Err() == nil || !strings.Contains(r.Err().Error(), "twice") {
		t.Fatalf("loading a name remembered twice: %v", r.Err())
	}
}

// FuzzLoadStateCredits: Credits.LoadState of arbitrary bytes, seeded with
// real saved states, never panics; a fold it loads snapshots and folds
// more events (copies of refused messages among them) without panicking.
func FuzzLoadStateCredits(f *testing.F) {
	evs, stages := creditsScript(f, 20)
	f.Add(saveCredits(f, stateFolds(f).Credits))
	for _, cut := range []int{stages["flood"], stages["sealed"] + 2, len(evs)} {
		folds := stateFolds(f)
		foldEvents(folds, evs[:cut])
		f.Add(saveCredits(f, folds.Credits))
	}
	// The events folded after a load: the script's key bindings first
	// (a fresh registry), then a sample of the rest.
	var more []*Event
	for i, e := range evs {
		if i < stages["ledger"] || i%3 == 0 {
			more = append(more, e)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		folds := stateFolds(t)
		c := folds.Credits
		if err := loadCredits(data, c); err != nil {
			return
		}
		if _, err := c.Snapshot(); err != nil {
			t.Fatalf("Snapshot of a loaded fold: %v", err)
		}
		if c.L.Seq() > 1<<62 {
			return
		}
		for i, e := range more {
			env := *e.Envelope
			env.Seq = c.L.Seq() + uint64(i) + 1
			ev := &Event{Envelope: &env, Msg: e.Msg}
			folds.Registry.Apply(ev)
			c.Warm([]*Event{ev})
			c.Apply(ev)
		}
	})
}
