package projections

import (
	"bytes"
	"crypto"
	"fmt"
	"testing"
	"time"

	"github.com/aglx/ledger/protocol"
)

// withID returns a copy of f with the ID header id; "" leaves it without
// one. The ID header is not signed, so anyone holding a signed frame can
// send it under any ID.
func withID(f *protocol.Frame, id string) *protocol.Frame {
	g := *f
	g.Headers = nil
	for _, h := range f.Headers {
		if h.Name != protocol.HeaderID {
			g.Headers = append(g.Headers, h)
		}
	}
	if id != "" {
		g.Headers = append(g.Headers, protocol.Header{Name: protocol.HeaderID, Value: id})
	}
	return &g
}

// creditsHarness folds frames through the registry and the ledger, as the
// node's runner does, and can fold them again from the start.
type creditsHarness struct {
	*harness
	c     *Credits
	at    time.Time
	alice crypto.Signer
}

// newCreditsHarness binds a key to alice and mints 50 to her and 10 to bob
// (transaction m-bob).
func newCreditsHarness(t *testing.T, alice, bob string) *creditsHarness {
	h := &creditsHarness{harness: newHarness(t), at: regT0, alice: newEd25519(t)}
	h.c = NewCredits(testNode, h.r, nil)
	h.register(alice, 3600, h.at)
	h.bindKey(alice, h.alice, h.at)
	for _, m := range []struct{ to, amount, tx string }{{alice, "50", "m-alice"}, {bob, "10", "m-bob"}} {
		h.send(signed(t, nodeKey, frame(testNode, m.to, protocol.TypeCreditTransfer,
			fmt.Sprintf(`{"amount":%s,"currency":"AGLX","transaction_id":%q,"timestamp":%q}`, m.amount, m.tx, ts(h.at)))))
	}
	return h
}

// refold folds every event so far into a fresh registry and ledger, as a
// rebuild does, and returns the ledger's snapshot.
func (h *creditsHarness) refold() []byte {
	h.t.Helper()
	cfg := h.cfg
	cfg.Outbox = NewOutbox()
	r := NewRegistry(cfg)
	c := NewCredits(testNode, r, nil)
	for _, e := range h.events {
		r.Apply(e)
		c.Apply(e)
	}
	b, err := c.L.Snapshot()
	if err != nil {
		h.t.Fatal(err)
	}
	return b
}

func (h *creditsHarness) send(f *protocol.Frame) {
	h.t.Helper()
	h.at = h.at.Add(time.Second)
	e := h.event(f, h.at)
	h.applyEvent(e)
	h.c.Apply(e)
}

func (h *creditsHarness) balance(uri string) string {
	v, _ := h.c.L.Account(uri)
	return v.Balance.String()
}

func (h *creditsHarness) available(uri string) string {
	v, _ := h.c.L.Account(uri)
	return v.Available.String()
}

