package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/aglx/ledger/bridge"
	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/projections"
	"github.com/aglx/ledger/protocol"
	"github.com/nats-io/nats.go"
)

// Preparing an upgrade (aglxd --prepare-state-from URL). A saved state is
// only ever loaded by the build that saved it, so the first start of a
// new build folds the whole log: hours, for a long-lived node, during
// which replies that wait for the folds wait too. Instead the new build
// can fold the log ahead of its start, while the old node still serves:
// it reads the running node's event stream as any reader does, folds it
// with its own code under the node's inputs (the same flags, the keys
// beside it), and writes the state to preparedStateFile beside the node
// key. The old node never reads that file; the new build's start takes
// it up when the state the old node saved is not its own, and folds only
// what came in between. Run again, the preparation takes up where its
// last run stopped. docs/OPERATIONS.md, "Upgrading".

// preparedStateFile holds the state a build folded ahead of its start
// (prepareState), beside foldStateFile, which the running node writes.
const preparedStateFile = "folds.next.state"

// preparedProgressEvery is how often a preparation says how far it got.
const preparedProgressEvery = 10 * time.Second

func (m *Main) preparedStatePath() string {
	return filepath.Join(filepath.Dir(m.cfg.NodeKeyPath()), preparedStateFile)
}

// prepareState folds the log of the node at m.cfg.PrepareStateFrom into the
// prepared state file and returns. It writes nothing else: the node's
// keys must be there already (it makes none), its data dir stays the
// running node's.
func (m *Main) prepareState(ctx context.Context) error {
	started := time.Now()
	zones, err := m.readZones()
	if err != nil {
		return err
	}
	m.zonesDigest = projections.ZonesDigest(zones)
	if _, err := os.Stat(m.cfg.NodeKeyPath()); err != nil {
		return fmt.Errorf("--prepare-state-from: the node key: %w (run it with the flags the node runs with, beside its data)", err)
	}
	key, _, err := loadNodeKey(m.cfg.NodeKeyPath())
	if err != nil {
		return err
	}
	m.key = key
	tokenPath := filepath.Join(filepath.Dir(m.cfg.NodeKeyPath()), "token.key")
	tokenKey, err := os.ReadFile(tokenPath)
	if err != nil {
		return fmt.Errorf("--prepare-state-from: the zone token key: %w (run it beside the node's data)", err)
	}
	if len(tokenKey) != tokenKeySize {
		return fmt.Errorf("--prepare-state-from: %s: want %d bytes, found %d", tokenPath, tokenKeySize, len(tokenKey))
	}
	sum := sha256.Sum256(tokenKey)
	m.tokenKeyDigest = hex.EncodeToString(sum[:])

	// The client's default reconnecting (some two minutes): a preparation
	// whose node went away fails instead of waiting for ever, and the next
	// run takes up what it saved before.
	nc, err := nats.Connect(m.cfg.PrepareStateFrom, nats.Name("aglxd-prepare"))
	if err != nil {
		return fmt.Errorf("--prepare-state-from %s: %w", redactURLs(m.cfg.PrepareStateFrom), err)
	}
	defer nc.Close()
	lg, err := events.Attach(ctx, nc, events.StreamNameDefault)
	if err != nil {
		return fmt.Errorf("--prepare-state-from %s: %w", redactURLs(m.cfg.PrepareStateFrom), err)
	}
	m.log = lg
	// The log must be this node's: a state folded from another node's
	// log under this node's name and key would be refused at start (the
	// event at its position is not this log's), after hours of folding.
	if owner, want := lg.Meta(events.MetaOwner), m.cfg.Name+" "+protocol.KeyID(key.Public()); owner != want {
		return fmt.Errorf("--prepare-state-from %s: the log there is %q's, not this node's (%q): give the flags the node runs with", redactURLs(m.cfg.PrepareStateFrom), owner, want)
	}
	firstKey, err := lg.NodeFirstKey()
	if err != nil {
		return err
	}
	end, err := lg.LastSeq(ctx)
	if err != nil {
		return err
	}
	if end == 0 {
		return errors.New("--prepare-state-from: the log is empty: a start of this build has nothing to replay")
	}
	cfg := projections.RegistryConfig{
		NodeURI: m.cfg.Name, NodeKey: key, NodeFirstKey: firstKey, Zones: zones, TokenKey: tokenKey, SyncFrom: m.cfg.SyncFrom,
		Verdicts: projections.NewVerdictCache(),
	}
	folds, outbox := newFolds(cfg)
	// Where to start: this build's own earlier preparation, or the node's
	// saved state if it is this build's (both only ever grow toward the
	// log's end), else the first event.
	var from uint64
	for _, path := range []string{m.preparedStatePath(), m.foldStatePath()} {
		h, _, why, err := m.readFoldState(ctx, path, folds, outbox, end)
		if err == nil && why == "" {
			if h.Seq > from {
				from = h.Seq
			}
			m.lg.Info("preparing from a state this build saved", "path", path, "seq", h.Seq)
			break
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			why = err.Error()
		}
		if why != "" {
			m.lg.Info("a saved state this preparation cannot start from", "path", path, "why", why)
		}
		folds, outbox = newFolds(cfg)
	}
	if from < end {
		m.lg.Info("preparing the fold state for this build's start", "from_seq", from+1, "to_seq", end, "from", redactURLs(m.cfg.PrepareStateFrom))
	} else {
		m.lg.Info("the state this build saved stands at the log's end: nothing to fold", "seq", from, "from", redactURLs(m.cfg.PrepareStateFrom))
	}
	r := projections.NewRunner(lg, m.lg, folds.All()...)
	r.Resume(from)
	r.Prefetcher = &projections.IngestVerifier{Registry: folds.Registry, Cache: cfg.Verdicts}
	said := time.Now()
	progress := func() error {
		if time.Since(said) >= preparedProgressEvery {
			said = time.Now()
			m.lg.Info("preparing the fold state", "seq", r.Applied(), "to_seq", end)
		}
		return ctx.Err()
	}
	if err := r.FoldTo(ctx, end, progress); err != nil {
		return err
	}
	e, err := lg.Get(ctx, end)
	if err != nil {
		return err
	}
	b, err := m.encodeFoldState(folds, outbox, end, e.ID, nil)
	if err != nil {
		return err
	}
	if err := bridge.WriteFileDurable(m.preparedStatePath(), b, 0o600); err != nil {
		return err
	}
	m.lg.Info("fold state prepared: a start of this build takes it up and folds only the events after it", "path", m.preparedStatePath(),
		"seq", end, "events", end-from, "bytes", len(b), "took", time.Since(started).Round(time.Millisecond))
	return nil
}

// dropPreparedState removes the prepared state the start loaded, once this
// build has saved a state of its own (which is further along): it is
// used once. A file prepared again since the start (for the next
// upgrade) is left alone.
func (m *Main) dropPreparedState() {
	if m.stateLoadedFrom != m.preparedStatePath() || m.preparedLoaded == nil {
		return
	}
	// A file prepared again is written beside and renamed over: another
	// file, which SameFile tells apart.
	fi, err := os.Stat(m.stateLoadedFrom)
	if err == nil && os.SameFile(fi, m.preparedLoaded) {
		if err := os.Remove(m.stateLoadedFrom); err == nil {
			m.lg.Info("the fold state prepared for this build is used up: removed", "path", m.stateLoadedFrom)
		}
	}
	m.preparedLoaded = nil
}
