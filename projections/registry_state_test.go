package projections

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/ledger/statecodec"
	"github.com/aglx/ledger/ledger/statecodec/statetest"
	"github.com/aglx/ledger/protocol"
)

// The registry's saved state: a registry restored from it is the saved
// one field for field (statetest.Diff), and folds the events after it as
// the saved one does.

// registryStateSkip are the Registry's fields SaveState leaves out: the
// scratch of the event being applied, which Apply sets before it reads it
// (registry_state.go).
var registryStateSkip = []string{"Registry.last", "Registry.answered"}

// statePeer is a second peer registry the state tests take syncs from,
// with a key they hold (signedSeed's testPeer key is its own).
const statePeer = "registry://peer2.local"

// regScript builds a registry test's events one after another, as the
// bridge logs them: seq numbers them, and at is the receive time of the
// next. It takes a testing.TB, so that a fuzz test's seeds are made with
// it too.
type regScript struct {
	tb   testing.TB
	cfg  RegistryConfig
	seq  uint64
	at   time.Time
	evs  []*Event
	keys map[string]crypto.Signer // bound by bind, by URI
	// agents is how many agents richRegistryScript registered.
	agents int
}

// event turns a frame into the event the runner would give the folds, as
// harness.event does.
func (s *regScript) event(f *protocol.Frame) *Event {
	s.tb.Helper()
	msg, err := protocol.Parse(f)
	if err != nil {
		s.tb.Fatalf("Parse(%s) = %v", f.Type(), err)
	}
	s.seq++
	id := fmt.Sprintf("01JSTATE%018d", s.seq)
	transport := events.TransportTLS
	if f.Transport == protocol.TransportUDP {
		transport = events.TransportUDP
	}
	env := &events.Envelope{ID: id, MsgID: id, Seq: s.seq, Type: msg.Info.Name, From: msg.From.String(), To: msg.To.String(),
		Transport: transport, Declared: f.Transport, Peer: "127.0.0.1:40001", ReceivedAt: s.at,
		Headers: append([]protocol.Header(nil), f.Headers...), Body: append([]byte(nil), f.Body...)}
	return &Event{Envelope: env, Msg: msg}
}

func (s *regScript) add(f *protocol.Frame) *Event {
	s.tb.Helper()
	e := s.event(f)
	s.evs = append(s.evs, e)
	return e
}

func (s *regScript) wait(d time.Duration) { s.at = s.at.Add(d) }

// resend adds a copy of e's frame as a new event, as the bridge logs a
// message sent again.
func (s *regScript) resend(e *Event) *Event {
	env := *e.Envelope
	s.seq++
	env.Seq, env.ReceivedAt = s.seq, s.at
	env.ID = fmt.Sprintf("01JRESEND%017d", env.Seq)
	env.MsgID = env.ID
	again := &Event{Envelope: &env, Msg: e.Msg}
	s.evs = append(s.evs, again)
	return again
}

// newKey is a fresh Ed25519 key; newRSAKey a fresh RSA one.
func (s *regScript) newKey() crypto.Signer {
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		s.tb.Fatal(err)
	}
	return k
}

func (s *regScript) newRSAKey() crypto.Signer {
	k, err := rsa.GenerateKey(rand.Reader, protocol.RSAKeyBitsMin)
	if err != nil {
		s.tb.Fatal(err)
	}
	return k
}

func (s *regScript) sign(k crypto.Signer, f *protocol.Frame) *protocol.Frame {
	s.tb.Helper()
	if err := protocol.SignFrame(k, f); err != nil {
		s.tb.Fatal(err)
	}
	return f
}

func (s *regScript) hmac(secret []byte, f *protocol.Frame) *protocol.Frame {
	s.tb.Helper()
	sig, err := protocol.SignHMAC(secret, f.From(), f.To(), f.Type(), "", f.Body)
	if err == nil {
		f.Body, err = protocol.SetSignature(f.Body, sig)
	}
	if err != nil {
		s.tb.Fatal(err)
	}
	return f
}

