package projections

import (
	"bytes"
	"crypto"
	"fmt"
	"testing"
	"time"

	"github.com/aglx/ledger/protocol"
)

// nodeRotation is the node's key.rotate from old to next, stamped at.
func nodeRotation(t *testing.T, old, next crypto.Signer, at time.Time) *protocol.Frame {
	t.Helper()
	return signed(t, old, frame(testNode, testNode, protocol.TypeKeyRotate, fmt.Sprintf(
		`{"old_key_id":%q,"new_key_id":%q,"public_key":%q,"rotation_reason":"test","timestamp":%q}`,
		protocol.KeyID(old.Public()), protocol.KeyID(next.Public()), pubText(t, next), ts(at))))
}

// nodeMint is a mint of amount to `to`, signed with k, stamped at.
func nodeMint(t *testing.T, k crypto.Signer, to, amount, tx string, at time.Time) *protocol.Frame {
	t.Helper()
	return signed(t, k, frame(testNode, to, protocol.TypeCreditTransfer,
		fmt.Sprintf(`{"amount":%s,"currency":"AGLX","transaction_id":%q,"timestamp":%q}`, amount, tx, ts(at))))
}

// refoldWith folds every event so far into a fresh registry and ledger
// under cfg, as a start with that configuration does, and returns both
// snapshots.
func (h *creditsHarness) refoldWith(cfg RegistryConfig) (reg, led []byte) {
	h.t.Helper()
	cfg.Outbox = NewOutbox()
	r := NewRegistry(cfg)
	c := NewCredits(testNode, r, nil)
	for _, e := range h.events {
		r.Apply(e)
		c.Apply(e)
	}
	reg, err := r.Snapshot()
	if err != nil {
		h.t.Fatal(err)
	}
	if led, err = c.L.Snapshot(); err != nil {
		h.t.Fatal(err)
	}
	return reg, led
}

// TestNodeKeyRotation: the node's own key.rotate, signed with its current
// key, makes the new key the one its mints are checked with from then on,
// while the mints made before still count on replay, when the folds start
// from the log's first node key (RegistryConfig.NodeFirstKey) as a node
// restarted under its new key does. Without the first key that replay
// refuses every earlier mint: the reason the node cannot just be given a
// new key file.
func TestNodeKeyRotation(t *testing.T) {
	const alice, bob = "agent://alice.local", "agent://bob.local"
	h, last := observedHarness(t, alice, bob) // alice 50, bob 10, minted with nodeKey
	before := h.snapshot()
	if bytes.Contains(before, []byte(`"node_keys"`)) {
		t.Fatalf("a registry that never saw a rotation writes node_keys: %s", before)
	}
	next := newEd25519(t)
	h.send(nodeRotation(t, nodeKey, next, h.at.Add(time.Second)))
	if rep, ok, _ := h.out.Take(h.seq); !ok || rep.Status != protocol.StatusOK {
		t.Fatalf("the node's rotation: %v %d %s, want 200", ok, rep.Status, rep.Body)
	}
	if _, id, _ := h.r.CurrentKey(testNode); id != protocol.KeyID(next.Public()) {
		t.Fatalf("the node's key after its rotation is %s, want %s", id, protocol.KeyID(next.Public()))
	}
	h.send(nodeMint(t, nodeKey, alice, "7", "old-after", h.at.Add(time.Second)))
	if last.Status != protocol.StatusUnauthorized || h.balance(alice) != "50" {
		t.Fatalf("a mint signed with the retired key: %d %s; alice has %s, want 401 and 50", last.Status, last.Reason, h.balance(alice))
	}
	h.send(nodeMint(t, next, alice, "5", "new", h.at.Add(time.Second)))
	if last.Status != protocol.StatusOK || h.balance(alice) != "55" {
		t.Fatalf("a mint signed with the new key: %d %s; alice has %s, want 200 and 55", last.Status, last.Reason, h.balance(alice))
	}
	liveReg, _ := h.r.Snapshot()
	liveLed, _ := h.c.L.Snapshot()
	if !bytes.Contains(liveReg, []byte(`"node_keys"`)) {
		t.Fatalf("the registry's snapshot lacks the node's key history after a rotation")
	}

	// Restarted under the new key, with the first key from the store.
	reg, led := h.refoldWith(RegistryConfig{NodeURI: testNode, NodeKey: next, NodeFirstKey: nodeKey.Public(),
		Zones: testZonesDefault, TokenKey: testTokenKey, SyncFrom: []string{testPeer}})
	if !bytes.Equal(reg, liveReg) || !bytes.Equal(led, liveLed) {
		t.Fatalf("a replay under the new key from the first key differs from the live folds:\nregistry %s\nlive     %s\nledger %s\nlive   %s", reg, liveReg, led, liveLed)
	}
	// The same replay without the first key: the earlier mints are void.
	_, led = h.refoldWith(RegistryConfig{NodeURI: testNode, NodeKey: next,
		Zones: testZonesDefault, TokenKey: testTokenKey, SyncFrom: []string{testPeer}})
	if bytes.Equal(led, liveLed) {
		t.Fatal("a replay that starts from the new key folds the same ledger: the first key would not be needed")
	}
}

