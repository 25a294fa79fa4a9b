package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aglx/ledger/bridge"
	"github.com/aglx/ledger/projections"
)

// foldStateFile, beside the node's key and last-stop.json, holds the
// folds' whole state as a clean stop left it (projections.EncodeState),
// so that the next start folds only the events after it instead of the
// whole log (docs/DESIGN.md, "Saved fold state"). It is derived from the
// log: removing it costs a full replay, nothing else.
const foldStateFile = "folds.state"

// foldStateFileMax bounds the saved state a start reads into memory, in
// bytes. A state is about the size of the folds in memory; one larger
// than this is not read, and the log is replayed instead.
const foldStateFileMax = 64 << 30 // bytes

func (m *Main) foldStatePath() string {
	return filepath.Join(filepath.Dir(m.cfg.NodeKeyPath()), foldStateFile)
}

// binarySHA256 is the SHA-256 of the running binary, part of a saved
// state's identity: the version alone names a commit, and two builds of
// one commit with other changes in the tree ("+dirty", or "devel" under
// go run) may fold the same events differently. On Linux the running
// binary is read through /proc/self/exe, which is the file that was
// started even if an upgrade has replaced it on disk since.
var binarySHA256 = sync.OnceValues(func() (string, error) {
	path := "/proc/self/exe"
	if runtime.GOOS != "linux" {
		p, err := os.Executable()
		if err != nil {
			return "", err
		}
		path = p
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
})

// foldIdentity is what a saved state must have been saved under to be
// loaded: this build and the folds' inputs besides the log (foldInputs),
// and the zone token key's digest (a key made anew, after a lost one,
// answers joins with other tokens on replay).
func (m *Main) foldIdentity() (map[string]string, error) {
	bin, err := binarySHA256()
	if err != nil {
		return nil, fmt.Errorf("reading the running binary: %w", err)
	}
	if m.cfg.build != "" {
		bin = m.cfg.build
	}
	in := m.foldInputs()
	return map[string]string{
		"version":       in.Version,
		"binary_sha256": bin,
		"name":          in.Name,
		"key_id":        in.KeyID,
		"zones_sha256":  in.Zones,
		"sync_from":     strings.Join(in.SyncFrom, " "),
		"token_key":     m.tokenKeyDigest,
	}, nil
}

// useFolds makes folds (and the outbox they answer into) the node's.
func (m *Main) useFolds(folds *projections.Folds, outbox *projections.Outbox) {
	m.folds, m.outbox = folds, outbox
	m.registry, m.credits, m.handshakes, m.reputation, m.stats = folds.Registry, folds.Credits, folds.Handshakes, folds.Reputation, folds.Stats
}

// startFolds makes the node's folds under cfg (whose Outbox it sets) and
// loads them from the saved state when that state is this build's, under
// these inputs, of this log. It returns the sequence the state stands at,
// after which the runner takes up the log (Runner.Resume), or 0 for a
// replay from the first event. Anything wrong with the state is said and
// costs a full replay, never a start: the state is only ever a shortcut.
func (m *Main) startFolds(ctx context.Context, cfg projections.RegistryConfig) uint64 {
	m.foldConfig = cfg
	fresh := func() { m.useFolds(newFolds(cfg)) }
	fresh()
	path := m.foldStatePath()
	if m.cfg.FullReplay {
		m.lg.Info("--full-replay: the folds replay the whole log; the saved state is not read", "path", path)
		return 0
	}
	seq, why, err := m.loadFoldState(ctx, path)
	if seq > 0 {
		m.stateLoadedFrom = path
		return seq
	}
	fresh() // a failed load leaves the folds half loaded
	if seq := m.loadPreparedState(ctx, path, why, err); seq > 0 {
		return seq
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		m.lg.Debug("no saved fold state: the folds replay the whole log", "path", path)
	case err != nil:
		m.lg.Warn("the saved fold state cannot be used; the folds replay the whole log", "path", path, "err", err)
	default:
		m.lg.Info("the saved fold state is not this node's as it starts; the folds replay the whole log", "path", path, "why", why)
	}
	fresh()
	return 0
}

// loadPreparedState loads the state this build prepared ahead of its start
// (prepare.go), when the node's saved state at path was not used (why or
// err say why not), and returns its sequence, or 0 if there is none or it
// cannot be used either, which it says.
func (m *Main) loadPreparedState(ctx context.Context, path, why string, err error) uint64 {
	prepared := m.preparedStatePath()
	fi, serr := os.Stat(prepared)
	if serr != nil {
		return 0
	}
	seq, pwhy, perr := m.loadFoldState(ctx, prepared)
	if seq > 0 {
		if err != nil {
			why = err.Error()
		}
		m.lg.Info("the saved fold state is not this node's as it starts; the state prepared for this build is", "path", path, "why", why, "prepared", prepared)
		m.stateLoadedFrom, m.preparedLoaded = prepared, fi
		return seq
	}
	if perr != nil {
		pwhy = perr.Error()
	}
	m.lg.Warn("the fold state prepared ahead of this start cannot be used", "path", prepared, "why", pwhy)
	return 0
}

// loadFoldState loads the saved state at path into the node's fresh folds
// and returns its sequence, or why it was not used: why for a state that
// is fine but not this start's (another build, other inputs, another
// log), err for one that could not be read or loaded.
func (m *Main) loadFoldState(ctx context.Context, path string) (seq uint64, why string, err error) {
	started := time.Now()
	h, size, why, err := m.readFoldState(ctx, path, m.folds, m.outbox, m.log.Durable())
	if err != nil || why != "" {
		return 0, why, err
	}
	if err := m.checkLoadedAgainstLastStop(h); err != nil {
		return 0, "", err
	}
	m.lg.Info("folds loaded from the saved state; the log is replayed from the event after it", "path", path, "seq", h.Seq,
		"saved_at", h.SavedAt, "bytes", size, "took", time.Since(started).Round(time.Millisecond))
	return h.Seq, "", nil
}

// readFoldState loads the saved state at path into folds and outbox (fresh
// ones) if it is this node's: this build's, under these inputs, of this
// log. It returns the state's header and size, or why it was not loaded:
// why for a state that is fine but not this node's, err for one that
// could not be read or loaded (which may leave the folds half loaded). end
// is where the log ends: a state past it is another log's.
func (m *Main) readFoldState(ctx context.Context, path string, folds *projections.Folds, outbox *projections.Outbox, end uint64) (h projections.StateHeader, size int, why string, err error) {
	fi, err := os.Stat(path)
	if err != nil {
		return h, 0, "", err
	}
	if fi.Size() > foldStateFileMax {
		return h, 0, "", fmt.Errorf("%d bytes, more than the %d a start reads", fi.Size(), int64(foldStateFileMax))
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return h, 0, "", err
	}
	saved, err := projections.ReadState(b)
	if err != nil {
		return h, 0, "", err
	}
	h = saved.Header
	want, err := m.foldIdentity()
	if err != nil {
		return h, 0, "", err
	}
	if differs := identityDiffers(h.Identity, want); len(differs) > 0 {
		return h, 0, "saved under another " + strings.Join(differs, ", "), nil
	}
	if h.Seq > end || h.Seq == 0 {
		return h, 0, fmt.Sprintf("it stands at sequence %d, past this log's end (%d): another log", h.Seq, end), nil
	}
	e, err := m.log.Get(ctx, h.Seq)
	if err != nil {
		return h, 0, "", fmt.Errorf("reading its event %d: %w", h.Seq, err)
	}
	if e.ID != h.EventID {
		return h, 0, fmt.Sprintf("this log's event %d is %s, not the state's %s: another log", h.Seq, e.ID, h.EventID), nil
	}
	if err := saved.Load(folds, outbox); err != nil {
		return h, 0, "", err
	}
	if err := checkDigests(h.Digests, folds); err != nil {
		return h, 0, "", err
	}
	return h, len(b), "", nil
}

// identityDiffers names the parts of a saved state's identity that are not
// this start's.
func identityDiffers(saved, now map[string]string) []string {
	var out []string
	for k, v := range now {
		if saved[k] != v {
			out = append(out, k)
		}
	}
	for k := range saved {
		if _, ok := now[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// checkLoadedAgainstLastStop compares the loaded folds with the digests
// the last clean stop recorded, when that stop is the one that saved the
// state (the same event): a state that loads but folds to other digests
// than the ones its own stop saw is not used. This is the start's own
// check of every save and load (the same build and inputs, so nothing
// else may differ), as far as the record holds digests (lastStop's
// bounds).
func (m *Main) checkLoadedAgainstLastStop(h projections.StateHeader) error {
	rec, ok := m.readLastStop()
	if !ok || rec.AppliedSeq != h.Seq || rec.EventID != h.EventID {
		return nil
	}
	if now := m.foldInputs(); rec.Version != now.Version && rec.Ledger != "" {
		// A state this build prepared before its start (prepare.go), at
		// the event where an older build stopped: the record cannot vouch
		// for it, but the two builds are compared here as a replay would
		// compare them passing the event (watchLastStop), and said.
		var snaps map[string][]byte
		if len(rec.Folds) > 0 {
			snaps = m.foldSnapshots()
		}
		m.compareLastStop(rec, rec.changedFrom(now), m.credits.L.Freeze(), snaps)
		return nil
	}
	if len(h.Digests) > 0 {
		// The loaded folds match the state's own digests already
		// (readFoldState); its stop computed them from the same folds as
		// the record's, so the two must agree, which needs no hashing.
		want := maps.Clone(rec.Folds)
		if rec.Ledger != "" {
			want["ledger"] = rec.Ledger
		}
		for _, name := range slices.Sorted(maps.Keys(want)) {
			if got, ok := h.Digests[name]; ok && got != want[name] {
				return fmt.Errorf("the saved state's %s digest is %s, where the stop that saved it recorded %s", name, got, want[name])
			}
		}
		return nil
	}
	if rec.Ledger != "" {
		if f := m.credits.L.Freeze(); f.Postings() <= lastStopPostingsMax {
			d, err := projections.FrozenSHA256(f)
			if err != nil {
				return err
			}
			if d != rec.Ledger {
				return fmt.Errorf("the loaded ledger's digest is %s, where the stop that saved it recorded %s", d, rec.Ledger)
			}
		}
	}
	now := sha256Hex(m.foldSnapshots())
	for _, name := range foldNames {
		if was, is := rec.Folds[name], now[name]; was != "" && is != "" && was != is {
			return fmt.Errorf("the loaded %s fold's digest is %s, where the stop that saved it recorded %s", name, is, was)
		}
	}
	return nil
}

// newFolds makes folds under cfg with an outbox of their own.
func newFolds(cfg projections.RegistryConfig) (*projections.Folds, *projections.Outbox) {
	cfg.Outbox = projections.NewOutbox()
	return projections.NewFolds(cfg), cfg.Outbox
}

// encodeFoldState is the saved state of folds and outbox, standing at seq
// (the event eventID), under this node's identity. digests are the folds'
// (foldDigests), or nil to compute them here. Call it with the folds
// locked, or where nothing else uses them.
func (m *Main) encodeFoldState(folds *projections.Folds, outbox *projections.Outbox, seq uint64, eventID string, digests map[string]string) ([]byte, error) {
	id, err := m.foldIdentity()
	if err != nil {
		return nil, err
	}
	if digests == nil {
		if digests, err = foldDigests(folds); err != nil {
			return nil, err
		}
	}
	return projections.EncodeState(projections.StateHeader{Identity: id, Seq: seq, EventID: eventID, SavedAt: time.Now().UTC(), Digests: digests}, folds, outbox)
}

// saveFoldState saves the folds' state for the next start. Call it at a
// clean stop once the folds hold the log's end and nothing more can be
// appended (recordStop). What cannot be saved is logged, not failed: the
// next start then uses the state an earlier stop saved, which is still
// good for this log (it only grows), or replays the whole log.
//
// digests are the folds' digests as the stop's record computed them at
// the same event, or nil, and then they are computed here (foldDigests).
func (m *Main) saveFoldState(ctx context.Context, digests map[string]string) {
	started := time.Now()
	seq := m.runner.Applied()
	if seq == 0 {
		return
	}
	e, err := m.log.Get(ctx, seq)
	var b []byte
	if err == nil {
		m.runner.View(func(applied uint64) {
			if applied != seq {
				// Nothing is appended at a stop, so this is a fault.
				err = fmt.Errorf("the folds moved from %d to %d while the state was saved", seq, applied)
				return
			}
			b, err = m.encodeFoldState(m.folds, m.outbox, seq, e.ID, digests)
		})
	}
	if err == nil {
		err = bridge.WriteFileDurable(m.foldStatePath(), b, 0o600)
	}
	if err != nil {
		m.lg.Warn("the fold state is not saved: the next start replays from an earlier saved state, or the whole log", "path", m.foldStatePath(), "err", err)
		return
	}
	m.dropPreparedState()
	m.lg.Info("fold state saved for the next start", "path", m.foldStatePath(), "seq", seq, "bytes", len(b), "took", time.Since(started).Round(time.Millisecond))
}
