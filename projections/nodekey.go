package projections

import (
	"context"
	"crypto"
	"fmt"

	"github.com/aglx/ledger/events"
)

// NodeKeyFollower folds the registry alone over a log to learn which key
// speaks for the node at its end: its first key, then each key its own
// key.rotate events bound. aglxd --rotate-node-key uses it to check that
// the log's current node key is the one it holds before it signs a
// rotation, and to see the rotation take effect after. It checks every
// signature as the node's replay does, in batches ahead of the fold.
type NodeKeyFollower struct {
	reg      *Registry
	outbox   *Outbox
	verifier *IngestVerifier
	read     uint64 // the last event folded
}

// NewNodeKeyFollower returns a follower at the log's start. cfg is the
// node's registry configuration as aglxd builds it (its name, key, first
// key, zones, token key, peers): the registry's decisions, and so its key
// history, depend on all of it. Its Outbox and Verdicts are the
// follower's own.
func NewNodeKeyFollower(cfg RegistryConfig) (*NodeKeyFollower, error) {
	f := &NodeKeyFollower{outbox: NewOutbox()}
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

// Follow folds the events after the last one folded, up to the log's end
// as it stands when called, and returns how far it has folded.
func (f *NodeKeyFollower) Follow(ctx context.Context, lg *events.Log) (uint64, error) {
	stretch := make([]*events.Envelope, 0, prefetchChunk)
	fold := func() {
		f.verifier.Prefetch(stretch)
		for _, env := range stretch {
			ev, _ := NewEvent(env) // an undecodable event is skipped by every fold, as in the node
			f.reg.Apply(ev)
		}
		stretch = stretch[:0]
	}
	err := lg.Read(ctx, events.ReadOptions{StartSeq: f.read + 1}, func(env *events.Envelope) error {
		if env.Seq <= f.read {
			return nil
		}
		f.read = env.Seq
		if stretch = append(stretch, env); len(stretch) == prefetchChunk {
			fold()
		}
		return nil
	})
	fold()
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
