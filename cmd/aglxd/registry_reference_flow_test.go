package main

// The reference's registry and security examples against a node named as
// the reference's registry (the rf helpers are in registry_flow_test.go).

import (
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/aglx/ledger/bridge"
	"github.com/aglx/ledger/protocol"
)

// TestRegistryReferenceExamples sends the reference's registry and security
// examples (08-14, 25-33) in order to a node named as the reference's
// registry: security ones over TLS, agent.announce over UDP, the rest over
// TCP. Each gets the reply the reference names; placeholder signatures get
// a refusal that says what is wrong with the signature. Examples addressed
// to someone else are recorded (ack 202 when the relay delivers their
// TYPE, else 200), and are sent again addressed to this registry where the
// reference names the registry's answer. The registry's own answers in
// the reference come FROM this node's name, and are refused before they
// are recorded (403): the node records none of its replies, and a
// zone.confirm carries a session token.
func TestRegistryReferenceExamples(t *testing.T) {
	const node = "registry://global.aglx.net"
	secret := []byte("reference zone secret, 32 bytes!")
	m := rfStartNode(t, t.TempDir(), node, rfZone{ID: "research-hub", Secret: hex.EncodeToString(secret)})
	tcp, sec := dial(t, m.TCPAddr()), dialTLS(t, m)
	ref := func(num int) []byte { b, _ := rfRef(t, num); return b }
	readdressed := func(num int) any { _, f := rfRef(t, num); f.Set("TO", node); return f }
	_, unsigned08 := rfRef(t, 8)
	unsigned08.Body, _ = protocol.Canonical(unsigned08.Body) // drops the signature member
	join51 := rfHMAC(t, secret, rfFrame("agent://node51.local", node, "zone.join", fmt.Sprintf(
		`{"zone_id":"research-hub","agent_id":"node51","capabilities":["nlp","data.analyze"],"timestamp":%q}`, rfStamp(0))))
	register51 := rfFrame("agent://node51.local", node, "registry.update", `{"agent_name":"Node51","status":"READY"}`)
	steps := []struct {
		name   string
		conn   *bridge.Client // nil: UDP
		frame  any
		typ    string
		status int
		says   []string // the reply body holds these; a refusal's reason the last
	}{
		{"08 registry.update, placeholder signature", tcp, ref(8), "error", 401, []string{"signature", "placeholder"}},
		{"08 registry.update, unsigned", tcp, unsigned08, "registry.ack", 200, []string{`"ttl":3600`, `"timestamp"`}},
		{"09 registry.ack, for node42", tcp, ref(9), "error", 403, []string{"only the node speaks"}},
		{"10 registry.fetch", tcp, ref(10), "registry.list", 200, []string{`"agent_uri":"agent://node42.local"`}},
		{"11 registry.list, for node17", tcp, ref(11), "error", 403, []string{"only the node speaks"}},
		{"12 registry.sync, for registry://backup.local", tcp, ref(12), "ack", 200, nil},
		// From a peer this node was not told to take syncs from (and whose
		// key is not bound here): refused, merging nothing.
		{"12 registry.sync, to this registry", tcp, readdressed(12), "error", 403, []string{"only from the peers its operator names (aglxd --sync-from)"}},
		{"13 registry.exchange, agent to agent", tcp, ref(13), "ack", 202, nil},
		{"13 registry.exchange, to this registry", tcp, readdressed(13), "registry.ack", 200, nil},
		{"14 agent.announce over UDP", nil, ref(14), "", 0, nil},
		{"25 mentor.register", tcp, ref(25), "ack", 200, nil},
		{"26 mentor.report", tcp, ref(26), "ack", 200, nil},
		{"27 auth.request, placeholder key and signature", sec, ref(27), "auth.response", 401, []string{`"REJECTED"`, "signature", "placeholder"}},
		{"28 auth.response, for node23", sec, ref(28), "error", 403, []string{"only the node speaks"}},
		{"29 key.rotate, no key bound to node17", sec, ref(29), "error", 401, []string{"key", "auth.request"}},
		{"30 zone.join, placeholder hmac", sec, ref(30), "zone.deny", 401, []string{`"zone_id":"research-hub"`, "signature", "placeholder"}},
		{"node51 registers", tcp, register51, "registry.ack", 200, nil},
		{"30 zone.join, real hmac, reputation 0.5", sec, join51, "zone.deny", 403, []string{"Reputation below required threshold (0.6)"}},
		{"31 zone.confirm, for node51", sec, ref(31), "error", 403, []string{"only the node speaks"}},
		{"32 zone.deny, for node51", sec, ref(32), "error", 403, []string{"only the node speaks"}},
		{"33 zone.leave", sec, ref(33), "ack", 200, []string{`"zone_id":"research-hub"`}},
	}
	var last uint64
	var node42ID string
	for _, s := range steps {
		if s.conn == nil {
			rfAnnounce(t, m, s.frame.([]byte), last)
			continue
		}
		if s.status == http.StatusForbidden && strings.Contains(s.says[0], "only the node") {
			// Refused before it was recorded: the reply names no event.
			if s.conn.Write(s.frame.([]byte)) != nil || s.conn.Flush() != nil {
				t.Fatal("writing a frame failed")
			}
			rep, err := s.conn.ReadReply()
			if err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
			if body := rfWant(t, s.name, rep, s.typ, s.status); body["seq"] != nil {
				t.Fatalf("%s: refused, yet recorded: %s", s.name, rep.Body)
			}
			rfSays(t, s.name, string(rep.Body), s.says...)
			continue
		}
		rep, a := rfSend(t, s.conn, s.frame)
		body := rfWant(t, s.name, rep, s.typ, s.status)
		if a.Seq <= last {
			t.Fatalf("%s: seq %d after %d", s.name, a.Seq, last)
		}
		last = a.Seq
		rfSays(t, s.name, string(rep.Body), s.says...)
		if s.status >= 400 {
			rfSays(t, s.name+": the refusal's reason", fmt.Sprint(body["reason"]), s.says[len(s.says)-1])
		}
		if s.typ == "registry.ack" && node42ID == "" {
			if node42ID, _ = body["agent_id"].(string); !rfIsUUIDv8(node42ID) {
				t.Fatalf("%s: agent_id %q is not a version 8 UUID", s.name, node42ID)
			}
		}
		if s.typ == "registry.list" {
			rfSays(t, s.name, string(rep.Body), `"agent_id":"`+node42ID+`"`)
		}
	}

	// What the examples said shows in the HTTP API (indented JSON).
	rfSays(t, "node42", string(rfGetOK(t, m, "/v1/agents/agent/node42.local", last)), `"agent_id": "`+node42ID+`"`, `"source": "self"`)
	rfSays(t, "node99", string(rfGetOK(t, m, "/v1/agents/agent/node99.local", last)), `"registered": false`, `"hint"`, `"status": "BUSY"`)
	rfSays(t, "node15", string(rfGetOK(t, m, "/v1/agents/agent/node15.local", last)), `"registered": false`, `"sighting"`, `"name": "Node15"`, `"transport": "udp"`)
	rfSays(t, "/v1/mentors", string(rfGetOK(t, m, "/v1/mentors", last)), "agent://mentor01.local", `"credits_earned": "52.5"`)
}
