package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aglx/ledger/protocol"
)

// TestUnsignedRequestsInAKeyedName: over TLS on a real node, once alice
// has bound a key, a credit.request, credit.deny or credit.received in her
// name without her signature is answered 401, and a hundred of them do not
// lock out her own request. Until 2026-12-01 each was answered 202 and
// relayed, and her own signed request then got 429 (helper-60).
func TestUnsignedRequestsInAKeyedName(t *testing.T) {
	m := startNode(t, t.TempDir())
	s := lfNewSession(t, m)
	alice := lfNewParty(t, "agent://alice.local", protocol.KeyEd25519)
	s.bind(t, alice)
	for i := range 100 {
		lfExpect(t, s.send(t, lfFrame(alice.uri, "agent://bob.local", protocol.TypeCreditRequest,
			fmt.Sprintf(`{"requested_amount":1,"purpose":"forged %d","timestamp":%q}`, i, lfNow()))), "error", 401)
	}
	for _, f := range []*protocol.Frame{
		lfFrame(alice.uri, "agent://bob.local", protocol.TypeCreditDeny, fmt.Sprintf(`{"requested_amount":1,"reason":"forged","timestamp":%q}`, lfNow())),
		lfFrame(alice.uri, m.cfg.Name, protocol.TypeCreditReceived, fmt.Sprintf(`{"transaction_id":"tx-1","amount":"1","timestamp":%q}`, lfNow())),
	} {
		lfExpect(t, s.send(t, f), "error", 401)
	}
	lfExpect(t, s.send(t, alice.signed(t, "agent://bob.local", protocol.TypeCreditRequest,
		fmt.Sprintf(`{"requested_amount":5,"purpose":"real","timestamp":%q}`, lfNow()))), "ack", 202)
}

// TestFramesTheNodeDoesNotTake: a frame in the node's own name that is not
// a credit message, and any zone.confirm, are refused before they are
// recorded (403); a signature that does not verify is refused (401)
// whatever the TYPE, so the relay withholds the message; and a message of
// a TYPE the relay never delivers is answered 200, not 202 ("queued for
// delivery"). Until 2026-12-01 all of these were recorded and answered
// 202, and an ack in the node's name was delivered with its RELAYED-BY
// (helpers 62 and 63).
func TestFramesTheNodeDoesNotTake(t *testing.T) {
	m := startNode(t, t.TempDir())
	s := lfNewSession(t, m)
	alice := lfNewParty(t, "agent://alice.local", protocol.KeyEd25519)
	s.bind(t, alice)
	node := m.cfg.Name
	garbage := `"signature":"ed25519:` + strings.Repeat("ab", 64) + `"`
	tests := []struct {
		name   string
		frame  *protocol.Frame
		typ    string
		status int
		stored bool
	}{
		{"an auth.response in the node's name", lfFrame(node, "agent://bob.local", protocol.TypeAuthResponse, `{"status":"VERIFIED","trust_level":"high"}`), "error", 403, false},
		{"a zone.confirm from another registry", lfFrame("registry://other.local", "agent://bob.local", protocol.TypeZoneConfirm, `{"zone_id":"z","session_token":"ZT-secret","role":"admin"}`), "error", 403, false},
		{"a mint without the node's signature", lfFrame(node, "agent://bob.local", protocol.TypeCreditTransfer, fmt.Sprintf(`{"amount":5,"currency":"AGLX","transaction_id":"mint-x","timestamp":%q}`, lfNow())), "error", 401, true},
		{"a task.assign without CREDITS, bad signature", lfFrame(alice.uri, "agent://bob.local", protocol.TypeTaskAssign, `{"task_id":"t-1","task":"x",`+garbage+`}`), "error", 401, true},
		{"a mentor.request, bad signature", lfFrame(alice.uri, "agent://bob.local", protocol.TypeMentorRequest, `{"task_id":"t-1","comment":"help",`+garbage+`}`), "error", 401, true},
		{"a registry.ack from another registry", lfFrame("registry://other.local", "agent://bob.local", protocol.TypeRegistryAck, `{"agent_id":"x","ttl":60}`), "ack", 200, true},
		// Unsigned, though its body could not be read for signing: it
		// was refused by the fold after the edge had answered 202
		// (helper-66).
		{"a mentor.request naming a signature, with a lone surrogate", lfFrame("agent://keyless.local", "agent://bob.local", protocol.TypeMentorRequest, `{"task_id":"t-1","comment":"my signature \ud800"}`), "ack", 202, true},
		{"a task.assign without CREDITS, unsigned", lfFrame(alice.uri, "agent://bob.local", protocol.TypeTaskAssign, `{"task_id":"t-2","task":"x"}`), "ack", 202, true},
	}
	// An ack is never answered, so its refusal is silent: nothing is
	// recorded between the two probes around it.
	probe := func(i int) uint64 {
		a := s.send(t, lfFrame(alice.uri, "agent://bob.local", protocol.TypeTaskAssign, fmt.Sprintf(`{"task_id":"probe-%d","task":"probe"}`, i)))
		if a.seq() == 0 {
			t.Fatalf("probe %d: %s", i, a)
		}
		return a.seq()
	}
	before := probe(1)
	if err := s.c.WriteFrame(lfFrame(node, "agent://bob.local", "ack", `{"transaction_id":"tx-forged","balance":"1000000"}`)); err != nil {
		t.Fatal(err)
	}
	if after := probe(2); after != before+1 {
		t.Fatalf("an ack in the node's name was recorded: the probes around it are at seq %d and %d", before, after)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := s.c.Write(protocol.Encode(tt.frame)); err != nil || s.c.Flush() != nil {
				t.Fatal("writing the frame failed")
			}
			f, err := s.c.ReadReply()
			if err != nil {
				t.Fatal(err)
			}
			if f.Type() != tt.typ || !strings.HasPrefix(f.Value(protocol.HeaderStatus), strconv.Itoa(tt.status)+" ") {
				t.Fatalf("reply %s %s %s; want %s %d", f.Type(), f.Value(protocol.HeaderStatus), f.Body, tt.typ, tt.status)
			}
			if stored := bytes.Contains(f.Body, []byte(`"seq":`)); stored != tt.stored {
				t.Fatalf("reply %s: recorded %v, want %v", f.Body, stored, tt.stored)
			}
			if !tt.stored {
				return
			}
			// What the relay goes by: refused exactly when the reply says so.
			var ev struct{ Seq uint64 }
			json.Unmarshal(f.Body, &ev)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := m.runner.WaitFor(ctx, ev.Seq); err != nil {
				t.Fatal(err)
			}
			if refused, known := m.outbox.Refused(ev.Seq); !known || refused != (tt.status >= 400) {
				t.Fatalf("the relay's record of seq %d: refused %v (known %v); the reply was %d", ev.Seq, refused, known, tt.status)
			}
		})
	}
}
