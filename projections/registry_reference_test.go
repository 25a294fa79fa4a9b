package projections

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aglx/ledger/protocol"
)

// referenceZoneSecret is the zone secret of protocol's signature goldens
// (testdata/signatures), whose zone-join case is the reference's example
// 30 with a real hmac-sha256 signature.
var referenceZoneSecret = []byte("AGLX test zone secret, not real")

// TestReferenceExamples applies every registry and security example of the
// reference, in order, to a node named as the reference's registry, and
// checks the reply each gets. Examples addressed to someone else get no
// reply from the registry (the bridge acknowledges them with 202); those
// with a placeholder signature get a refusal that says so. Variants with
// real signatures show the replies the reference names.
func TestReferenceExamples(t *testing.T) {
	reputation := map[string]float64{}
	h := newHarness(t, func(c *RegistryConfig) {
		c.Zones = []Zone{{ID: "research-hub", Secret: referenceZoneSecret, MinReputation: ZoneMinReputationDefault, Role: ZoneRoleDefault}}
		c.Reputation = func(uri string) float64 {
			if v, ok := reputation[uri]; ok {
				return v
			}
			return ReputationDefault
		}
	})
	at := func(hhmmss string) time.Time {
		tm, err := time.Parse(time.RFC3339, "2025-10-29T"+hhmmss+"Z")
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	ref := func(name string) func() *protocol.Frame {
		return func() *protocol.Frame { return readReference(t, name) }
	}
	withoutSignature := func(name string) func() *protocol.Frame {
		return func() *protocol.Frame {
			f := readReference(t, name)
			canon, err := protocol.Canonical(f.Body) // drops the signature member
			if err != nil {
				t.Fatal(err)
			}
			f.Body = canon
			return f
		}
	}
	realHMAC := func() *protocol.Frame {
		f := readReference(t, "30")
		sig, err := os.ReadFile(filepath.Join("..", "testdata", "signatures", "zone-join", "hmac-sha256.sig"))
		if err != nil {
			t.Fatal(err)
		}
		if f.Body, err = protocol.SetSignature(f.Body, strings.TrimSpace(string(sig))); err != nil {
			t.Fatal(err)
		}
		return f
	}
	register51 := func() *protocol.Frame {
		return frame("agent://node51.local", testNode, protocol.TypeRegistryUpdate, `{"agent_name":"Node51","status":"READY"}`)
	}
	steps := []struct {
		name   string
		frame  func() *protocol.Frame
		at     time.Time
		before func()
		typ    string // "" means no reply
		status protocol.Status
		says   string // the reply body contains this
	}{
		{name: "08 registry.update, placeholder signature", frame: ref("08"), at: at("18:45:10"),
			typ: protocol.TypeError, status: protocol.StatusUnauthorized, says: "placeholder"},
		{name: "08 registry.update, unsigned", frame: withoutSignature("08"), at: at("18:45:10"),
			typ: protocol.TypeRegistryAck, status: protocol.StatusOK, says: `"ttl":3600`},
		{name: "09 registry.ack is the node's own", frame: ref("09"), at: at("18:45:11")},
		{name: "10 registry.fetch", frame: ref("10"), at: at("18:50:00"),
			typ: protocol.TypeRegistryList, status: protocol.StatusOK, says: `"agent_uri":"agent://node42.local"`},
		{name: "11 registry.list is for node17", frame: ref("11"), at: at("18:50:01")},
		{name: "12 registry.sync is for registry://backup.local", frame: ref("12"), at: at("18:55:00")},
		{name: "13 registry.exchange is between agents", frame: ref("13"), at: at("18:56:00")},
		{name: "14 agent.announce is never answered", frame: ref("14"), at: at("18:57:00")},
		{name: "25 mentor.register", frame: ref("25"), at: at("19:20:00"), typ: protocol.TypeAck, status: protocol.StatusOK},
		{name: "26 mentor.report", frame: ref("26"), at: at("19:27:05"), typ: protocol.TypeAck, status: protocol.StatusOK},
		{name: "27 auth.request, placeholder key and signature", frame: ref("27"), at: at("19:38:02"),
			typ: protocol.TypeAuthResponse, status: protocol.StatusUnauthorized, says: "placeholder"},
		// The edge refuses it first (403: a frame in the node's name);
		// the fold refuses its placeholder signature as it would anyone's.
		{name: "28 auth.response in the node's name", frame: ref("28"), at: at("19:38:03"),
			typ: protocol.TypeError, status: protocol.StatusUnauthorized, says: "placeholder"},
		{name: "29 key.rotate without a bound key", frame: ref("29"), at: at("19:40:18"),
			typ: protocol.TypeError, status: protocol.StatusUnauthorized, says: "auth.request"},
		{name: "30 zone.join, placeholder hmac", frame: ref("30"), at: at("19:43:05"),
			typ: protocol.TypeZoneDeny, status: protocol.StatusUnauthorized, says: "placeholder"},
		{name: "node51 registers", frame: register51, at: at("19:43:06"), typ: protocol.TypeRegistryAck, status: protocol.StatusOK},
		{name: "30 zone.join, real hmac, reputation 0.5", frame: realHMAC, at: at("19:43:07"),
			typ: protocol.TypeZoneDeny, status: protocol.StatusForbidden, says: "Reputation below required threshold (0.6)"},
		{name: "30 zone.join, real hmac, replayed", frame: realHMAC, at: at("19:43:08"),
			typ: protocol.TypeZoneDeny, status: protocol.StatusConflict, says: "answered before"},
		{name: "31 zone.confirm is the node's own", frame: ref("31"), at: at("19:44:00")},
		{name: "32 zone.deny is the node's own", frame: ref("32"), at: at("19:44:42")},
		{name: "33 zone.leave", frame: ref("33"), at: at("19:46:00"), typ: protocol.TypeAck, status: protocol.StatusOK},
	}
	for _, s := range steps {
		if s.before != nil {
			s.before()
		}
		_, rep, ok := h.apply(s.frame(), s.at)
		if ok {
			t.Logf("%s: %s %d %s", s.name, rep.Type, rep.Status, rep.Body)
		}
		switch {
		case s.typ == "" && ok:
			t.Errorf("%s: reply %s %d %s, want none", s.name, rep.Type, rep.Status, rep.Body)
		case s.typ != "" && !ok:
			t.Errorf("%s: no reply, want %s %d", s.name, s.typ, s.status)
		case s.typ != "" && (rep.Type != s.typ || rep.Status != s.status):
			t.Errorf("%s: reply %s %d %s, want %s %d", s.name, rep.Type, rep.Status, rep.Body, s.typ, s.status)
		case s.says != "":
			mustContain(t, s.name+": reply body", string(rep.Body), s.says)
		}
	}

	// The state shows what the examples said. Node42 registered at 18:45:10
	// with a ttl of an hour, so by 19:46 (event time) it has expired.
	if d, ok := h.r.Agent("agent://node42.local"); !ok || d.Name != "Node42" || d.Port != 2594 || d.Status != StatusExpired {
		t.Errorf("Agent(node42) = %+v, %v; want Node42 on port 2594, EXPIRED", d, ok)
	}
	if d, _ := h.r.Agent("agent://node99.local"); d.Registered || d.Hint == nil || d.Hint.Status != "BUSY" || d.Hint.ReportedBy != "agent://node23.local" {
		t.Errorf("Agent(node99) = %+v; want only a hint, BUSY, from node23", d)
	}
	if d, _ := h.r.Agent("agent://node15.local"); d.Registered || d.Sighting == nil || d.Sighting.Name != "Node15" {
		t.Errorf("Agent(node15) = %+v; want only a sighting of Node15", d)
	}
	ms := h.r.Mentors()
	if len(ms) != 1 || ms[0].Report == nil || ms[0].Report.CreditsEarned != "52.5" || ms[0].Report.SessionsTotal != 34 {
		t.Errorf("Mentors() = %+v; want Mentor01 with its report", ms)
	}

	// With enough reputation, a fresh join (the reference's example, re-signed
	// at a later time) is confirmed.
	reputation["agent://node51.local"] = 0.8
	f := frame("agent://node51.local", testNode, protocol.TypeZoneJoin,
		`{"zone_id":"research-hub","agent_id":"node51","capabilities":["nlp","data.analyze"],"timestamp":"2025-10-29T19:50:00Z"}`)
	rep := h.mustReply(hmacSigned(t, referenceZoneSecret, f), at("19:50:00"), protocol.TypeZoneConfirm, protocol.StatusOK)
	if role := str(t, rep.Body, "role"); role != "member" {
		t.Errorf("zone.confirm role = %q, want member", role)
	}

	// Example 12, at the registry it is addressed to: from a peer the
	// operator did not name (--sync-from), refused 403; from one it did,
	// still refused, 401, since it is unsigned and the peer's key is not
	// bound there. Nothing merged either way (a signed sync from a named,
	// bound peer is merged: TestSyncMerge).
	for _, tc := range []struct {
		syncFrom []string
		status   protocol.Status
	}{
		{nil, protocol.StatusForbidden},
		{[]string{"registry://main.local"}, protocol.StatusUnauthorized},
	} {
		backup := newHarness(t, func(c *RegistryConfig) { c.NodeURI, c.SyncFrom = "registry://backup.local", tc.syncFrom })
		backup.mustReply(readReference(t, "12"), at("18:55:00"), protocol.TypeError, tc.status)
		if d, ok := backup.r.Agent("agent://node42.local"); ok {
			t.Errorf("backup (sync from %v) Agent(node42) = %+v; want nothing from an unsigned sync", tc.syncFrom, d)
		}
	}
}
