package projections

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/protocol"
)

func TestParseZones(t *testing.T) {
	secretHex := hex.EncodeToString([]byte("sixteen bytes!!!"))
	secretB64 := "base64:" + base64.StdEncoding.EncodeToString([]byte("sixteen bytes!!!"))
	tests := []struct {
		name    string
		in      string
		want    []Zone
		wantErr string
	}{
		{name: "hex, defaults", in: `{"zones":[{"id":"z1","secret":"` + secretHex + `"}]}`,
			want: []Zone{{ID: "z1", Secret: []byte("sixteen bytes!!!"), MinReputation: 0.6}}},
		{name: "base64, explicit", in: `{"zones":[{"id":"z1","secret":"` + secretB64 + `","min_reputation":0,"role":"elder"}]}`,
			want: []Zone{{ID: "z1", Secret: []byte("sixteen bytes!!!"), MinReputation: 0, Role: "elder"}}},
		{name: "no zones", in: `{"zones":[]}`, want: []Zone{}},
		{name: "duplicate id", in: `{"zones":[{"id":"z","secret":"` + secretHex + `"},{"id":"z","secret":"` + secretHex + `"}]}`, wantErr: "twice"},
		{name: "short secret", in: `{"zones":[{"id":"z","secret":"0011"}]}`, wantErr: "at least 16"},
		{name: "secret neither hex nor base64:", in: `{"zones":[{"id":"z","secret":"not hex at all"}]}`, wantErr: "hex digits"},
		{name: "bad base64", in: `{"zones":[{"id":"z","secret":"base64:!!"}]}`, wantErr: "base64"},
		{name: "min above 1", in: `{"zones":[{"id":"z","secret":"` + secretHex + `","min_reputation":1.5}]}`, wantErr: "from 0 to 1"},
		{name: "min below 0", in: `{"zones":[{"id":"z","secret":"` + secretHex + `","min_reputation":-0.1}]}`, wantErr: "from 0 to 1"},
		{name: "misspelt member", in: `{"zones":[{"id":"z","secret":"` + secretHex + `","min_reputaton":0.9}]}`, wantErr: "unknown field"},
		{name: "empty id", in: `{"zones":[{"id":"","secret":"` + secretHex + `"}]}`, wantErr: "visible ASCII"},
		{name: "id with a space", in: `{"zones":[{"id":"a b","secret":"` + secretHex + `"}]}`, wantErr: "visible ASCII"},
		{name: "two values", in: `{"zones":[]} {}`, wantErr: "more than one"},
		{name: "not JSON", in: `zones: []`, wantErr: "zones:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseZones([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseZones = %v, want an error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("ParseZones = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	good := RegistryConfig{NodeURI: testNode, NodeKey: nodeKey, Zones: testZonesDefault, TokenKey: testTokenKey}
	tests := []struct {
		name string
		edit func(*RegistryConfig)
		want string
	}{
		{"good", func(*RegistryConfig) {}, ""},
		{"zones without a token key", func(c *RegistryConfig) { c.TokenKey = nil }, "token key"},
		{"no node key", func(c *RegistryConfig) { c.NodeKey = nil }, "node's key"},
		{"public key only, answering no one", func(c *RegistryConfig) { c.NodeKey, c.NodePublicKey = nil, nodeKey.Public() }, ""},
		{"public key only, with an outbox", func(c *RegistryConfig) {
			c.NodeKey, c.NodePublicKey, c.Outbox = nil, nodeKey.Public(), NewOutbox()
		}, "required to sign auth.response"},
		{"URI not canonical", func(c *RegistryConfig) { c.NodeURI = "registry://Global.aglx.net" }, "canonically"},
		{"window too long", func(c *RegistryConfig) { c.SignatureWindow = 2 * time.Hour }, "window"},
		{"short zone secret", func(c *RegistryConfig) { c.Zones = []Zone{{ID: "z", Secret: []byte("short")}} }, "secret"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good
			tt.edit(&c)
			err := c.Validate()
			if (err == nil) != (tt.want == "") || (err != nil && !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("Validate() = %v, want %q", err, tt.want)
			}
		})
	}
}

// TestZoneJoinChecks checks the order of zone.join's checks and that the
// snapshot holds neither a zone secret nor a session token.
func TestZoneJoinChecks(t *testing.T) {
	const carol = "agent://carol.local"
	h := newHarness(t)
	at := func(d time.Duration) time.Time { return regT0.Add(d) }
	join := func(secret []byte, when time.Time) *protocol.Frame {
		return hmacSigned(t, secret, frame(carol, testNode, protocol.TypeZoneJoin,
			fmt.Sprintf(`{"zone_id":"research-hub","agent_id":"c","timestamp":%q}`, ts(when))))
	}
	// Unregistered: the HMAC is checked first, then registration.
	h.mustReply(join(testZoneSecretB, at(0)), at(0), protocol.TypeZoneDeny, protocol.StatusUnauthorized)
	rep := h.mustReply(join(testZoneSecretA, at(time.Second)), at(time.Second), protocol.TypeZoneDeny, protocol.StatusForbidden)
	mustContain(t, "reason", string(rep.Body), "Agent not registered")
	// Registered with a ttl of 60 s, then expired.
	h.register(carol, 60, at(2*time.Second))
	rep = h.mustReply(join(testZoneSecretA, at(2*time.Minute)), at(2*time.Minute), protocol.TypeZoneDeny, protocol.StatusForbidden)
	mustContain(t, "reason", string(rep.Body), "expired")
	// Stale, then admitted.
	h.register(carol, 3600, at(3*time.Minute))
	h.mustReply(join(testZoneSecretA, at(-3*time.Minute)), at(3*time.Minute), protocol.TypeZoneDeny, protocol.StatusUnauthorized)
	ev, rep, _ := h.apply(join(testZoneSecretA, at(4*time.Minute)), at(4*time.Minute))
	if rep.Type != protocol.TypeZoneConfirm {
		t.Fatalf("zone.join: %s %s, want zone.confirm", rep.Type, rep.Body)
	}
	token := str(t, rep.Body, "session_token")
	if got, want := str(t, rep.Body, "expires"), ts(at(4*time.Minute).Add(ZoneSessionDuration)); got != want {
		t.Errorf("expires = %q, want %q", got, want)
	}

	// The token is derived again on replay, and stored nowhere.
	r2 := NewRegistry(func() RegistryConfig { c := h.cfg; c.Outbox = NewOutbox(); return c }())
	for _, e := range h.events {
		r2.Apply(e)
	}
	if again, ok, _ := r2.cfg.Outbox.Take(ev.Seq); !ok || str(t, again.Body, "session_token") != token {
		t.Errorf("replayed zone.confirm = %s, want the same token %s", again.Body, token)
	}
	snap := h.snapshot()
	forbidden := map[string][]byte{"session token": []byte(token), "token hex": []byte(strings.TrimPrefix(token, sessionTokenPrefix))}
	for _, secret := range [][]byte{testZoneSecretA, testZoneSecretB, testTokenKey} {
		forbidden["secret "+string(secret)] = secret
		forbidden["hex of "+string(secret)] = []byte(hex.EncodeToString(secret))
		forbidden["base64 of "+string(secret)] = []byte(base64.StdEncoding.EncodeToString(secret))
	}
	for what, b := range forbidden {
		if bytes.Contains(snap, b) {
			t.Errorf("Snapshot contains the %s", what)
		}
	}
	if !bytes.Contains(snap, []byte(ev.ID)) {
		t.Error("Snapshot lacks the join's event id, from which the token is derived")
	}
	if v, _ := h.r.Zone("research-hub"); v.MinReputation != 0.5 || len(v.Members) != 1 {
		t.Errorf("Zone(research-hub) = %+v", v)
	}
	if _, ok := h.r.Zone("nowhere"); ok {
		t.Error("Zone(nowhere) found")
	}
	if ids := h.r.ZoneIDs(); fmt.Sprint(ids) != "[research-hub strict-zone]" {
		t.Errorf("ZoneIDs() = %v", ids)
	}
	// The session ends with its expiry, in event time.
	h.register("agent://later.local", 60, at(4*time.Minute).Add(ZoneSessionDuration))
	if h.r.ValidSession("research-hub", carol, token) {
		t.Error("the session is valid after it expired")
	}
}

// TestZoneJoinReplayOutlivesAFullAnswerMemory: answered auth.requests
// fill a bounded memory that anyone with a key can fill; a zone.join
// remembered there was pushed out within its window, and a replay of it
// got a fresh session token. Joins are remembered apart.
func TestZoneJoinReplayOutlivesAFullAnswerMemory(t *testing.T) {
	const carol = "agent://carol.local"
	h := newHarness(t)
	at := func(d time.Duration) time.Time { return regT0.Add(d) }
	h.register(carol, 3600, at(0))
	join := hmacSigned(t, testZoneSecretA, frame(carol, testNode, protocol.TypeZoneJoin,
		fmt.Sprintf(`{"zone_id":"research-hub","agent_id":"c","timestamp":%q}`, ts(at(time.Second)))))
	h.mustReply(join, at(time.Second), protocol.TypeZoneConfirm, protocol.StatusOK)
	// As many answered auth.requests as the memory holds, within the
	// window (remembered as the fold remembers them).
	for i := range seenOutcomesMax {
		e := &Event{Envelope: &events.Envelope{Seq: uint64(1_000_000 + i), Type: protocol.TypeAuthRequest}}
		h.r.remember(h.r.seen, fmt.Sprint("flood-", i), e, Reply{Type: protocol.TypeAuthResponse, Status: protocol.StatusOK})
	}
	h.mustReply(join, at(2*time.Second), protocol.TypeZoneDeny, protocol.StatusConflict)
}

// TestZonePages: a zone's members come a page at a time, in URI order;
// paging by any size shows each member once, and no one who left. One
// answer held them all, however many a zone had; then every page sorted
// all members on the fold's lock. Then a page walked every agent that had
// ever left the zone, under that lock (helper-98): the set a page walks
// now holds the members and no one else, whatever came and went, and a
// replay folds to the same snapshot and the same pages.
func TestZonePages(t *testing.T) {
	type step struct {
		agent int
		leave bool
	}
	const departedMany = 2_000 // agents that joined and left
	many := func(stay ...int) []step {
		var steps []step
		for i := range departedMany {
			steps = append(steps, step{agent: 10 + i}, step{agent: 10 + i, leave: true})
		}
		for _, i := range stay {
			steps = append(steps, step{agent: i})
		}
		return steps
	}
	tests := []struct {
		name  string
		steps []step // in order; each agent is registered before its first step
		want  []int  // the members at the end
	}{
		{"ordinary", []step{{3, false}, {0, false}, {4, false}, {1, false}, {2, false}, {5, false}, // joining out of order
			{2, true},             // gone
			{4, true}, {4, false}, // gone, and back
		}, []int{0, 1, 3, 4, 5}},
		{"empty", nil, nil},
		{"all left", []step{{1, false}, {2, false}, {1, true}, {2, true}}, nil},
		{"a leave of one not a member", []step{{1, false}, {2, true}}, []int{1}},
		{"one agent in and out many times", func() []step {
			steps := []step{{1, false}}
			for range 300 {
				steps = append(steps, step{7, false}, step{7, true})
			}
			return steps
		}(), []int{1}},
		{"thousands joined and left, among members", many(0, 5, 999, 1500, 2009), []int{0, 5, 999, 1500, 2009}},
		{"thousands joined and left, no one stays", many(), nil},
		{"thousands joined, then most left", func() []step {
			var steps []step
			for i := range departedMany {
				steps = append(steps, step{agent: 10 + i})
			}
			for i := range departedMany {
				if i%500 != 7 { // m17, m517, m1017, m1517 stay
					steps = append(steps, step{agent: 10 + i, leave: true})
				}
			}
			return steps
		}(), []int{17, 517, 1017, 1517}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			at := func(d time.Duration) time.Time { return regT0.Add(d) }
			uri := func(i int) string { return fmt.Sprintf("agent://m%d.local", i) }
			registered := map[int]bool{}
			for n, s := range tt.steps {
				when := time.Minute + time.Duration(n)*time.Second // a fresh stamp for every join
				if !registered[s.agent] {
					h.register(uri(s.agent), 3600, at(when))
					registered[s.agent] = true
				}
				if s.leave {
					h.mustReply(frame(uri(s.agent), testNode, protocol.TypeZoneLeave,
						fmt.Sprintf(`{"zone_id":"research-hub","timestamp":%q}`, ts(at(when)))), at(when), protocol.TypeAck, protocol.StatusOK)
					continue
				}
				h.mustReply(hmacSigned(t, testZoneSecretA, frame(uri(s.agent), testNode, protocol.TypeZoneJoin,
					fmt.Sprintf(`{"zone_id":"research-hub","agent_id":"m%d","timestamp":%q}`, s.agent, ts(at(when))))),
					at(when), protocol.TypeZoneConfirm, protocol.StatusOK)
			}
			members := []string{}
			for _, i := range tt.want {
				members = append(members, uri(i))
			}
			slices.Sort(members) // by URI: m1500 before m5

			z := h.r.zones["research-hub"]
			var walked []string
			z.listed.after("", func(k string) bool { walked = append(walked, k); return true })
			if !slices.Equal(walked, members) || len(z.members) != len(members) {
				t.Fatalf("a page walks %d URIs (first %v) for %d members %v; want the members alone",
					len(walked), first3(walked), len(members), first3(members))
			}
			checkChunks(t, &z.listed)

			replayed := h.replay()
			again, err := replayed.Snapshot()
			if err != nil || !bytes.Equal(h.snapshot(), again) {
				t.Fatalf("a replay folds to another snapshot (%v)", err)
			}
			for _, r := range []*Registry{h.r, replayed} {
				for _, limit := range []int{1, 2, 3, 5, 0} {
					if got := pageAll(t, r, limit); !slices.Equal(got, members) {
						t.Errorf("paging by %d: %v, want %v", limit, first3(got), first3(members))
					}
				}
			}
		})
	}
}

