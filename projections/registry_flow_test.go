package projections

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/aglx/ledger/protocol"
)

// TestFlowWithRealKeys is the acceptance flow of issue 5 with real keys:
// register, bind a key, a signed update, rotate, the old key refused for new
// messages, a zone join confirmed, one denied for low reputation, leave.
func TestFlowWithRealKeys(t *testing.T) {
	const alice = "agent://alice.local"
	h := newHarness(t)
	k1, k2 := newEd25519(t), newRSA(t)
	at := func(d time.Duration) time.Time { return regT0.Add(d) }
	update := func(status string, when time.Time) *protocol.Frame {
		return frame(alice, testNode, protocol.TypeRegistryUpdate,
			fmt.Sprintf(`{"agent_name":"Alice","status":%q,"ttl":7200,"timestamp":%q}`, status, ts(when)))
	}

	// Register, unsigned: alice has no key yet.
	rep := h.register(alice, 7200, at(0))
	id := str(t, rep.Body, "agent_id")
	if len(id) != 36 || id[14] != '8' {
		t.Fatalf("agent_id = %q, want a version 8 UUID", id)
	}

	// Bind k1; the node's answer is signed with its key over the reply's
	// FROM, TO and TYPE.
	rep = h.bindKey(alice, k1, at(time.Minute))
	if got := str(t, rep.Body, "status"); got != AuthStatusVerified {
		t.Fatalf("auth.response status = %q, want VERIFIED", got)
	}
	if err := protocol.Verify(nodeKey.Public(), testNode, alice, protocol.TypeAuthResponse, "", rep.Body); err != nil {
		t.Errorf("auth.response signature: %v", err)
	}
	if got, want := str(t, rep.Body, "expires"), ts(at(time.Minute).Add(AuthValidity)); got != want {
		t.Errorf("auth.response expires = %q, want %q", got, want)
	}

	// From now on updates must be signed with k1.
	h.mustReply(update("BUSY", at(2*time.Minute)), at(2*time.Minute), protocol.TypeError, protocol.StatusUnauthorized)
	rep = h.mustReply(signed(t, k1, update("BUSY", at(3*time.Minute))), at(3*time.Minute), protocol.TypeRegistryAck, protocol.StatusOK)
	if got := str(t, rep.Body, "agent_id"); got != id {
		t.Errorf("agent_id after update = %q, want %q (ids never change)", got, id)
	}

	// Rotate to k2 (RSA), signed with k1.
	rotate := frame(alice, testNode, protocol.TypeKeyRotate, fmt.Sprintf(
		`{"old_key_id":"key-2025-01","new_key_id":"key-2025-10","public_key":%q,"rotation_reason":"Scheduled renewal","timestamp":%q}`,
		pubText(t, k2), ts(at(4*time.Minute))))
	rotate = signed(t, k1, rotate)
	ev, rep, _ := h.apply(rotate, at(4*time.Minute))
	if rep.Type != protocol.TypeAck || rep.Status != protocol.StatusOK {
		t.Fatalf("key.rotate: %s %d %s, want ack 200", rep.Type, rep.Status, rep.Body)
	}
	// Another projection asking about the rotation itself hears of the key
	// it was signed with, not the one it installed.
	if v := h.r.Authenticate(ev); v.Auth != AuthValid || v.KeyID != protocol.KeyID(k1.Public()) {
		t.Errorf("Authenticate(key.rotate) = %+v, want valid with k1", v)
	}
	// A resend of the rotation is answered as the first time.
	if _, again, _ := h.apply(rotate, at(4*time.Minute+time.Second)); again.Type != rep.Type || !bytes.Equal(again.Body, rep.Body) {
		t.Errorf("resent key.rotate: %s %s, want the first answer %s", again.Type, again.Body, rep.Body)
	}

	// The old key no longer speaks for alice; the new one does.
	h.mustReply(signed(t, k1, update("IDLE", at(5*time.Minute))), at(5*time.Minute), protocol.TypeError, protocol.StatusUnauthorized)
	h.mustReply(signed(t, k2, update("IDLE", at(6*time.Minute))), at(6*time.Minute), protocol.TypeRegistryAck, protocol.StatusOK)
	if pub, kid, ok := h.r.CurrentKey(alice); !ok || kid != protocol.KeyID(k2.Public()) || pub == nil {
		t.Errorf("CurrentKey(alice) = %v, %q, %v; want k2", pub, kid, ok)
	}
	d, _ := h.r.Agent(alice)
	if len(d.Keys) != 2 || d.Keys[0].Name != "key-2025-01" || d.Keys[0].Current || d.Keys[0].RetiredAt.IsZero() ||
		d.Keys[1].Name != "key-2025-10" || !d.Keys[1].Current {
		t.Errorf("Agent(alice).Keys = %+v; want key-2025-01 retired, key-2025-10 current", d.Keys)
	}

	// Join research-hub (minimum 0.5: admitted at the default 0.5).
	join := func(zone string, secret []byte, when time.Time) *protocol.Frame {
		return hmacSigned(t, secret, frame(alice, testNode, protocol.TypeZoneJoin, fmt.Sprintf(
			`{"zone_id":%q,"agent_id":%q,"capabilities":["data.analyze"],"timestamp":%q}`, zone, id, ts(when))))
	}
	rep = h.mustReply(join("research-hub", testZoneSecretA, at(7*time.Minute)), at(7*time.Minute), protocol.TypeZoneConfirm, protocol.StatusOK)
	token := str(t, rep.Body, "session_token")
	if !h.r.ValidSession("research-hub", alice, token) || h.r.ValidSession("research-hub", alice, token+"0") {
		t.Errorf("ValidSession(research-hub, alice, token) is wrong for %q", token)
	}
	if z, _ := h.r.Zone("research-hub"); len(z.Members) != 1 || z.Members[0].AgentURI != alice || !z.Members[0].Active {
		t.Errorf("Zone(research-hub) = %+v; want alice, active", z)
	}
	if got := pageOf(h.r.Agents(AgentFilter{Zone: "research-hub"})); len(got) != 1 || got[0].AgentURI != alice {
		t.Errorf("Agents(zone research-hub) = %+v; want alice", got)
	}

	// strict-zone wants 0.9.
	rep = h.mustReply(join("strict-zone", testZoneSecretB, at(8*time.Minute)), at(8*time.Minute), protocol.TypeZoneDeny, protocol.StatusForbidden)
	if got := str(t, rep.Body, "reason"); got != "Reputation below required threshold (0.9)" {
		t.Errorf("zone.deny reason = %q", got)
	}

	// Leave, signed with the current key.
	leave := frame(alice, testNode, protocol.TypeZoneLeave, fmt.Sprintf(`{"zone_id":"research-hub","reason":"done","timestamp":%q}`, ts(at(9*time.Minute))))
	h.mustReply(leave, at(9*time.Minute), protocol.TypeError, protocol.StatusUnauthorized) // unsigned
	h.mustReply(signed(t, k2, leave), at(9*time.Minute), protocol.TypeAck, protocol.StatusOK)
	if z, _ := h.r.Zone("research-hub"); len(z.Members) != 0 || h.r.ValidSession("research-hub", alice, token) {
		t.Errorf("after zone.leave: Zone = %+v; want no members and the token void", z)
	}

	// A replay of the whole log gives the same state, byte for byte.
	want := h.snapshot()
	got, err := h.replay().Snapshot()
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("replayed Snapshot differs:\n got %s\nwant %s", got, want)
	}
}

