package main

// Acceptance tests of issue 5 (registry, keys, zones, TLS) over real TCP, TLS
// and UDP sockets. Helpers are prefixed rf to keep clear of other test files.

import (
	"bytes"
	"context"
	"crypto"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aglx/ledger/bridge"
	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/protocol"
)

// rfZone is one zone of a test zone file (projections.ParseZones).
type rfZone struct {
	ID     string  `json:"id"`
	Secret string  `json:"secret"`
	MinRep float64 `json:"min_reputation,omitempty"` // 0: the default, 0.6
	Role   string  `json:"role,omitempty"`
}

// rfStartNode runs a node as startNode does, named name ("" keeps the
// default), with zones written to a zone file.
func rfStartNode(t *testing.T, dir, name string, zones ...rfZone) *Main {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Relay = false // tests register addresses off loopback; only the relay test relays
	cfg.DataDir = dir
	cfg.Listen, cfg.UDP, cfg.HTTP, cfg.NATSListen, cfg.TLSListen = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	if name != "" {
		cfg.Name = name
	}
	if len(zones) > 0 {
		b, _ := json.Marshal(map[string][]rfZone{"zones": zones})
		cfg.Zones = filepath.Join(t.TempDir(), "zones.json")
		if err := os.WriteFile(cfg.Zones, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return rfRunNode(t, cfg)
}

// rfRunNode starts a node with cfg and stops it when the test ends.
func rfRunNode(t *testing.T, cfg Config) *Main {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	m := NewMain(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := m.Run(context.Background()); err != nil {
		m.Close(context.Background())
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return m
}

// rfAgent is an agent with a signing key.
type rfAgent struct {
	uri string
	key crypto.Signer
}

func rfNewKey(t *testing.T, alg string) crypto.Signer {
	t.Helper()
	k, err := protocol.GenerateKey(alg)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func rfPub(k crypto.Signer) string { s, _ := protocol.MarshalPublicKey(k.Public()); return s }

func rfFrame(from, to, typ, body string) *protocol.Frame {
	return &protocol.Frame{Transport: protocol.TransportTCP, Body: []byte(body), Headers: []protocol.Header{
		{Name: "FROM", Value: from}, {Name: "TO", Value: to}, {Name: "TYPE", Value: typ}, {Name: "CONTENT-TYPE", Value: "application/json"}}}
}

func rfSign(t *testing.T, k crypto.Signer, f *protocol.Frame) *protocol.Frame {
	t.Helper()
	if err := protocol.SignFrame(k, f); err != nil {
		t.Fatal(err)
	}
	return f
}

func rfHMAC(t *testing.T, secret []byte, f *protocol.Frame) *protocol.Frame {
	t.Helper()
	sig, err := protocol.SignHMAC(secret, f.From(), f.To(), f.Type(), f.Value(protocol.HeaderCredits), f.Body)
	if err == nil {
		f.Body, err = protocol.SetSignature(f.Body, sig)
	}
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// rfStamp is the wall clock moved by d, as a message timestamp.
func rfStamp(d time.Duration) string { return time.Now().Add(d).UTC().Format(time.RFC3339) }

// rfRef is reference example number num, as bytes and decoded.
func rfRef(t *testing.T, num int) ([]byte, *protocol.Frame) {
	t.Helper()
	b := referenceFiles(t)[num-1]
	f, err := protocol.NewDecoder(bytes.NewReader(b), protocol.DecoderOptions{}).Decode()
	if err != nil {
		t.Fatal(err)
	}
	return b, f
}

// rfSend sends a frame (raw bytes, or a *protocol.Frame to encode) and reads
// the reply to the stored message.
func rfSend(t *testing.T, c *bridge.Client, f any) (*protocol.Frame, ackBody) {
	t.Helper()
	b, ok := f.([]byte)
	if !ok {
		b = protocol.Encode(f.(*protocol.Frame))
	}
	if c.Write(b) != nil || c.Flush() != nil {
		t.Fatal("writing a frame failed")
	}
	return readReply(t, c)
}

// rfWant checks a reply's TYPE and STATUS and returns its body.
func rfWant(t *testing.T, what string, f *protocol.Frame, typ string, status int) map[string]any {
	t.Helper()
	st := f.Value(protocol.HeaderStatus)
	var m map[string]any
	if f.Type() != typ || !strings.HasPrefix(st, strconv.Itoa(status)+" ") || json.Unmarshal(f.Body, &m) != nil {
		t.Fatalf("%s: reply %s %q %s, want %s %d", what, f.Type(), st, f.Body, typ, status)
	}
	return m
}

// rfWithoutEvent is a reply body without the event_id and seq that name
// the message answered, to compare two answers.
func rfWithoutEvent(f *protocol.Frame) map[string]any {
	var m map[string]any
	json.Unmarshal(f.Body, &m)
	delete(m, "event_id")
	delete(m, "seq")
	return m
}

// rfSays fails unless s holds every one of words, ignoring case.
func rfSays(t *testing.T, what, s string, words ...string) {
	t.Helper()
	for _, w := range words {
		if !strings.Contains(strings.ToLower(s), strings.ToLower(w)) {
			t.Fatalf("%s: %q does not mention %q", what, s, w)
		}
	}
}

func rfIsUUIDv8(id string) bool {
	return len(id) == 36 && id[8] == '-' && id[13] == '-' && id[14] == '8' && id[18] == '-' && id[23] == '-'
}

// rfGet reads an HTTP API path once the projections applied seq (0: no
// wait) and returns the status code and body.
func rfGet(t *testing.T, m *Main, path string, seq uint64) (int, []byte) {
	t.Helper()
	if seq > 0 {
		sep := map[bool]string{false: "?", true: "&"}[strings.Contains(path, "?")]
		path += sep + "seq=" + strconv.FormatUint(seq, 10)
	}
	resp, err := http.Get("http://" + m.HTTPAddr() + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func rfGetOK(t *testing.T, m *Main, path string, seq uint64) []byte {
	t.Helper()
	code, b := rfGet(t, m, path, seq)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, code, b)
	}
	return b
}

// rfAgentURIs lists the URIs GET /v1/agents{query} returns, in order.
func rfAgentURIs(t *testing.T, m *Main, query string, seq uint64) []string {
	t.Helper()
	var v struct {
		Agents []struct {
			AgentURI string `json:"agent_uri"`
		}
	}
	if err := json.Unmarshal(rfGetOK(t, m, "/v1/agents"+query, seq), &v); err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, a := range v.Agents {
		out = append(out, a.AgentURI)
	}
	return out
}

// rfSnapshot is the registry's whole state without its clock: the same
// before and after an event that changed nothing.
func rfSnapshot(t *testing.T, m *Main) (s string) {
	m.runner.View(func(uint64) {
		b, err := m.registry.Snapshot()
		if err != nil {
			t.Error(err)
		}
		s = string(b)
	})
	return s
}

// rfPollUntil checks cond every few milliseconds until it holds, and fails
// the test if it does not within d.
func rfPollUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
	}
}

// rfEnroll registers a (unsigned: it has no key yet) and binds its key over
// TLS. It returns the agent id, the auth.request as sent, and its answer.
func rfEnroll(t *testing.T, m *Main, tcp, sec *bridge.Client, a *rfAgent) (string, []byte, *protocol.Frame) {
	t.Helper()
	rep, _ := rfSend(t, tcp, rfFrame(a.uri, m.cfg.Name, "registry.update", `{"agent_name":"A","status":"READY","ttl":3600}`))
	id, _ := rfWant(t, "register "+a.uri, rep, "registry.ack", 200)["agent_id"].(string)
	auth := protocol.Encode(rfSign(t, a.key, rfFrame(a.uri, m.cfg.Name, "auth.request",
		fmt.Sprintf(`{"agent_id":%q,"public_key":%q,"timestamp":%q}`, id, rfPub(a.key), rfStamp(0)))))
	rep, _ = rfSend(t, sec, auth)
	if got := rfWant(t, "auth.request "+a.uri, rep, "auth.response", 200)["status"]; got != "VERIFIED" {
		t.Fatalf("auth.response status %v, want VERIFIED", got)
	}
	return id, auth, rep
}

// rfAnnounce sends an agent.announce datagram, waits until the registry
// shows the sighting, and checks that no reply came.
func rfAnnounce(t *testing.T, m *Main, frame []byte, after uint64) {
	t.Helper()
	uc, err := net.Dial("udp", m.UDPAddr())
	if err == nil {
		defer uc.Close()
		_, err = uc.Write(frame)
	}
	if err != nil {
		t.Fatal(err)
	}
	rfPollUntil(t, 10*time.Second, "no sighting of node15 after its agent.announce", func() bool {
		code, b := rfGet(t, m, "/v1/agents/agent/node15.local", after)
		return code == http.StatusOK && bytes.Contains(b, []byte(`"sighting"`))
	})
	// A refusal is sent before anything is stored, so any reply is in the
	// socket by now.
	uc.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if n, err := uc.Read(make([]byte, 64<<10)); err == nil {
		t.Fatalf("agent.announce got a %d-byte reply; a broadcast is never answered", n)
	}
}

// TestRegistryFlowWithRealKeys: register, auth (the answer signed with the
// node's key), a signed update, rotate, the old key refused for new
// messages, a zone join confirmed, one denied for low reputation, leave.
func TestRegistryFlowWithRealKeys(t *testing.T) {
	open, strict := []byte("open-lab zone secret for tests!!"), []byte("research-hub zone secret, tests!")
	m := rfStartNode(t, t.TempDir(), "",
		rfZone{ID: "open-lab", Secret: "base64:" + base64.StdEncoding.EncodeToString(open), MinRep: 0.4, Role: "analyst"},
		rfZone{ID: "research-hub", Secret: hex.EncodeToString(strict)}) // min_reputation 0.6 by default
	node := m.cfg.Name
	tcp, sec := dial(t, m.TCPAddr()), dialTLS(t, m)
	alice := "agent://alice.local"
	k1, k2 := rfNewKey(t, protocol.KeyEd25519), rfNewKey(t, protocol.KeyRSA)
	update := func(k crypto.Signer, status string) *protocol.Frame {
		return rfSign(t, k, rfFrame(alice, node, "registry.update",
			fmt.Sprintf(`{"agent_name":"Alice","status":%q,"ttl":3600,"timestamp":%q}`, status, rfStamp(0))))
	}
	detail := func(seq uint64) (d struct {
		AgentID string `json:"agent_id"`
		Status  string
		Keys    []struct {
			Name      string
			KeyID     string `json:"key_id"`
			Current   bool
			RetiredAt string `json:"retired_at"`
		}
	}) {
		if err := json.Unmarshal(rfGetOK(t, m, "/v1/agents/agent/alice.local", seq), &d); err != nil {
			t.Fatal(err)
		}
		return d
	}

	// Register (no key yet, so unsigned) and bind k1.
	rep, _ := rfSend(t, tcp, rfFrame(alice, node, "registry.update", `{"agent_name":"Alice","agent_type":"worker","status":"READY","ttl":3600}`))
	id, _ := rfWant(t, "register", rep, "registry.ack", 200)["agent_id"].(string)
	if !rfIsUUIDv8(id) {
		t.Fatalf("agent_id %q is not a version 8 UUID", id)
	}
	auth, _ := rfSend(t, sec, rfSign(t, k1, rfFrame(alice, node, "auth.request",
		fmt.Sprintf(`{"agent_id":%q,"public_key":%q,"timestamp":%q}`, id, rfPub(k1), rfStamp(0)))))
	body := rfWant(t, "auth.request", auth, "auth.response", 200)
	exp, err := time.Parse(time.RFC3339Nano, fmt.Sprint(body["expires"]))
	if body["status"] != "VERIFIED" || body["trust_level"] == nil || err != nil || exp.Before(time.Now().Add(29*24*time.Hour)) {
		t.Fatalf("auth.response %s, want VERIFIED with a trust_level, expiring in 30 days", auth.Body)
	}
	t.Run("auth.response carries the node's signature", func(t *testing.T) {
		var info struct {
			Name      string
			PublicKey string `json:"public_key"`
		}
		json.Unmarshal(rfGetOK(t, m, "/v1/node", 0), &info)
		pub, err := protocol.ParsePublicKey(info.PublicKey)
		if err != nil || info.Name != node || auth.From() != node || auth.To() != alice {
			t.Fatalf("/v1/node %+v (%v); reply FROM %s TO %s", info, err, auth.From(), auth.To())
		}
		if err := protocol.Verify(pub, auth.From(), auth.To(), auth.Type(), auth.Value(protocol.HeaderCredits), auth.Body); err != nil {
			t.Fatalf("auth.response %s does not verify with the node's key: %v", auth.Body, err)
		}
	})

	// A signed update: k1 now speaks for alice.
	rep, a := rfSend(t, tcp, update(k1, "BUSY"))
	if got := rfWant(t, "signed update", rep, "registry.ack", 200)["agent_id"]; got != id {
		t.Fatalf("agent_id after update %v, want %s", got, id)
	}
	if d := detail(a.Seq); d.Status != "BUSY" || d.AgentID != id {
		t.Fatalf("after the signed update: %+v", d)
	}

	// Rotate to k2 (RSA), signed with k1.
	rep, _ = rfSend(t, sec, rfSign(t, k1, rfFrame(alice, node, "key.rotate", fmt.Sprintf(
		`{"old_key_id":"key-2025-01","new_key_id":"key-2025-10","public_key":%q,"rotation_reason":"Scheduled renewal","timestamp":%q}`,
		rfPub(k2), rfStamp(0)))))
	if got := rfWant(t, "key.rotate", rep, "ack", 200)["key_id"]; got != "key-2025-10" {
		t.Fatalf("key.rotate ack key_id %v, want key-2025-10", got)
	}

	// The old key is refused for new messages; the new one is accepted.
	rep, a = rfSend(t, tcp, update(k1, "IDLE"))
	rfSays(t, "old key", fmt.Sprint(rfWant(t, "update signed with the old key", rep, "error", 401)["reason"]), "signature")
	if d := detail(a.Seq); d.Status != "BUSY" {
		t.Fatalf("a refused update changed the status to %s", d.Status)
	}
	rep, a = rfSend(t, tcp, update(k2, "IDLE"))
	rfWant(t, "update signed with the new key", rep, "registry.ack", 200)
	d := detail(a.Seq)
	if d.Status != "IDLE" || len(d.Keys) != 2 || d.Keys[0].Name != "key-2025-01" || d.Keys[0].Current || d.Keys[0].RetiredAt == "" ||
		d.Keys[1].Name != "key-2025-10" || !d.Keys[1].Current || d.Keys[1].KeyID != protocol.KeyID(k2.Public()) {
		t.Fatalf("after the rotation: %+v", d)
	}

	// Join open-lab (min 0.4): confirmed. Join research-hub (min 0.6): denied.
	join := func(zone string, secret []byte) *protocol.Frame {
		return rfHMAC(t, secret, rfFrame(alice, node, "zone.join", fmt.Sprintf(
			`{"zone_id":%q,"agent_id":%q,"capabilities":["data.analyze"],"timestamp":%q}`, zone, id, rfStamp(0))))
	}
	rep, a = rfSend(t, sec, join("open-lab", open))
	body = rfWant(t, "zone.join open-lab", rep, "zone.confirm", 200)
	if tok, _ := body["session_token"].(string); body["zone_id"] != "open-lab" || body["role"] != "analyst" || !strings.HasPrefix(tok, "ZT-") || body["expires"] == nil {
		t.Fatalf("zone.confirm %s", rep.Body)
	}
	rfSays(t, "/v1/zones/open-lab", string(rfGetOK(t, m, "/v1/zones/open-lab", a.Seq)), `"agent_uri": "agent://alice.local"`)
	if got := rfAgentURIs(t, m, "?zone=open-lab", a.Seq); !reflect.DeepEqual(got, []string{alice}) {
		t.Fatalf("/v1/agents?zone=open-lab = %v", got)
	}
	rep, _ = rfSend(t, sec, join("research-hub", strict))
	body = rfWant(t, "zone.join research-hub", rep, "zone.deny", 403)
	if body["zone_id"] != "research-hub" || body["reason"] != "Reputation below required threshold (0.6)" || body["timestamp"] == nil {
		t.Fatalf("zone.deny %s", rep.Body)
	}

	// Leave, signed with the current key.
	rep, a = rfSend(t, sec, rfSign(t, k2, rfFrame(alice, node, "zone.leave",
		fmt.Sprintf(`{"zone_id":"open-lab","reason":"Voluntary leave","timestamp":%q}`, rfStamp(0)))))
	if got := rfWant(t, "zone.leave", rep, "ack", 200)["zone_id"]; got != "open-lab" {
		t.Fatalf("zone.leave ack zone_id %v", got)
	}
	if got := rfAgentURIs(t, m, "?zone=open-lab", a.Seq); len(got) != 0 {
		t.Fatalf("after leaving, /v1/agents?zone=open-lab = %v", got)
	}
}

// TestRegistryTTLFetchAndRestart: an entry expires at last_seen + ttl in
// event time; registry.fetch since a time lists what changed from then on,
// mode "full" every live entry; a restart replays the same ids and views.
func TestRegistryTTLFetchAndRestart(t *testing.T) {
	secret := []byte("lab zone secret for the ttl test")
	m := rfStartNode(t, t.TempDir(), "", rfZone{ID: "lab", Secret: hex.EncodeToString(secret), MinRep: 0.4})
	node := m.cfg.Name
	tcp, sec := dial(t, m.TCPAddr()), dialTLS(t, m)
	register := func(uri string, ttl int) (id, ts string) {
		rep, _ := rfSend(t, tcp, rfFrame(uri, node, "registry.update", fmt.Sprintf(`{"agent_name":"n","status":"READY","ttl":%d}`, ttl)))
		b := rfWant(t, "register "+uri, rep, "registry.ack", 200)
		return fmt.Sprint(b["agent_id"]), fmt.Sprint(b["timestamp"])
	}
	fetch := func(body string) (map[string]string, string, uint64) {
		rep, a := rfSend(t, tcp, rfFrame("agent://reader.local", node, "registry.fetch", body))
		rfWant(t, "registry.fetch "+body, rep, "registry.list", 200)
		var v struct {
			Entries []struct {
				AgentID  string `json:"agent_id"`
				AgentURI string `json:"agent_uri"`
			}
			Timestamp string
		}
		json.Unmarshal(rep.Body, &v)
		out := map[string]string{}
		for _, e := range v.Entries {
			out[e.AgentURI] = e.AgentID
		}
		return out, v.Timestamp, a.Seq
	}
	const brief, p1, p2 = "agent://brief.local", "agent://p1.local", "agent://p2.local"
	id1, since1 := register(p1, 3600)
	id2, since2 := register(p2, 3600)
	got, listTS, _ := fetch(fmt.Sprintf(`{"mode":"update","since":%q}`, since2))
	if !reflect.DeepEqual(got, map[string]string{p2: id2}) {
		t.Fatalf("fetch since %s: %v, want only p2", since2, got)
	}
	if got, _, _ = fetch(fmt.Sprintf(`{"mode":"update","since":%q}`, since1)); !reflect.DeepEqual(got, map[string]string{p1: id1, p2: id2}) {
		t.Fatalf("fetch since %s: %v, want p1 and p2", since1, got)
	}
	if got, _, _ = fetch(fmt.Sprintf(`{"mode":"update","since":%q}`, listTS)); len(got) != 0 {
		t.Fatalf("fetch since the last list's timestamp %s: %v, want nothing", listTS, got)
	}

	// Wall time alone expires nothing: until an event arrives after
	// last_seen + 1 s, the registry's clock says brief.local is live.
	idBrief, seen := register(brief, 1)
	t0, err := time.Parse(time.RFC3339Nano, seen)
	if err != nil {
		t.Fatal(err)
	}
	rfPollUntil(t, 10*time.Second, "the wall clock never passed the expiry", func() bool {
		if ready := rfAgentURIs(t, m, "?status=READY", 0); !reflect.DeepEqual(ready, []string{brief, p1, p2}) {
			t.Fatalf("with no event after its expiry, READY agents are %v", ready)
		}
		return time.Now().After(t0.Add(1100 * time.Millisecond))
	})
	got, _, seq := fetch(`{"mode":"full"}`)
	if !reflect.DeepEqual(got, map[string]string{p1: id1, p2: id2}) {
		t.Fatalf("fetch full after brief.local expired: %v, want p1 and p2", got)
	}
	if exp := rfAgentURIs(t, m, "?status=EXPIRED", seq); !reflect.DeepEqual(exp, []string{brief}) {
		t.Fatalf("EXPIRED agents %v, want brief.local", exp)
	}
	if ready := rfAgentURIs(t, m, "?status=READY", seq); !reflect.DeepEqual(ready, []string{p1, p2}) {
		t.Fatalf("READY agents %v, want p1 and p2", ready)
	}
	var bd struct {
		Status  string
		History []struct{ At, Status, Cause string }
	}
	json.Unmarshal(rfGetOK(t, m, "/v1/agents/agent/brief.local", seq), &bd)
	h := bd.History
	if bd.Status != "EXPIRED" || len(h) == 0 || h[len(h)-1].Status != "EXPIRED" || h[len(h)-1].Cause != "ttl" {
		t.Fatalf("brief.local %+v, want EXPIRED with the expiry in its history", bd)
	}
	if at, _ := time.Parse(time.RFC3339Nano, h[len(h)-1].At); !at.Equal(t0.Add(time.Second)) {
		t.Fatalf("expired at %s, want last_seen + ttl = %s", h[len(h)-1].At, t0.Add(time.Second))
	}

	// A zone membership, so that the views compared below hold one.
	rep, a := rfSend(t, sec, rfHMAC(t, secret, rfFrame(p1, node, "zone.join", fmt.Sprintf(`{"zone_id":"lab","agent_id":"p1","timestamp":%q}`, rfStamp(0)))))
	rfWant(t, "zone.join", rep, "zone.confirm", 200)
	paths := []string{"/v1/agents", "/v1/agents?status=EXPIRED", "/v1/agents/agent/brief.local", "/v1/agents/agent/p1.local", "/v1/zones/lab"}
	before := map[string]string{}
	for _, p := range paths {
		before[p] = string(rfGetOK(t, m, p, a.Seq))
	}
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	m2 := rfRunNode(t, m.cfg)
	for _, p := range paths {
		if after := string(rfGetOK(t, m2, p, a.Seq)); after != before[p] {
			t.Errorf("GET %s after restart:\n%s\nwant\n%s", p, after, before[p])
		}
	}
	for uri, id := range map[string]string{brief: idBrief, p1: id1, p2: id2} {
		rfSays(t, uri+" after restart", string(rfGetOK(t, m2, "/v1/agents/"+strings.Replace(uri, "://", "/", 1), 0)), `"agent_id": "`+id+`"`)
	}
}

// TestSecurityRefusalsChangeNothing: each of these is refused, and neither
// bob's entry and the zone in the HTTP API nor the registry's state change.
func TestSecurityRefusalsChangeNothing(t *testing.T) {
	secret := []byte("lab zone secret for the refusals")
	m := rfStartNode(t, t.TempDir(), "", rfZone{ID: "lab", Secret: hex.EncodeToString(secret), MinRep: 0.4})
	node := m.cfg.Name
	tcp, sec := dial(t, m.TCPAddr()), dialTLS(t, m)
	alice := &rfAgent{"agent://alice.local", rfNewKey(t, protocol.KeyEd25519)}
	bob := &rfAgent{"agent://bob.local", rfNewKey(t, protocol.KeyEd25519)}
	rfEnroll(t, m, tcp, sec, alice)
	bobID, bobAuth, bobAuthReply := rfEnroll(t, m, tcp, sec, bob)
	update := func(status, ts string) *protocol.Frame {
		return rfFrame(bob.uri, node, "registry.update", fmt.Sprintf(`{"agent_name":"Bob","status":%q,"timestamp":%q}`, status, ts))
	}
	join := func(s []byte) *protocol.Frame {
		return rfHMAC(t, s, rfFrame(bob.uri, node, "zone.join", fmt.Sprintf(`{"zone_id":"lab","agent_id":%q,"timestamp":%q}`, bobID, rfStamp(0))))
	}
	state := func(seq uint64) string {
		return string(rfGetOK(t, m, "/v1/agents/agent/bob.local", seq)) + string(rfGetOK(t, m, "/v1/zones/lab", seq)) + rfSnapshot(t, m)
	}
	altered := rfSign(t, bob.key, update("IDLE", rfStamp(0)))
	altered.Body = bytes.Replace(altered.Body, []byte(`"IDLE"`), []byte(`"BUSY"`), 1)

	// The comparison does see a change: bob's own signed update.
	before := state(0)
	rep, last := rfSend(t, tcp, rfSign(t, bob.key, update("BUSY", rfStamp(0))))
	rfWant(t, "bob's own signed update", rep, "registry.ack", 200)
	if state(last.Seq) == before {
		t.Fatal("bob's own update changed nothing that the comparison sees")
	}
	cases := []struct {
		name   string
		conn   *bridge.Client
		frame  *protocol.Frame
		typ    string
		status int
		says   string
	}{
		{"forged FROM, unsigned", tcp, update("HACKED", rfStamp(0)), "error", 401, "must be signed"},
		{"forged FROM, signed by alice", tcp, rfSign(t, alice.key, update("HACKED", rfStamp(0))), "error", 401, "signature"},
		{"signature over altered content", tcp, altered, "error", 401, "signature does not match"},
		{"stale timestamp", tcp, rfSign(t, bob.key, update("STALE", rfStamp(-10*time.Minute))), "error", 401, "stale"},
		{"timestamp ahead", tcp, rfSign(t, bob.key, update("AHEAD", rfStamp(10*time.Minute))), "error", 401, "stale"},
		{"wrong zone HMAC", sec, join([]byte("not the lab secret, but 32 bytes")), "zone.deny", 401, "zone's secret"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := state(last.Seq)
			rep, a := rfSend(t, c.conn, c.frame)
			rfSays(t, c.name, fmt.Sprint(rfWant(t, c.name, rep, c.typ, c.status)["reason"]), c.says)
			if after := state(a.Seq); after != before {
				t.Errorf("state changed:\n%s\nwant\n%s", after, before)
			}
			last = a
		})
	}

	t.Run("replayed auth.request", func(t *testing.T) {
		// A byte-identical resend is answered with the first outcome and is
		// not applied again (the binding's verified_until is not renewed).
		before := state(last.Seq)
		rep, a := rfSend(t, sec, bobAuth)
		rfWant(t, "replayed auth.request", rep, "auth.response", 200)
		if got, first := rfWithoutEvent(rep), rfWithoutEvent(bobAuthReply); !reflect.DeepEqual(got, first) {
			t.Errorf("the replay was answered %v, want the first answer %v", got, first)
		}
		if after := state(a.Seq); after != before {
			t.Errorf("state changed:\n%s\nwant\n%s", after, before)
		}
		last = a
	})

	t.Run("security messages over plain TCP", func(t *testing.T) {
		carol := &rfAgent{"agent://carol.local", rfNewKey(t, protocol.KeyEd25519)}
		carolAuth := protocol.Encode(rfSign(t, carol.key, rfFrame(carol.uri, node, "auth.request",
			fmt.Sprintf(`{"agent_id":"carol","public_key":%q,"timestamp":%q}`, rfPub(carol.key), rfStamp(0)))))
		frames := map[string][]byte{
			"auth.request": carolAuth,
			"key.rotate": protocol.Encode(rfSign(t, bob.key, rfFrame(bob.uri, node, "key.rotate", fmt.Sprintf(
				`{"old_key_id":"k1","new_key_id":"k2","public_key":%q,"timestamp":%q}`, rfPub(carol.key), rfStamp(0))))),
			"zone.join":  protocol.Encode(join(secret)),
			"zone.leave": protocol.Encode(rfSign(t, bob.key, rfFrame(bob.uri, node, "zone.leave", fmt.Sprintf(`{"zone_id":"lab","timestamp":%q}`, rfStamp(0))))),
		}
		before := state(last.Seq)
		stored, err := m.log.LastSeq(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		plain := dial(t, m.TCPAddr())
		for typ, f := range frames {
			plain.Write(f)
			plain.Flush()
			if e := readError(t, plain); e.Status != 403 || !strings.Contains(e.Reason, m.TLSAddr()) {
				t.Errorf("%s over plain TCP: %+v, want 403 naming the TLS port %s", typ, e, m.TLSAddr())
			}
		}
		if n, _ := m.log.LastSeq(context.Background()); n != stored {
			t.Errorf("the log grew from %d to %d: refused frames were stored", stored, n)
		}
		if after := state(last.Seq); after != before {
			t.Errorf("state changed:\n%s\nwant\n%s", after, before)
		}
		if code, b := rfGet(t, m, "/v1/agents/agent/carol.local", 0); code != http.StatusNotFound {
			t.Errorf("carol after a refused auth.request: %d %s", code, b)
		}
		// The same auth.request over TLS is accepted: only the transport was wrong.
		rep, _ := rfSend(t, sec, carolAuth)
		rfWant(t, "carol's auth.request over TLS", rep, "auth.response", 200)
	})
}

// TestZoneSecretsNeverStored joins two zones (one secret configured as hex,
// one as base64), then reads every stored event through a NATS reader and
// greps the raw JetStream files: neither secret, in any encoding, nor either
// session token appears. A marker sent in the joins must be found, to show
// that the search sees the stored bytes.
func TestZoneSecretsNeverStored(t *testing.T) {
	dir := t.TempDir()
	marker := fmt.Sprintf("marker-%d", time.Now().UnixNano())
	s1, s2 := []byte("first zone secret "+marker[7:]), []byte("second zone secret "+marker[7:])
	m := rfStartNode(t, dir, "",
		rfZone{ID: "hex-zone", Secret: hex.EncodeToString(s1), MinRep: 0.4},
		rfZone{ID: "b64-zone", Secret: "base64:" + base64.StdEncoding.EncodeToString(s2), MinRep: 0.4})
	tcp, sec := dial(t, m.TCPAddr()), dialTLS(t, m)
	dora := &rfAgent{"agent://dora.local", rfNewKey(t, protocol.KeyEd25519)}
	id, _, _ := rfEnroll(t, m, tcp, sec, dora)
	var forbidden []string
	for _, s := range [][]byte{s1, s2} {
		forbidden = append(forbidden, string(s), hex.EncodeToString(s), strings.ToUpper(hex.EncodeToString(s)),
			base64.StdEncoding.EncodeToString(s), base64.RawStdEncoding.EncodeToString(s),
			base64.URLEncoding.EncodeToString(s), base64.RawURLEncoding.EncodeToString(s))
	}
	var last uint64
	for zone, s := range map[string][]byte{"hex-zone": s1, "b64-zone": s2} {
		rep, a := rfSend(t, sec, rfHMAC(t, s, rfFrame(dora.uri, m.cfg.Name, "zone.join", fmt.Sprintf(
			`{"zone_id":%q,"agent_id":%q,"capabilities":[%q],"timestamp":%q}`, zone, id, marker, rfStamp(0)))))
		tok, _ := rfWant(t, "zone.join "+zone, rep, "zone.confirm", 200)["session_token"].(string)
		if !strings.HasPrefix(tok, "ZT-") || len(tok) < 20 {
			t.Fatalf("session token %q", tok)
		}
		forbidden = append(forbidden, tok, strings.TrimPrefix(tok, "ZT-"))
		last = max(last, a.Seq)
	}
	check := func(where string, b []byte) {
		for _, f := range forbidden {
			if bytes.Contains(b, []byte(f)) {
				t.Errorf("%s holds %q", where, f)
			}
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := m.log.WaitPublished(ctx, last); err != nil {
		t.Fatal(err)
	}
	var n uint64
	var seen bool
	err := openLog(t, m).Read(ctx, events.ReadOptions{}, func(ev *events.Envelope) error {
		n++
		blob, _ := json.Marshal(ev)
		check(fmt.Sprintf("event %d (%s)", ev.Seq, ev.Type), append(blob, ev.Body...))
		seen = seen || bytes.Contains(ev.Body, []byte(marker))
		return nil
	})
	if err != nil || n != last || !seen {
		t.Fatalf("read %d events (want %d), marker seen %v: %v", n, last, seen, err)
	}

	seen = false
	err = filepath.WalkDir(filepath.Join(dir, "jetstream"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err == nil {
			check(path, b)
			seen = seen || bytes.Contains(b, []byte(marker))
		}
		return err
	})
	if err != nil || !seen {
		t.Fatalf("raw files under jetstream/: marker seen %v, %v", seen, err)
	}
}