// TestNodeKeyRotationRefusals: only the node's current key rotates it, to
// a key it never had; a refused rotation changes nothing.
func TestNodeKeyRotationRefusals(t *testing.T) {
	stranger, next := newEd25519(t), newEd25519(t)
	cases := []struct {
		name   string
		frame  func(h *creditsHarness) *protocol.Frame
		status protocol.Status
	}{
		{"signed with another key", func(h *creditsHarness) *protocol.Frame {
			return nodeRotation(t, stranger, next, h.at)
		}, protocol.StatusUnauthorized},
		{"a second rotation naming another key as the old one", func(h *creditsHarness) *protocol.Frame {
			h.send(nodeRotation(t, nodeKey, next, h.at))
			return signed(t, next, frame(testNode, testNode, protocol.TypeKeyRotate, fmt.Sprintf(
				`{"old_key_id":"k-other","new_key_id":"k3","public_key":%q,"timestamp":%q}`, pubText(t, stranger), ts(h.at))))
		}, protocol.StatusConflict},
		{"back to a key the node had", func(h *creditsHarness) *protocol.Frame {
			h.send(nodeRotation(t, nodeKey, next, h.at))
			return nodeRotation(t, next, nodeKey, h.at)
		}, protocol.StatusConflict},
		{"stale", func(h *creditsHarness) *protocol.Frame {
			return nodeRotation(t, nodeKey, next, h.at.Add(-time.Hour))
		}, protocol.StatusUnauthorized},
		{"unsigned", func(h *creditsHarness) *protocol.Frame {
			return frame(testNode, testNode, protocol.TypeKeyRotate, fmt.Sprintf(
				`{"old_key_id":%q,"new_key_id":"k2","public_key":%q,"timestamp":%q}`, protocol.KeyID(nodeKey.Public()), pubText(t, next), ts(h.at)))
		}, protocol.StatusUnauthorized},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newCreditsHarness(t, "agent://alice.local", "agent://bob.local")
			f := tc.frame(h)
			_, was, _ := h.r.CurrentKey(testNode)
			before := h.snapshot()
			h.send(f)
			rep, ok, _ := h.out.Take(h.seq)
			if !ok || rep.Status != tc.status {
				t.Fatalf("reply %v %d %s, want %d", ok, rep.Status, rep.Body, tc.status)
			}
			{
				if _, now, _ := h.r.CurrentKey(testNode); now != was {
					t.Fatalf("a refused rotation changed the node's key from %s to %s", was, now)
				}
				if after := h.snapshot(); !bytes.Equal(after, before) {
					t.Fatalf("a refused rotation changed the registry:\nbefore %s\nafter  %s", before, after)
				}
			}
		})
	}
}