// body is a JSON object of members, stamped at the script's time.
func (s *regScript) body(members string) string {
	if members == "" {
		return fmt.Sprintf(`{"timestamp":%q}`, ts(s.at))
	}
	return fmt.Sprintf(`{%s,"timestamp":%q}`, members, ts(s.at))
}

// signedBy is a frame from `from` to the node signed with from's bound key.
func (s *regScript) signedBy(from, typ, members string) *protocol.Frame {
	s.tb.Helper()
	return s.sign(s.keys[from], frame(from, testNode, typ, s.body(members)))
}

func (s *regScript) bind(uri string, k crypto.Signer) *Event {
	s.tb.Helper()
	s.keys[uri] = k
	return s.add(s.sign(k, frame(uri, testNode, protocol.TypeAuthRequest,
		s.body(fmt.Sprintf(`"agent_id":"x","public_key":%q`, pubTextOf(k))))))
}

func (s *regScript) register(uri, status string, ttl int) *Event {
	return s.add(frame(uri, testNode, protocol.TypeRegistryUpdate,
		fmt.Sprintf(`{"agent_name":%q,"capabilities":["c"],"status":%q,"ttl":%d}`, uri, status, ttl)))
}

func (s *regScript) join(uri, zone string, secret []byte) *Event {
	s.tb.Helper()
	return s.add(s.hmac(secret, frame(uri, testNode, protocol.TypeZoneJoin,
		s.body(fmt.Sprintf(`"zone_id":%q,"agent_id":"x","capabilities":["c"]`, zone)))))
}

func (s *regScript) exchange(from string, uris ...string) *Event {
	var known []string
	for _, u := range uris {
		known = append(known, fmt.Sprintf(`{"agent_uri":%q,"status":"READY"}`, u))
	}
	return s.add(frame(from, testNode, protocol.TypeRegistryExchange, fmt.Sprintf(`{"known_agents":[%s]}`, strings.Join(known, ","))))
}

func (s *regScript) announce(from string) *Event {
	f := frame(from, "", protocol.TypeAgentAnnounce, `{"agent_name":"A","agent_type":"worker","uptime":12}`)
	f.Transport = protocol.TransportUDP
	return s.add(f)
}

// newStateScript starts a script with signedSeed's frames (key bindings,
// a zone join, mints, signed transfers, a rotation, a peer's sync) and
// every reference frame, as fuzzEvents reads them.
func newStateScript(t testing.TB) *regScript {
	t.Helper()
	data := signedSeed(t)
	files, err := filepath.Glob("../testdata/reference/*.aglx")
	if err != nil || len(files) == 0 {
		t.Fatalf("reference frames: %v", err)
	}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		data = append(data, b...)
	}
	s := &regScript{tb: t, evs: fuzzEvents(data), keys: map[string]crypto.Signer{},
		cfg: RegistryConfig{NodeURI: testNode, NodeKey: nodeKey, Zones: testZonesDefault, TokenKey: testTokenKey,
			SyncFrom: []string{testPeer, statePeer}}}
	s.seq = uint64(len(s.evs))
	s.at = s.evs[len(s.evs)-1].ReceivedAt.Add(time.Minute)
	return s
}

// richAgents is how many agents TestRegistryStateRoundTrip's script
// registers: more than one chunk of the paged set holds (sortedChunkMax),
// and enough that their updates compact the change log.
const richAgents = 600