// TestAuthenticateVerdicts checks the verdict other projections get, for
// messages the registry itself does not act on.
func TestAuthenticateVerdicts(t *testing.T) {
	const bob = "agent://bob.local"
	h := newHarness(t)
	kb := newEd25519(t)
	h.bindKey(bob, kb, regT0)
	now := regT0.Add(time.Minute)
	transfer := func(to string) *protocol.Frame {
		return frame(bob, to, protocol.TypeCreditTransfer, fmt.Sprintf(
			`{"amount":3,"currency":"AGLX","reason":"r","timestamp":%q,"transaction_id":"tx-1"}`, ts(now)))
	}
	adjust := func() *protocol.Frame {
		return frame(testNode, "agent://bob.local", protocol.TypeCreditAdjust, fmt.Sprintf(
			`{"transaction_id":"tx-2","adjustment":-1.0,"reason":"fix","timestamp":%q}`, ts(now)))
	}
	offer := func(credits string) *protocol.Frame {
		f := frame(bob, "agent://carol.local", protocol.TypeTaskAssign, fmt.Sprintf(`{"task":"x","timestamp":%q}`, ts(now)))
		f.Headers = append(f.Headers, protocol.Header{Name: "CREDITS", Value: credits})
		return f
	}
	assign := offer("2")
	// The worker had the owner's signed offer of 2 and sent it again as an
	// offer of 98: the signature now covers CREDITS.
	raised := signed(t, kb, offer("2"))
	raised.Set(protocol.HeaderCredits, "98")
	tests := []struct {
		name string
		f    *protocol.Frame
		want Auth
	}{
		{"unsigned transfer from a keyed agent", transfer("agent://carol.local"), AuthInvalid},
		{"signed transfer", signed(t, kb, transfer("agent://carol.local")), AuthValid},
		{"unsigned ack needs no signature", frame(bob, "agent://carol.local", protocol.TypeAck, `{}`), AuthUnsigned},
		{"unsigned transfer from an agent without a key", frame("agent://dave.local", "agent://carol.local", protocol.TypeCreditTransfer,
			fmt.Sprintf(`{"amount":3,"currency":"AGLX","reason":"r","timestamp":%q,"transaction_id":"tx-3"}`, ts(now))), AuthUnsigned},
		{"unsigned task.assign without CREDITS", frame(bob, "agent://carol.local", protocol.TypeTaskAssign, `{"task":"x"}`), AuthUnsigned},
		{"unsigned task.assign with CREDITS", assign, AuthInvalid},
		{"signed task.assign with CREDITS", signed(t, kb, offer("2")), AuthValid},
		{"signed task.assign with CREDITS changed after signing", raised, AuthInvalid},
		{"node-signed adjust", signed(t, nodeKey, adjust()), AuthNode},
		{"unsigned adjust from the node's URI", adjust(), AuthInvalid},
		{"adjust from the node's URI signed with another key", signed(t, kb, adjust()), AuthInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := h.event(tt.f, now)
			if v := h.r.Authenticate(e); v.Auth != tt.want {
				t.Errorf("Authenticate = %+v, want %v", v, tt.want)
			}
		})
	}
}

