package main

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aglx/ledger/bridge"
	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/projections"
	"github.com/aglx/ledger/protocol"
)

// Rotating the node's own key (aglxd --rotate-node-key). The folds check
// every mint, adjustment and auth.response in the log against the key
// that spoke for the node when it was made, so a new key cannot simply
// replace the old file: every earlier mint would be refused on replay.
// Instead the node records a key.rotate in its own name, signed with the
// old key, as an agent does; the folds follow it from the log's first
// node key (kept in the event stream's metadata from the first rotation
// on, events.MetaNodeFirstKey). The steps, each safe to repeat:
//
//  1. checks that change nothing: a node's store and a non-empty log where
//     the flags point, its owner this node, no frames an earlier rotation
//     left for peers, and the node's own rotations in the log (one
//     subject) ending with the key in node.key;
//  2. the new key is written to node.key.next, durably, before the log
//     names it (or one put there by the operator is taken);
//  3. the rotation is appended, durable, and folded, naming the new key;
//  4. the streams' recorded owner becomes the new key's (and the first
//     key is recorded, if this is the first rotation);
//  5. each --sync-to peer is told, with a key.rotate signed by the old key;
//     for one that did not take it a frame is left to send it later;
//  6. the old key is kept as node.key.retired-ID (before step 5, so the
//     frames name a key that is there) and node.key.next replaces
//     node.key. The retired key undoes a rotation run against the wrong
//     store; the operator removes it once the node runs on its store (the
//     log keeps its public key, which is all a replay needs).
//
// A start finds node.key.next and refuses until --rotate-node-key is run
// again, which finishes what was left: the log decides whether step 3
// happened, not the files.

// nextKeySuffix names the new key's file during a rotation.
const nextKeySuffix = ".next"

// rotationFoldWait bounds how long the rotation waits for its own event
// to reach the event stream after it is durable in the write-ahead one.
const rotationFoldWait = 30 * time.Second

// errRotationLeft is a start's refusal while a rotation is unfinished.
var errRotationLeft = errors.New("an interrupted node key rotation")

// checkNoRotationLeft refuses a start beside a node.key.next: a rotation
// that was stopped, whose new key may already be the log's.
func (m *Main) checkNoRotationLeft() error {
	next := m.cfg.NodeKeyPath() + nextKeySuffix
	if _, err := os.Stat(next); err == nil {
		return fmt.Errorf("%w left %s: run aglxd --rotate-node-key with the same flags to finish it, then start the node (docs/ROTATION.md)", errRotationLeft, next)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("--node-key: %w", err)
	}
	return nil
}

// checkStoreToRotate refuses a rotation with the embedded server where
// --data holds no store, before the start makes one there (its lock file
// and an empty JetStream directory, in a directory given by mistake).
func (m *Main) checkStoreToRotate() error {
	if m.cfg.NATSURL != "" || m.cfg.DataDir == "" {
		return nil
	}
	if _, err := os.Stat(filepath.Join(m.cfg.DataDir, "jetstream")); err != nil {
		return fmt.Errorf("--rotate-node-key: --data %s holds no node's store (%w): give the flags the node runs with; nothing was rotated", m.cfg.DataDir, err)
	}
	return nil
}

// checkRotationTarget refuses a rotation before the log is opened when
// there is no node's log where the flags point (a wrong --data or
// --nats-url: Open would make empty streams, the rotation would rotate
// their "log", and the real node's key file would be replaced), or when
// an earlier rotation left frames for peers that have yet to take it (a
// second rotation would leave them two behind).
func (m *Main) checkRotationTarget(ctx context.Context) error {
	owner, last, exists, err := events.RecordedOwner(ctx, m.nc, events.StreamNameDefault)
	switch {
	case err != nil:
		return err
	case !exists || last == 0:
		// An empty log is no node's either: one start with the wrong
		// --data and the right --node-key makes one (helper-117).
		return fmt.Errorf("--rotate-node-key: there is no node's log here, or an empty one (--data %q, --nats-url %q): give the flags the node runs with (a log that lost its last events in a crash gets them back at the node's next start: start it once, then rotate); nothing was rotated", m.cfg.DataDir, redactURLs(m.cfg.NATSURL))
	case owner == "":
		return fmt.Errorf("--rotate-node-key: the log here records no owner (written by a version before owners were recorded): start the node once, which records it, then rotate; nothing was rotated")
	}
	// Frames an earlier rotation left for peers; a stopped run of this
	// rotation (node.key.next) may have left its own, which it writes
	// again.
	var nextID string
	if next, made, err := loadNodeKey(m.cfg.NodeKeyPath() + nextKeySuffix); err == nil && !made {
		nextID = protocol.KeyID(next.Public())
	}
	if frames := framesBefore(m.cfg.NodeKeyPath(), nextID); len(frames) > 0 {
		aside := ""
		if nextID != "" {
			// No rotation to it got past this check while the frames
			// were there: it is a key put there, not one the log names.
			aside = fmt.Sprintf("; %s, a key put there for the next rotation, may be moved aside meanwhile to start the node", m.cfg.NodeKeyPath()+nextKeySuffix)
		}
		return fmt.Errorf("--rotate-node-key: an earlier rotation left frames for peers that have yet to take it (%s): send each with aglx send --key and the old key it names, then remove the frames, and rotate again: a second rotation would leave those peers two behind%s; nothing was rotated (docs/ROTATION.md)", strings.Join(frames, ", "), aside)
	}
	return nil
}