// richRegistryScript is newStateScript followed by what fills every part
// of the registry's state past its bounds, with the memories as small as
// shrinkMemories makes them: agents (richAgents: more than one chunk of
// the paged set), re-registrations enough to compact the change log, a
// status history past its bound, keys of both kinds with signed messages
// at one timestamp, answered auth.requests pushed out of their memory,
// hints re-put past the order's compaction, sightings, zone members who
// came and went, zones' memories of joins, mentors, an unnamed peer's
// syncs, a named peer's merged entries, and the node's own key rotation.
func richRegistryScript(t testing.TB, agents int) *regScript {
	t.Helper()
	s := newStateScript(t)
	s.agents = agents
	for i := range agents {
		ttl := 86400
		if i%50 == 0 {
			ttl = 60 // expires before its next update
		}
		s.register(fmt.Sprintf("agent://s%03d.local", i), "READY", ttl)
	}
	s.wait(2 * time.Minute)
	for round, status := range []string{"BUSY", "IDLE", "READY"} {
		for i := range agents {
			s.register(fmt.Sprintf("agent://s%03d.local", i), fmt.Sprintf("%s-%d", status, round%2), 86400)
		}
	}
	for i := range StatusHistoryMax + 8 {
		s.register("agent://s001.local", fmt.Sprintf("S%d", i), 86400)
	}
	// Keys: answered auth.requests, some dropped from their memory by
	// time (below) and more than it holds pushed out; one RSA key; two
	// signed updates at one stamp; a rotation.
	for i := range 5 {
		s.bind(fmt.Sprintf("agent://k%02d.local", i), s.newKey())
	}
	// Hints past their bound, then re-put past the order's compaction.
	for i := range 12 {
		var uris []string
		for j := range 9 {
			uris = append(uris, fmt.Sprintf("agent://h%02d.local", (i*5+j)%13))
		}
		s.exchange(fmt.Sprintf("agent://s%03d.local", i), uris...)
	}
	for i := range 12 {
		s.exchange("agent://s099.local", "agent://h00.local", "agent://h01.local", "agent://h02.local", "agent://h03.local",
			"agent://h04.local", fmt.Sprintf("agent://h%02d.local", 5+i%3))
	}
	for i := range 12 {
		s.announce(fmt.Sprintf("agent://u%02d.local", i))
	}
	s.announce("agent://s002.local")
	// Zones: members who join and leave.
	for i := range 5 {
		s.join(fmt.Sprintf("agent://s%03d.local", 10+i), "research-hub", testZoneSecretA)
	}
	s.add(frame("agent://s011.local", testNode, protocol.TypeZoneLeave, s.body(`"zone_id":"research-hub"`)))
	s.wait(11 * time.Minute)
	for i := range 3 {
		s.join(fmt.Sprintf("agent://s%03d.local", 20+i), "strict-zone", testZoneSecretB)
	}
	s.join("agent://s030.local", "research-hub", testZoneSecretA)
	for i := 5; i < 12; i++ {
		s.bind(fmt.Sprintf("agent://k%02d.local", i), s.newKey())
	}
	s.bind("agent://rsa.local", s.newRSAKey())
	s.add(s.signedBy("agent://k11.local", protocol.TypeRegistryUpdate, `"agent_name":"K11","ttl":7200`))
	s.add(s.signedBy("agent://k11.local", protocol.TypeRegistryUpdate, `"agent_name":"K11 again","ttl":7200`))
	s.add(s.signedBy("agent://k10.local", protocol.TypeKeyRotate,
		fmt.Sprintf(`"old_key_id":"k10-1","new_key_id":"k10-2","public_key":%q`, pubTextOf(s.newKey()))))
	// Mentors.
	for i := range 3 {
		s.add(frame(fmt.Sprintf("agent://m%d.local", i), testNode, protocol.TypeMentorRegister,
			fmt.Sprintf(`{"agent_name":"M%d","expertise":["nlp"],"available":%v,"rating":0.%d}`, i, i != 1, 5+i)))
	}
	s.add(frame("agent://m0.local", testNode, protocol.TypeMentorRegister, `{"agent_name":"M0","expertise":["nlp","ml"],"available":false}`))
	s.add(frame("agent://m2.local", testNode, protocol.TypeMentorReport,
		s.body(`"sessions_total":3,"mentees_supported":2,"avg_score":0.75,"credits_earned":1.5`)))
	// Peers: an unnamed one refused, a named one merged, then one of its
	// agents registers itself.
	s.add(frame("registry://stranger.local", testNode, protocol.TypeRegistrySync, `{"entries":[]}`))
	s.add(frame("registry://stranger.local", testNode, protocol.TypeRegistrySync, `{"entries":[]}`))
	s.bind(statePeer, s.newKey())
	s.add(s.signedBy(statePeer, protocol.TypeRegistrySync, `"entries":[`+
		`{"agent_id":"p1","agent_uri":"agent://p1.local","status":"READY","ttl":3600},`+
		`{"agent_id":"p2","agent_uri":"agent://p2.local","status":"GONE","ttl":0},`+
		`{"agent_id":"p3","agent_uri":"agent://p3.local","ttl":600}]`))
	s.register("agent://p3.local", "READY", 3600)
	s.add(frame("agent://s005.local", testNode, protocol.TypeRegistryFetch,
		fmt.Sprintf(`{"mode":"update","since":%q}`, ts(s.at.Add(-time.Hour)))))
	// The node rotates its key, and mints with the new one.
	next := s.newKey()
	s.add(s.sign(nodeKey, frame(testNode, testNode, protocol.TypeKeyRotate, s.body(fmt.Sprintf(
		`"old_key_id":%q,"new_key_id":%q,"public_key":%q,"rotation_reason":"test"`,
		protocol.KeyID(nodeKey.Public()), protocol.KeyID(next.Public()), pubTextOf(next))))))
	s.wait(time.Second)
	s.add(s.sign(next, frame(testNode, "agent://s003.local", protocol.TypeCreditTransfer,
		s.body(`"amount":"5","currency":"AGLX","transaction_id":"state-mint-1"`))))
	return s
}