// pageAll pages through research-hub by limit, each page after the last
// URI of the one before, and returns the URIs in the order they came.
func pageAll(t *testing.T, r *Registry, limit int) []string {
	t.Helper()
	got := []string{}
	for after := ""; ; {
		v, ok := r.ZonePage("research-hub", after, limit)
		if !ok {
			t.Fatal("no zone research-hub")
		}
		if n := max(limit, 0); (n > 0 && len(v.Members) > n) || len(v.Members) > ZoneMembersPageMax {
			t.Fatalf("a page of %d holds %d members", limit, len(v.Members))
		}
		if len(v.Members) == 0 {
			return got
		}
		for _, m := range v.Members {
			if m.Role != "member" || !m.Active {
				t.Errorf("member %+v: want role member, active", m)
			}
			got = append(got, m.AgentURI)
		}
		after = v.Members[len(v.Members)-1].AgentURI
	}
}

// TestZoneJoinReplayInAnotherLayout: the replay memory named a join by its
// exact bytes, while the HMAC covers its canonical form; the same join
// sent again with one more space, or its members in another order, was
// not recognised, got a fresh session token for the agent, and ended the
// agent's own session.
func TestZoneJoinReplayInAnotherLayout(t *testing.T) {
	const carol = "agent://carol.local"
	h := newHarness(t)
	at := func(d time.Duration) time.Time { return regT0.Add(d) }
	h.register(carol, 3600, at(0))
	join := hmacSigned(t, testZoneSecretA, frame(carol, testNode, protocol.TypeZoneJoin,
		fmt.Sprintf(`{"zone_id":"research-hub","agent_id":"c","timestamp":%q}`, ts(at(time.Second)))))
	first := h.mustReply(join, at(time.Second), protocol.TypeZoneConfirm, protocol.StatusOK)
	token := str(t, first.Body, "session_token")
	layouts := map[string][]byte{
		"the same bytes":   join.Body,
		"one more space":   append([]byte("{ "), bytes.TrimPrefix(join.Body, []byte("{"))...),
		"a trailing space": append(bytes.TrimSuffix(append([]byte(nil), join.Body...), []byte("}")), []byte(" }")...),
	}
	for name, body := range layouts {
		replay := frame(carol, testNode, protocol.TypeZoneJoin, "")
		replay.Body = body
		_, rep, _ := h.apply(replay, at(3*time.Second))
		if rep.Type == protocol.TypeZoneConfirm && str(t, rep.Body, "session_token") != token {
			t.Errorf("%s: the replay got a fresh session token: %s", name, rep.Body)
		}
		if !h.r.ValidSession("research-hub", carol, token) {
			t.Fatalf("%s: the replay ended carol's own session", name)
		}
	}
}