// rotatedAt says where the node key the log names was bound.
func rotatedAt(seq uint64) string {
	if seq == 0 {
		return "its first key: the log holds no rotation"
	}
	return fmt.Sprintf("bound by its rotation at seq %d", seq)
}

// errKeyNotTheLogs is a start's refusal of a node key the log's own
// rotations do not end with.
var errKeyNotTheLogs = errors.New("not the log's node key")

// checkKeyAgainstLog refuses a start whose node key is not the one the
// log's own rotations end with. The streams' owner says so too, but only
// from the rotation's third step on: a rotation stopped after the log took
// it, with node.key.next then removed by hand, would start under the old
// key, whose mints the log refuses (401) and whose auth.responses check
// out against no key the log names.
func (m *Main) checkKeyAgainstLog(ctx context.Context, first crypto.PublicKey) error {
	f, err := projections.NewNodeKeyFollower(projections.RegistryConfig{NodeURI: m.cfg.Name, NodePublicKey: m.key.Public(), NodeFirstKey: first})
	if err != nil {
		return err
	}
	last, err := f.Follow(ctx, m.log)
	if err != nil {
		return err
	}
	want := protocol.KeyID(m.key.Public())
	if _, cur := f.Current(); cur != want {
		return fmt.Errorf("%w: --node-key %s holds key %s, but the log's node key is %s (%s): a rotation was stopped after the log took it and its new key, %s, is gone, or the key file was replaced. Put back the key the log names; if it is lost, --take-over-store with a key the node never had starts the node, voiding every earlier mint (docs/ROTATION.md)",
			errKeyNotTheLogs, m.cfg.NodeKeyPath(), want, cur, rotatedAt(last), m.cfg.NodeKeyPath()+nextKeySuffix)
	}
	return nil
}