// laterEvents are what the tests fold after a restore: resends the
// memories answer, and more of everything.
func (s *regScript) laterEvents() []*Event {
	s.tb.Helper()
	first := len(s.evs)
	var bind, update, join *Event
	for _, e := range s.evs {
		switch {
		case e.Type == protocol.TypeAuthRequest && e.From == "agent://rsa.local":
			bind = e
		case e.Type == protocol.TypeRegistryUpdate && e.From == "agent://k11.local":
			update = e
		case e.Type == protocol.TypeZoneJoin && e.From == "agent://s030.local":
			join = e
		}
	}
	s.wait(time.Second)
	s.resend(bind)   // answered from the memory of answered requests
	s.resend(update) // a replay of a signed update at its stamp: 409
	s.resend(join)   // a replay of a join the zone remembers: 409
	s.add(s.signedBy("agent://k11.local", protocol.TypeRegistryUpdate, `"agent_name":"K11 later","ttl":7200`))
	for i := range 4 {
		s.exchange("agent://s100.local", fmt.Sprintf("agent://h%02d.local", i), fmt.Sprintf("agent://later%d.local", i))
		s.announce(fmt.Sprintf("agent://later-u%d.local", i))
		s.register(fmt.Sprintf("agent://later%d.local", i), "READY", 3600)
	}
	s.join("agent://later0.local", "research-hub", testZoneSecretA)
	s.join("agent://later1.local", "strict-zone", testZoneSecretB)
	s.add(frame("agent://s010.local", testNode, protocol.TypeZoneLeave, s.body(`"zone_id":"research-hub"`)))
	s.add(frame("registry://stranger.local", testNode, protocol.TypeRegistrySync, `{"entries":[]}`))
	s.add(s.signedBy(statePeer, protocol.TypeRegistrySync,
		`"entries":[{"agent_id":"p4","agent_uri":"agent://p4.local","status":"READY","ttl":3600}]`))
	s.add(frame("agent://m1.local", testNode, protocol.TypeMentorReport, s.body(`"sessions_total":1`)))
	s.add(frame("agent://s005.local", testNode, protocol.TypeRegistryFetch,
		fmt.Sprintf(`{"mode":"update","since":%q}`, ts(s.at.Add(-time.Hour)))))
	s.wait(20 * time.Minute)
	s.bind("agent://later-k.local", s.newKey())
	s.add(s.signedBy("agent://k03.local", protocol.TypeKeyRotate,
		fmt.Sprintf(`"old_key_id":"k03-1","new_key_id":"k03-2","public_key":%q`, pubTextOf(s.newKey()))))
	for i := range s.agents {
		if i%7 == 0 {
			s.register(fmt.Sprintf("agent://s%03d.local", i), "LATER", 86400)
		}
	}
	return s.evs[first:]
}