// TestZoneJoinCannotTakeAKeyedAgentsSession: the zone's secret is shared
// by its members, so any member could send a zone.join FROM another agent,
// take that agent's session token and end its session. Once the agent has
// a key, a join does not replace its live session; a signed zone.leave
// ends it first.
func TestZoneJoinCannotTakeAKeyedAgentsSession(t *testing.T) {
	const carol = keyedCarolURI
	h, k, at := keyedCarol(t)
	join := func(when time.Duration) *protocol.Frame {
		return hmacSigned(t, testZoneSecretA, frame(carol, testNode, protocol.TypeZoneJoin,
			fmt.Sprintf(`{"zone_id":"research-hub","agent_id":"x","timestamp":%q}`, ts(at(when)))))
	}
	token := str(t, h.mustReply(join(2*time.Second), at(2*time.Second), protocol.TypeZoneConfirm, protocol.StatusOK).Body, "session_token")
	h.mustReply(join(3*time.Second), at(3*time.Second), protocol.TypeZoneDeny, protocol.StatusConflict)
	if !h.r.ValidSession("research-hub", carol, token) {
		t.Fatal("a second join ended carol's session")
	}
	// Carol herself leaves, signed, and joins again.
	h.mustReply(signed(t, k, frame(carol, testNode, protocol.TypeZoneLeave,
		fmt.Sprintf(`{"zone_id":"research-hub","timestamp":%q}`, ts(at(4*time.Second))))), at(4*time.Second), protocol.TypeAck, protocol.StatusOK)
	h.mustReply(join(5*time.Second), at(5*time.Second), protocol.TypeZoneConfirm, protocol.StatusOK)
}