// rotateNodeKey does the rotation's steps on an open log, with m.key the
// current key file's. It changes nothing when the log's node key is
// neither the old nor the new one.
func (m *Main) rotateNodeKey(ctx context.Context) error {
	path := m.cfg.NodeKeyPath()
	nextPath := path + nextKeySuffix
	old := m.key
	oldID := protocol.KeyID(old.Public())
	next, made, err := loadNodeKey(nextPath)
	if err != nil {
		return fmt.Errorf("%w (%s holds the new key of a rotation that was stopped, or one put there to rotate to: a PKCS #8 PEM private key)", err, nextPath)
	}
	nextID := protocol.KeyID(next.Public())
	if nextID == oldID {
		return fmt.Errorf("%s holds the same key as %s (key id %s): remove it and run --rotate-node-key again", nextPath, path, oldID)
	}
	oldOwner, newOwner := m.cfg.Name+" "+oldID, m.cfg.Name+" "+nextID
	switch owner := m.log.Meta(events.MetaOwner); owner {
	case oldOwner, newOwner:
	default:
		return fmt.Errorf("--name %s, --node-key %s: %w: stream %s was written by %q, and this is %q (%q once rotated); nothing was rotated",
			m.cfg.Name, path, events.ErrOtherOwner, events.StreamNameDefault, owner, oldOwner, newOwner)
	}
	first, err := m.log.NodeFirstKey()
	if err != nil {
		return err
	}
	firstText := m.log.Meta(events.MetaNodeFirstKey)
	if first == nil {
		// Never rotated: every node message in the log is the current
		// key's (the owner check saw to that), and it becomes the first.
		firstText, _ = protocol.MarshalPublicKey(old.Public())
	}
	// Key decisions depend on signatures, timestamps and the registry's
	// memory of answered requests, none of which the zones or peers
	// change, so the node's name and keys are all the fold needs here.
	f, err := projections.NewNodeKeyFollower(projections.RegistryConfig{NodeURI: m.cfg.Name, NodeKey: old, NodeFirstKey: first})
	if err != nil {
		return err
	}
	m.lg.Info("rotating the node key", "name", m.cfg.Name, "key_id", oldID, "new_key_id", nextID, "new_key_made", made)
	last, err := f.Follow(ctx, m.log)
	if err != nil {
		return err
	}
	_, cur := f.Current()
	for _, k := range f.Keys() {
		if k.KeyID == nextID && cur != nextID {
			return fmt.Errorf("%s holds a key the node had before (%s), which the log would refuse as a new one: remove it (a new key is made when there is none) and run --rotate-node-key again; nothing was rotated", nextPath, nextID)
		}
	}
	switch cur {
	case nextID:
		m.lg.Info("the log names the new key already: an interrupted rotation, finished now", "seq", last)
	case oldID:
		if made {
			// Durable before the log names it, and not before: a
			// rotation refused up to here leaves nothing behind.
			if err := keepNodeKey(nextPath, next); err != nil {
				return err
			}
		}
		if err := m.appendRotation(ctx, f, old, next); err != nil {
			return err
		}
	default:
		return fmt.Errorf("the log's node key is %s (%s), neither %s's (%s) nor %s's (%s): nothing was rotated", cur, rotatedAt(last), path, oldID, nextPath, nextID)
	}
	if err := m.log.SetOwner(ctx, newOwner, firstText); err != nil {
		return err
	}
	// Kept before the peers are told, so that the frames left for those
	// that do not take it name a key that is there.
	retired := retiredKeyPath(path, oldID)
	if err := keepNodeKey(retired, old); err != nil {
		return err
	}
	left, err := m.announceRotation(ctx, old, next)
	if err != nil {
		return err
	}
	if err := os.Rename(nextPath, path); err != nil {
		return fmt.Errorf("--node-key: the log names the new key, which is in %s: %w; run --rotate-node-key again", nextPath, err)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		// Done all the same: after a crash that lost the rename, the
		// start finds node.key.next again and a run again finishes.
		m.lg.Warn("the key file's directory could not be synced; the rotation is done", "dir", filepath.Dir(path), "err", err)
	}
	pub, _ := protocol.MarshalPublicKey(next.Public())
	if len(left) > 0 {
		m.lg.Info("node key rotated: start the node as before", "old_key_id", oldID, "key_id", nextID, "public_key", pub, "retired_key", retired)
		return fmt.Errorf("%w: %s; the old key is kept in %s until they have", errPeersLeft, strings.Join(left, ", "), retired)
	}
	m.lg.Info("node key rotated: start the node as before. The old key is kept in "+retired+": once the node has started on its store under the new key, remove it (the log keeps its public key, which is all a replay needs); if --data was not the node's store, the node's start refuses and says how to rotate its store to this key",
		"old_key_id", oldID, "key_id", nextID, "public_key", pub)
	return nil
}

// errPeersLeft says that the rotation is done but some --sync-to peers
// still hold the old key; aglxd exits with exitPeersLeft for it.
var errPeersLeft = errors.New("the node key is rotated, but these peers did not take the rotation (frames are left for them)")

// exitPeersLeft is aglxd --rotate-node-key's exit status when the
// rotation is done and a peer has yet to take it (errPeersLeft): not a
// failure to retry, which would rotate again, but a step left to the
// operator.
const exitPeersLeft = 3