// TestSignedMessageTakesEffectOnce: a signed credit.reward, credit.adjust
// or task.assign with CREDITS carries no key of its own in its body, and
// was named by its unsigned ID header (or, without one, by its event id).
// The addressee, to whom the relay delivers it, could send it again under
// new IDs within the signature window: a node-signed reward or adjustment
// minted credits each time, an agent's reward emptied the payer, an offer
// placed hold after hold (helper-51, helper-54). Named by what the
// signature covers, each takes effect once; a reply to a copy is the first
// reply. A new message (another timestamp) is still a new one.
func TestSignedMessageTakesEffectOnce(t *testing.T) {
	const alice, bob, carol = "agent://alice.local", "agent://bob.local", "agent://carol.local"
	tests := []struct {
		name     string
		copies   func(h *creditsHarness) (first *protocol.Frame, fresh *protocol.Frame)
		ids      []string // the IDs the copies are sent under; "" = none
		balances map[string]string
		avail    map[string]string
		requests int // records of requests and denials, if checked
	}{
		{
			name: "node-signed reward under new IDs",
			copies: func(h *creditsHarness) (*protocol.Frame, *protocol.Frame) {
				mk := func(at time.Time) *protocol.Frame {
					return signed(t, nodeKey, frame(testNode, bob, protocol.TypeCreditReward,
						fmt.Sprintf(`{"amount":100,"reason":"good work","timestamp":%q}`, ts(at))))
				}
				return mk(regT0), mk(regT0.Add(time.Minute))
			},
			ids:      []string{"r-1", "r-2", "", "r-3"},
			balances: map[string]string{bob: "210"}, // the mint's 10, and two rewards
		},
		{
			name: "node-signed adjustment without an ID",
			copies: func(h *creditsHarness) (*protocol.Frame, *protocol.Frame) {
				mk := func(at time.Time) *protocol.Frame {
					return signed(t, nodeKey, frame(testNode, bob, protocol.TypeCreditAdjust,
						fmt.Sprintf(`{"transaction_id":"m-bob","adjustment":1000,"reason":"fix","timestamp":%q}`, ts(at))))
				}
				return mk(regT0), mk(regT0.Add(time.Minute))
			},
			ids:      []string{"", "", "a-1", ""},
			balances: map[string]string{bob: "2010"},
		},
		{
			name: "an agent's signed reward resent by its payee",
			copies: func(h *creditsHarness) (*protocol.Frame, *protocol.Frame) {
				mk := func(at time.Time) *protocol.Frame {
					return signed(t, h.alice, frame(alice, bob, protocol.TypeCreditReward,
						fmt.Sprintf(`{"amount":10,"reason":"thanks","timestamp":%q}`, ts(at))))
				}
				return mk(regT0), mk(regT0.Add(time.Minute))
			},
			ids:      []string{"r-1", "bob-1", "bob-2", ""},
			balances: map[string]string{alice: "30", bob: "30"}, // alice 50 - 2×10; bob 10 + 2×10
		},
		{
			name: "a signed offer without task_id resent by its worker",
			copies: func(h *creditsHarness) (*protocol.Frame, *protocol.Frame) {
				mk := func(at time.Time) *protocol.Frame {
					f := frame(alice, carol, protocol.TypeTaskAssign, fmt.Sprintf(`{"task":"analyze","timestamp":%q}`, ts(at)))
					f.Headers = append(f.Headers, protocol.Header{Name: protocol.HeaderCredits, Value: "15"})
					return signed(t, h.alice, f)
				}
				return mk(regT0), mk(regT0.Add(time.Minute))
			},
			ids:      []string{"t-1", "carol-1", ""},
			balances: map[string]string{alice: "50"},
			avail:    map[string]string{alice: "20"}, // two holds of 15, not four
		},
		{
			// The approver has the signed request (helper-55): copies
			// filled the pair's 100 open requests, and then the
			// requester's own got 429.
			name: "a signed credit.request resent by the one asked",
			copies: func(h *creditsHarness) (*protocol.Frame, *protocol.Frame) {
				mk := func(at time.Time) *protocol.Frame {
					return signed(t, h.alice, frame(alice, bob, protocol.TypeCreditRequest,
						fmt.Sprintf(`{"requested_amount":5,"purpose":"p","timestamp":%q}`, ts(at))))
				}
				return mk(regT0), mk(regT0.Add(time.Minute))
			},
			ids:      []string{"q-1", "bob-1", "bob-2", ""},
			requests: 2,
		},
		{
			name: "a signed credit.deny resent by the one denied",
			copies: func(h *creditsHarness) (*protocol.Frame, *protocol.Frame) {
				mk := func(at time.Time) *protocol.Frame {
					return signed(t, h.alice, frame(alice, bob, protocol.TypeCreditDeny,
						fmt.Sprintf(`{"requested_amount":5,"reason":"no","timestamp":%q}`, ts(at))))
				}
				return mk(regT0), mk(regT0.Add(time.Minute))
			},
			ids:      []string{"d-1", "bob-1", ""},
			requests: 2, // each deny answered no request: a record of its own
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newCreditsHarness(t, alice, bob)
			first, fresh := tt.copies(h)
			for _, id := range tt.ids {
				h.send(withID(first, id))
			}
			h.send(withID(fresh, "new-1"))
			h.send(withID(fresh, "new-2"))
			for uri, want := range tt.balances {
				if got := h.balance(uri); got != want {
					t.Errorf("balance of %s = %s, want %s", uri, got, want)
				}
			}
			for uri, want := range tt.avail {
				if got := h.available(uri); got != want {
					t.Errorf("available of %s = %s, want %s", uri, got, want)
				}
			}
			if got := len(h.c.L.Requests(0, 1000)); tt.requests != 0 && got != tt.requests {
				t.Errorf("%d request records, want %d", got, tt.requests)
			}
			if err := h.c.L.Check(); err != nil {
				t.Fatal(err)
			}
			// A rebuild from the log reaches the same ledger, byte for byte.
			live, err := h.c.L.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			if again := h.refold(); !bytes.Equal(live, again) {
				t.Errorf("a rebuild's ledger differs from the live one:\n got %s\nwant %s", again, live)
			}
		})
	}
}