// FuzzParseZones: whatever a zone file holds, ParseZones returns zones
// that pass the same checks as configured ones, or an error; it never
// panics; a file it takes is read the same way every time (ZonesDigest is
// what a start compares with the last start's).
func FuzzParseZones(f *testing.F) {
	f.Add([]byte(`{"zones": [{"id": "research-hub", "secret": "000102030405060708090a0b0c0d0e0f", "min_reputation": 0.6, "role": "member"}]}`))
	f.Add([]byte(`{"zones": [{"id": "a", "secret": "base64:AAECAwQFBgcICQoLDA0ODw=="}, {"id": "b", "secret": "101112131415161718191a1b1c1d1e1f", "min_reputation": 0}]}`))
	f.Add([]byte(`{"zones": []}`))
	f.Add([]byte(`{"zones": [{"id": "a", "secret": "00", "min_reputation": 1.5}]}`))
	f.Add([]byte(`{"zones": null} {}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		zones, err := ParseZones(b)
		if err != nil {
			if zones != nil {
				t.Fatalf("ParseZones failed (%v) and returned zones too", err)
			}
			return
		}
		if err := checkZones(zones); err != nil {
			t.Fatalf("ParseZones took %q, whose zones checkZones refuses: %v", b, err)
		}
		again, err := ParseZones(b)
		if err != nil || ZonesDigest(again) != ZonesDigest(zones) {
			t.Fatalf("the same file read twice gave other zones: %v", err)
		}
	})
}