// announceRotation sends every --sync-to peer the node's key.rotate,
// signed with old, and returns the peers that did not acknowledge it.
// For those it writes, beside the node key, the rotation as an unsigned
// frame per peer, for the operator to sign with the old key (kept as
// retiredKeyPath) and send once the peer is back: aglx send stamps and
// signs it (ROTATION.md).
func (m *Main) announceRotation(ctx context.Context, old, next crypto.Signer) (left []string, err error) {
	body, err := bridge.KeyRotationBody(old.Public(), next.Public(), time.Now())
	if err != nil {
		return nil, err
	}
	nextID := protocol.KeyID(next.Public())
	told := map[string]bool{} // frame names of the peers this run names
	for _, ps := range m.cfg.SyncTo {
		peer, err := bridge.ParsePeer(ps)
		if err != nil {
			return nil, fmt.Errorf("--sync-to: %w", err)
		}
		file := framePath(m.cfg.NodeKeyPath(), nextID, peer.URI)
		told[filepath.Base(file)] = true
		had, err := bridge.AnnounceKeyRotation(ctx, peer, m.cfg.Name, old, next, body)
		if err != nil {
			if err := m.writeRotationFrame(file, peer.URI, old, next); err != nil {
				return nil, err
			}
			m.lg.Error("a --sync-to peer did not take the node's key rotation: until it does, it refuses this node's registry.sync (401). Once it is back, send it the rotation signed with the old key, then remove the frame",
				"peer", peer.URI, "addr", peer.Addr, "err", err,
				"send", "aglx send --key "+shellQuote(retiredKeyPath(m.cfg.NodeKeyPath(), protocol.KeyID(old.Public())))+" --tls "+sendTrust(peer)+" "+shellQuote(file))
			left = append(left, peer.URI)
			continue
		}
		// A frame a stopped run of this rotation left for it is done with.
		if err := os.Remove(file); err != nil && !errors.Is(err, fs.ErrNotExist) {
			m.lg.Warn("a frame for a peer that took the rotation could not be removed; remove it by hand", "path", file, "err", err)
		}
		if had {
			m.lg.Info("the peer has the new key already (an earlier run told it)", "peer", peer.URI, "addr", peer.Addr)
			continue
		}
		m.lg.Info("the peer took the node's key rotation", "peer", peer.URI, "addr", peer.Addr)
	}
	// Frames a stopped run of this rotation left for peers no longer
	// named: still to be sent, by hand.
	for _, f := range framesOf(m.cfg.NodeKeyPath(), nextID) {
		if !told[filepath.Base(f)] {
			m.lg.Error("a frame of this rotation is left for a peer this run does not name in --sync-to: send it by hand, then remove it", "frame", f)
			left = append(left, filepath.Base(f))
		}
	}
	return left, nil
}

// appendRotation appends the node's key.rotate, signed with old, waits for
// it to be durable and folded, and checks that the fold took it.
func (m *Main) appendRotation(ctx context.Context, f *projections.NodeKeyFollower, old, next crypto.Signer) error {
	now := time.Now().UTC()
	body, err := bridge.KeyRotationBody(old.Public(), next.Public(), now)
	if err != nil {
		return err
	}
	fr, err := bridge.KeyRotationFrame(m.cfg.Name, m.cfg.Name, old, body)
	if err != nil {
		return err
	}
	id := fr.ID()
	msg, err := protocol.Parse(fr)
	if err != nil {
		return fmt.Errorf("the rotation's own frame: %w", err)
	}
	env := &events.Envelope{
		ID: id, MsgID: id, Type: protocol.TypeKeyRotate, From: m.cfg.Name, To: m.cfg.Name,
		Transport: events.TransportNode, Declared: fr.Transport, ReceivedAt: now,
		Headers: fr.Headers, Body: fr.Body, Msg: msg,
	}
	a, err := m.log.Append(ctx, env).Wait(ctx)
	if err != nil {
		return fmt.Errorf("appending the rotation: %w; nothing is rotated unless the log took it, and --rotate-node-key again finds out", err)
	}
	m.lg.Info("the rotation is durable", "seq", a.Seq, "event_id", a.EventID)
	wctx, cancel := context.WithTimeout(ctx, rotationFoldWait)
	defer cancel()
	if err := m.log.WaitPublished(wctx, a.Seq); err != nil {
		return fmt.Errorf("the rotation at seq %d did not reach the event stream within %s (%w); run --rotate-node-key again", a.Seq, rotationFoldWait, err)
	}
	if _, err := f.Follow(ctx, m.log); err != nil {
		return err
	}
	if _, cur := f.Current(); cur != protocol.KeyID(next.Public()) {
		reason := "no answer"
		if rep, ok := f.Answer(a.Seq); ok {
			reason = string(rep.Body)
		}
		return fmt.Errorf("the log refused the rotation at seq %d (%s): the node key stays %s", a.Seq, reason, cur)
	}
	return nil
}
