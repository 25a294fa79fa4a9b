package projections

import (
	"context"
	"crypto"
	"fmt"

	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/protocol"
)

// NodeKeyFollower folds the registry over the node's own key.rotate
// events to learn which key speaks for the node at the log's end: its
// first key, then each key those rotations bound. aglxd uses it before it
// serves, to refuse a key file the log no longer names, and
// --rotate-node-key to check the key it holds before it signs a rotation
// and to see the rotation take effect after.
//
// It reads only the node's key.rotate events to itself (one subject,
// NodeRotationSubject), which is where the node's key history comes
// from: the registry takes a key.rotate only when it is addressed to the
// node, and the node's own only when the node's key then signed it. What
// else the registry folds (agents' keys, its memory of answered requests,
// its clock) changes how a copy of a rotation is answered and when a
// retired key is said to have retired, never which key is current, so the
// whole log folds to the same current node key.
type NodeKeyFollower struct {
	reg      *Registry
	outbox   *Outbox
	verifier *IngestVerifier
	subject  string
	read     uint64 // the last event folded
}

// NodeRotationSubject is the subject of the node's key.rotate events to
// itself in the event stream.
func NodeRotationSubject(nodeURI string) string {
	return events.Subject(protocol.TypeKeyRotate, nodeURI, nodeURI)
}

// NewNodeKeyFollower returns a follower at the log's start. cfg is the
// node's registry configuration as aglxd builds it (its name, key, first
// key, zones, token key, peers): the registry's decisions, and so its key
// history, depend on all of it. Its Outbox and Verdicts are the
// follower's own.
func NewNodeKeyFollower(cfg RegistryConfig) (*NodeKeyFollower, error) {
	f := &NodeKeyFollower{outbox: NewOutbox(), subject: NodeRotationSubject(cfg.NodeURI)}
	cfg.Verdicts = NewVerdictCache()
	if cfg.NodeKey != nil {
		cfg.Outbox = f.outbox
	} else {
		cfg.Outbox = nil
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	f.reg = NewRegistry(cfg)
	f.verifier = &IngestVerifier{Registry: f.reg, Cache: cfg.Verdicts}
	return f, nil
}

// Follow folds the node's rotations after the last one folded, up to the
// log's end as it stands when called, and returns the sequence of the
// last one it folded (0: none yet).
func (f *NodeKeyFollower) Follow(ctx context.Context, lg *events.Log) (uint64, error) {
	fold := newStretchFold(f.verifier, f.reg.Apply)
	err := lg.Read(ctx, events.ReadOptions{StartSeq: f.read + 1, Subjects: []string{f.subject}}, func(env *events.Envelope) error {
		if env.Seq <= f.read {
			return nil
		}
		f.read = env.Seq
		fold.add(env)
		return nil
	})
	fold.flush()
	if err != nil {
		return f.read, fmt.Errorf("folding the log's node keys after seq %d: %w", f.read, err)
	}
	return f.read, nil
}

// Current is the node's key after the events folded so far, and its
// fingerprint.
func (f *NodeKeyFollower) Current() (crypto.PublicKey, string) {
	pub, id, _ := f.reg.CurrentKey(f.reg.node)
	return pub, id
}

// Keys is the node's key history after the events folded so far, oldest
// first.
func (f *NodeKeyFollower) Keys() []KeyView { return f.reg.keyViews(f.reg.node) }

// Answer is the node's answer to the event at seq, if the follower folded
// it with a node key to answer with (NewNodeKeyFollower's cfg.NodeKey).
func (f *NodeKeyFollower) Answer(seq uint64) (Reply, bool) {
	rep, ok, err := f.outbox.Take(seq)
	return rep, ok && err == nil
}