// shrinkMemories gives r's bounded memories small bounds, so that a test
// fills them past their bounds with a few events. LoadState loads into
// the memories the registry has, with their bounds, so the registry
// restored into is shrunk alike. The zones' memories of joins are left
// alone: a zone refuses joins when its memory is full, at ZoneJoinsMax
// whatever the memory's own bound (TestRegistryStateZoneJoinsFull).
func shrinkMemories(r *Registry) {
	r.hints = newRecentMap[Hint](8)
	r.sightings = newRecentMap[Sighting](8)
	r.seen = newRecentMap[seenOutcome](8)
}

// newStateFolds makes the node's folds under cfg with an outbox of their
// own, and the registry's memories shrunk.
func newStateFolds(cfg RegistryConfig) (*Folds, *Outbox) {
	o := NewOutbox()
	cfg.Outbox = o
	f := NewFolds(cfg)
	shrinkMemories(f.Registry)
	return f, o
}

// saveRegistry is r's saved state.
func saveRegistry(t testing.TB, r *Registry) []byte {
	t.Helper()
	w := statecodec.NewWriter(nil)
	if err := r.SaveState(w); err != nil {
		t.Fatalf("SaveState: %v", err)
	}
	return w.Bytes()
}

func saveOutbox(t testing.TB, o *Outbox) []byte {
	t.Helper()
	w := statecodec.NewWriter(nil)
	if err := o.SaveState(w); err != nil {
		t.Fatalf("Outbox.SaveState: %v", err)
	}
	return w.Bytes()
}

// loadRegistry loads b into r and checks it read all of it.
func loadRegistry(r *Registry, b []byte) error {
	rd := statecodec.NewReader(b)
	if err := r.LoadState(rd); err != nil {
		return err
	}
	return rd.Done()
}

func loadOutbox(o *Outbox, reg *Registry, b []byte) error {
	rd := statecodec.NewReader(b)
	if err := o.LoadState(rd, reg); err != nil {
		return err
	}
	return rd.Done()
}

// sharedSignatures counts the outbox's replies whose signature is the
// one of the registry's memory of the same request: the copies of one
// reply that sign once.
func sharedSignatures(r *Registry, o *Outbox) int {
	mine := map[*lazySignature]bool{}
	for _, it := range r.seen.m {
		if it.v.reply.sign != nil {
			mine[it.v.reply.sign] = true
		}
	}
	n := 0
	for _, rep := range o.bySeq {
		if mine[rep.sign] {
			n++
		}
	}
	return n
}