// TestSignedUpdateReplayIsRefused: a signed registry.update is fresh for
// the whole signature window and travels over plain TCP, its ID header
// unsigned. Sent again after a later update, a captured one put the entry
// back as it was, and the relay delivered to the old address. An older
// signed message of a TYPE than one already applied is now refused (409);
// one stamped the same second passes.
func TestSignedUpdateReplayIsRefused(t *testing.T) {
	const bob = "agent://bob.local"
	k := newEd25519(t)
	h := newHarness(t)
	at := func(d time.Duration) time.Time { return regT0.Add(d) }
	h.bindKey(bob, k, at(0))
	upd := func(addr string, stamped time.Duration) *protocol.Frame {
		return signed(t, k, frame(bob, testNode, protocol.TypeRegistryUpdate, fmt.Sprintf(
			`{"agent_name":"Bob","address":%q,"port":7000,"timestamp":%q}`, addr, ts(at(stamped)))))
	}
	u1 := upd("10.0.0.1", time.Second)
	h.mustReply(u1, at(time.Second), protocol.TypeRegistryAck, protocol.StatusOK)
	h.mustReply(upd("10.0.0.2", 10*time.Second), at(10*time.Second), protocol.TypeRegistryAck, protocol.StatusOK)
	h.mustReply(u1, at(20*time.Second), protocol.TypeError, protocol.StatusConflict)
	if c, _ := h.r.Contact(bob, at(21*time.Second)); c != "10.0.0.2:7000" {
		t.Errorf("after the replay Contact = %q, want the agent's latest word 10.0.0.2:7000", c)
	}
	h.mustReply(upd("10.0.0.3", 10*time.Second), at(22*time.Second), protocol.TypeRegistryAck, protocol.StatusOK)
}