// TestRegistryStateRoundTrip: a registry with every part of its state
// filled, past the bounds of its memories, restored into the registry of
// fresh folds under the same configuration (with its outbox, whichever
// is loaded first), is the same registry field for field, saves to the
// same bytes, and folds further events (resends its memories answer
// among them) to the same state, snapshot and replies, signatures made
// after the restore included.
func TestRegistryStateRoundTrip(t *testing.T) {
	s := richRegistryScript(t, richAgents)
	cfg := s.cfg
	before := s.evs[:len(s.evs):len(s.evs)]
	type saved struct {
		folds    *Folds
		out      *Outbox
		reg, box []byte
	}
	build := func() saved {
		a, oa := newStateFolds(cfg)
		for _, e := range before {
			for _, p := range a.All() {
				p.Apply(e)
			}
		}
		// Half the replies are taken before the stop, so that some of the
		// auth.responses are signed and some still wait.
		for _, e := range before {
			if e.Seq%2 == 0 {
				oa.Take(e.Seq)
			}
		}
		return saved{a, oa, saveRegistry(t, a.Registry), saveOutbox(t, oa)}
	}
	base := build()
	checkRich(t, base.folds.Registry, base.out)
	if !bytes.Equal(base.reg, saveRegistry(t, base.folds.Registry)) {
		t.Fatal("two saves of one registry differ")
	}
	later := s.laterEvents()

	for _, registryFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("registry loaded first %v", registryFirst), func(t *testing.T) {
			a := build() // each run continues its own
			if !bytes.Equal(a.reg, base.reg) || !bytes.Equal(a.box, base.box) {
				t.Fatal("the same events folded twice save to different bytes")
			}
			b, ob := newStateFolds(cfg)
			var err error
			if registryFirst {
				err = loadRegistry(b.Registry, a.reg)
				if err == nil {
					err = loadOutbox(ob, b.Registry, a.box)
				}
			} else {
				err = loadOutbox(ob, b.Registry, a.box)
				if err == nil {
					err = loadRegistry(b.Registry, a.reg)
				}
			}
			if err != nil {
				t.Fatalf("LoadState: %v", err)
			}
			compareRegistries(t, "after the restore", a.folds.Registry, b.Registry)
			if d := statetest.Diff(a.out, ob); d != "" {
				t.Fatalf("the restored outbox differs (-saved +restored):\n%s", d)
			}
			if got := saveRegistry(t, b.Registry); !bytes.Equal(got, a.reg) {
				t.Fatal("the restored registry saves to other bytes than it was loaded from")
			}
			if got := saveOutbox(t, ob); !bytes.Equal(got, a.box) {
				t.Fatal("the restored outbox saves to other bytes than it was loaded from")
			}
			if n, m := sharedSignatures(a.folds.Registry, a.out), sharedSignatures(b.Registry, ob); n != m || n == 0 {
				t.Fatalf("%d replies share their signature with the registry's memory after the restore, %d before", m, n)
			}

			// The other folds are restored by their own LoadState; here the
			// registry folds on alone, both reading the same scores.
			b.Registry.cfg.Reputation = a.folds.Registry.cfg.Reputation
			for _, e := range later {
				a.folds.Registry.Apply(e)
				b.Registry.Apply(e)
			}
			for _, e := range append(before, later...) {
				ra, oka, erra := a.out.Take(e.Seq)
				rb, okb, errb := ob.Take(e.Seq)
				if oka != okb || (erra == nil) != (errb == nil) || ra.Type != rb.Type || ra.Status != rb.Status ||
					!bytes.Equal(ra.Body, rb.Body) || ra.FirstOnly != rb.FirstOnly {
					t.Fatalf("seq %d %s: the saved registry answers %v %s %d %s, the restored one %v %s %d %s",
						e.Seq, e.Type, oka, ra.Type, ra.Status, ra.Body, okb, rb.Type, rb.Status, rb.Body)
				}
			}
			compareRegistries(t, "after further events", a.folds.Registry, b.Registry)
			if d := statetest.Diff(a.out, ob); d != "" {
				t.Fatalf("the outboxes differ after further events (-saved +restored):\n%s", d)
			}
		})
	}
}

// compareRegistries fails unless want and got are the same registry field
// for field (but for the fields in skip, compared otherwise), with the same
// snapshot.
func compareRegistries(t *testing.T, when string, want, got *Registry, skip ...string) {
	t.Helper()
	if d := statetest.Diff(want, got, append(skip, registryStateSkip...)...); d != "" {
		t.Fatalf("%s, the registries differ (-saved +restored):\n%s", when, d)
	}
	sw, err := want.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sg, err := got.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sw, sg) {
		t.Fatalf("%s, the snapshots differ", when)
	}
}

// checkRich fails unless the script reached every part of the state it
// is meant to: a round trip of a state that lacks one proves nothing of
// it.
func checkRich(t *testing.T, r *Registry, o *Outbox) {
	t.Helper()
	signedWaiting, signedDone := 0, 0
	for _, it := range r.seen.m {
		if ls := it.v.reply.sign; ls != nil && ls.body == nil {
			signedWaiting++
		} else if ls != nil {
			signedDone++
		}
	}
	sameStamp := false
	for _, kr := range r.keys {
		for _, s := range kr.sameStamp {
			sameStamp = sameStamp || len(s) > 1
		}
	}
	stale := func(order []recentKey, n int) bool { return len(order) > n }
	checks := []struct {
		what string
		ok   bool
	}{
		{"agents in more than one chunk", len(r.sorted.chunks) > 1},
		{"a compacted change log", len(r.changes.entries) < 4*richAgents},
		{"a status history at its bound", len(r.agents["agent://s001.local"].History) == StatusHistoryMax},
		{"agents known from a peer", r.synced >= 3},
		{"the node's rotated key", len(r.nodeKeys.keys) == 2},
		{"an RSA key", r.keys["agent://rsa.local"] != nil},
		{"two signed messages at one stamp", sameStamp},
		{"answered requests pushed out", r.seen.tick > uint64(r.seen.max)},
		{"answers signed and waiting", signedWaiting > 0 && signedDone > 0},
		{"hints pushed out and re-put", r.hints.tick > 2*8+64 && len(r.hints.order) < int(r.hints.tick)-2*8-64 && stale(r.hints.order, r.hints.len())},
		{"sightings pushed out", r.sightings.tick > 8},
		{"zone members who left", len(r.zones["research-hub"].members) >= 3},
		{"zones' memories of joins", len(r.joins) == 2},
		{"mentors, one with a report", len(r.mentors) >= 3 && r.mentors["agent://m2.local"].Report != nil},
		{"unnamed syncs", r.unnamedSyncs["registry://stranger.local"] == 2},
		{"a refusal", r.refusedID != ""},
		{"outbox replies", len(o.order) > 1000 && len(o.refusals) > 0},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("the script's state lacks %s", c.what)
		}
	}
}

// restoreFolds saves a's registry and out, and loads them into fresh
// folds under cfg with an outbox of their own, failing the test on an
// error; both are compared with the saved ones (compareLarge).
func restoreFolds(t *testing.T, cfg RegistryConfig, a *Registry, out *Outbox, shrink bool) (*Registry, *Outbox) {
	t.Helper()
	o := NewOutbox()
	cfg.Outbox = o
	b := NewFolds(cfg).Registry
	if shrink {
		shrinkMemories(b)
	}
	if err := loadRegistry(b, saveRegistry(t, a)); err != nil {
		t.Fatalf("Registry.LoadState: %v", err)
	}
	if err := loadOutbox(o, b, saveOutbox(t, out)); err != nil {
		t.Fatalf("Outbox.LoadState: %v", err)
	}
	compareLarge(t, "after the restore", a, b)
	return b, o
}

// compareLarge is compareRegistries for a registry whose zones remember
// tens of thousands of joins, and whose outbox holds as many replies:
// statetest.Diff takes some ten seconds over those, so they are compared
// with reflect.DeepEqual, which compares unexported fields too and tells
// nil from empty, and the replies' signatures (whose func it cannot
// compare) by what they sign.
func compareLarge(t *testing.T, when string, want, got *Registry) {
	t.Helper()
	if !reflect.DeepEqual(want.joins, got.joins) {
		t.Fatalf("%s, the zones' memories of joins differ", when)
	}
	compareOutboxes(t, when, want.cfg.Outbox, got.cfg.Outbox)
	compareRegistries(t, when, want, got, "Registry.joins", "RegistryConfig.Outbox")
}
