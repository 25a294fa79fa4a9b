package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/aglx/ledger/bridge"
	"github.com/aglx/ledger/ledger"
	"github.com/aglx/ledger/projections"
	"github.com/aglx/ledger/protocol"
)

// lastStopFile, beside the node's key, records what a clean stop left:
// the build, the fold's inputs besides the log, the event the folds had
// applied last, and the digests of the ledger and of the other folds'
// state there (the registry, the handshakes, reputation). Later starts
// fold the same log again, under their own build and inputs, and compare
// when their replay passes that event (watchLastStop): a rule changed
// between builds, or an input changed, changes state on replay
// (docs/DESIGN.md, "Changes in what an older log replays to"), and until
// 2026-12-02 an upgrade did so without a word (helper-106). The log only
// grows, so the record stays good until the next clean stop replaces it.
const lastStopFile = "last-stop.json"

// lastStopPostingsMax bounds the ledger a stop hashes for the record, in
// postings: about 2 µs each, so some 4 s of a stop's 30. A larger ledger
// is recorded without its digest, and a start then compares nothing.
const lastStopPostingsMax = 2_000_000 // postings

// lastStopFoldEntriesMax bounds a fold whose snapshot is recorded, in
// entries (agents, keys, handshakes, rated pairs and the like): a
// snapshot is made under the folds' lock (a stop's, or the replay's once
// at the recorded event, which holds up the replay meanwhile), and JSON
// for 100,000 registry entries (19 MB) took 0.5-1 s here on a busy
// machine, so a larger fold is left out of the record, and of the
// comparison: three folds at the bound cost some tenths of a second.
const lastStopFoldEntriesMax = 20_000 // entries

// lastStopWait bounds how long a stop waits for the folds to apply the
// last events before it records them.
const lastStopWait = 2 * time.Second

type lastStop struct {
	Version string `json:"version"`
	// The fold's inputs besides the log: another of them folds the same
	// log differently as surely as another build.
	Name     string   `json:"name"`
	KeyID    string   `json:"key_id"`
	Zones    string   `json:"zones_sha256"`
	SyncFrom []string `json:"sync_from,omitempty"`
	// AppliedSeq and EventID name the last event applied: a log whose
	// event there is another (a store replaced, another stream) is not
	// the one recorded (helper-107).
	AppliedSeq uint64 `json:"applied_seq"`
	EventID    string `json:"event_id"`
	Ledger     string `json:"ledger_sha256,omitempty"`
	// Folds holds the SHA-256 of the other folds' snapshots by name
	// (foldNames): an upgrade can change memberships, key bindings,
	// handshakes or scores as surely as balances. Records before
	// 2026-12-02, evening, have only the ledger's.
	Folds map[string]string `json:"folds_sha256,omitempty"`
	At    time.Time         `json:"at"`
}

// foldNames are the folds besides the ledger whose state the record
// holds, in the order a start names them.
var foldNames = []string{"registry", "handshakes", "reputation"}

// foldSnapshots takes the snapshot of each of foldNames; call it with the
// folds locked (Runner.View, Runner.AtSeq). A fold past
// lastStopFoldEntriesMax, or whose snapshot cannot be made, is left out.
func (m *Main) foldSnapshots() map[string][]byte { return foldSnapshotsOf(m.folds) }

// foldSnapshotsOf is foldSnapshots of any folds: call it with them locked,
// or where nothing else uses them.
func foldSnapshotsOf(folds *projections.Folds) map[string][]byte {
	out := make(map[string][]byte, len(foldNames))
	for i, f := range []interface {
		Snapshot() ([]byte, error)
		SnapshotEntries() int
	}{folds.Registry, folds.Handshakes, folds.Reputation} {
		if f.SnapshotEntries() > lastStopFoldEntriesMax {
			continue
		}
		if b, err := f.Snapshot(); err == nil {
			out[foldNames[i]] = b
		}
	}
	return out
}

// foldDigests are the digests a saved state's header carries
// (projections.StateHeader.Digests): the ledger's and the other folds'
// as the last stop's record has them, within the same bounds. Call it
// with folds locked, or where nothing else uses them.
func foldDigests(folds *projections.Folds) (map[string]string, error) {
	out := sha256Hex(foldSnapshotsOf(folds))
	if f := folds.Credits.L.Freeze(); f.Postings() <= lastStopPostingsMax {
		d, err := projections.FrozenSHA256(f)
		if err != nil {
			return nil, err
		}
		out["ledger"] = d
	}
	return out, nil
}

// checkDigests compares the digests a saved state carries with those of
// the folds it was loaded into: a field saved or loaded wrongly shows here.
func checkDigests(saved map[string]string, folds *projections.Folds) error {
	if len(saved) == 0 {
		return nil
	}
	now, err := foldDigests(folds)
	if err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(saved)) {
		if is := now[name]; is != saved[name] {
			return fmt.Errorf("the loaded %s fold's digest is %q, where the state's saver recorded %s", name, is, saved[name])
		}
	}
	return nil
}

// sha256Hex is the digest of each snapshot, by name.
func sha256Hex(snaps map[string][]byte) map[string]string {
	out := make(map[string]string, len(snaps))
	for name, b := range snaps {
		sum := sha256.Sum256(b)
		out[name] = hex.EncodeToString(sum[:])
	}
	return out
}

func (m *Main) lastStopPath() string {
	return filepath.Join(filepath.Dir(m.cfg.NodeKeyPath()), lastStopFile)
}

// foldInputs is rec with this node's build and inputs.
func (m *Main) foldInputs() lastStop {
	version := bridge.Version()
	if m.cfg.build != "" {
		version = m.cfg.build
	}
	return lastStop{Version: version, Name: m.cfg.Name, KeyID: protocol.KeyID(m.key.Public()),
		Zones: m.zonesDigest, SyncFrom: slices.Sorted(slices.Values(m.cfg.SyncFrom))}
}

// recordStop writes the record of a clean stop, once no frame can be
// appended any more. What cannot be recorded is logged, not failed: a
// start then compares with the record before, or with none.
func (m *Main) recordStop(ctx context.Context) {
	if m.runner == nil || m.credits == nil || m.registry == nil || m.handshakes == nil || m.reputation == nil || m.log == nil || m.key == nil {
		return
	}
	select {
	case <-m.runner.Ready():
	default:
		return // stopped while replaying: the folds do not hold the log's end
	}
	if m.log.Healthy() != nil {
		return // a log in trouble: the folds may never get to its end
	}
	stopCtx := ctx
	ctx, cancel := context.WithTimeout(ctx, lastStopWait)
	defer cancel()
	end := m.log.Durable()
	if err := m.runner.WaitFor(ctx, end); err != nil {
		m.lg.Info("the stop is not recorded: the folds had not applied the log's end", "seq", end, "applied", m.runner.Applied())
		return
	}
	// Once the record is written, with the stop's own deadline: saving a
	// large state takes seconds, which spent first left the record's read
	// of its event no time, and a start no record to check the state by
	// (helper-126).
	var digests map[string]string // the record's, for the saved state's header
	defer func() { m.saveFoldState(stopCtx, digests) }()
	rec := m.foldInputs()
	rec.At = time.Now().UTC()
	var frozen *ledger.Frozen
	var snaps map[string][]byte
	m.runner.View(func(applied uint64) {
		rec.AppliedSeq = applied
		if f := m.credits.L.Freeze(); f.Postings() <= lastStopPostingsMax {
			frozen = f
			snaps = m.foldSnapshots()
		}
	})
	if rec.AppliedSeq == 0 || frozen == nil {
		return // nothing to compare, or too large to hash at a stop
	}
	e, err := m.log.Get(ctx, rec.AppliedSeq)
	if err != nil {
		m.lg.Info("the stop is not recorded: its last event could not be read", "seq", rec.AppliedSeq, "err", err)
		return
	}
	rec.EventID = e.ID
	if rec.Ledger, err = projections.FrozenSHA256(frozen); err != nil {
		m.lg.Warn("the stop is not recorded", "err", err)
		return
	}
	rec.Folds = sha256Hex(snaps)
	digests = maps.Clone(rec.Folds)
	digests["ledger"] = rec.Ledger
	b, _ := json.Marshal(rec)
	if err := bridge.WriteFileDurable(m.lastStopPath(), b, 0o600); err != nil {
		m.lg.Warn("the stop is not recorded: the next start cannot tell whether it folds the log as this one did", "path", m.lastStopPath(), "err", err)
	}
}

// watchLastStop reads the record of the last clean stop and, if this log
// reaches its event, has the ledger compared with it when the replay
// passes there (Runner.AtSeq: the node takes frames while it replays, so
// the state must be taken there, not once replayed), and says so: the
// same log folded to another ledger means the build or an input moved
// balances. Call it before the runner runs.
func (m *Main) watchLastStop(resumedAt uint64) {
	path := m.lastStopPath()
	rec, ok := m.readLastStop()
	if !ok || rec.AppliedSeq == 0 || rec.Ledger == "" {
		return
	}
	if rec.AppliedSeq <= resumedAt {
		// The folds were loaded at or past the recorded event, so the
		// replay never passes it: at it, the load compared the state
		// with the record itself (checkLoadedAgainstLastStop); past it,
		// the record is older than the state and nothing is compared.
		return
	}
	if end := m.log.Durable(); rec.AppliedSeq > end {
		m.lg.Info("the record of the last stop names a position past this log's end: another log; nothing is compared", "path", path, "seq", rec.AppliedSeq, "log_end", end)
		return
	}
	now := m.foldInputs()
	changed := rec.changedFrom(now)
	m.runner.AtSeq(rec.AppliedSeq, func(ev *projections.Event) {
		if ev.Seq != rec.AppliedSeq || ev.ID != rec.EventID {
			m.lg.Info("the record of the last stop names another event at its position: another log; nothing is compared", "path", path, "seq", rec.AppliedSeq, "event_id", rec.EventID, "here", ev.ID)
			return
		}
		frozen := m.credits.L.Freeze()
		var snaps map[string][]byte
		if len(rec.Folds) > 0 {
			snaps = m.foldSnapshots()
		}
		m.wg.Add(1)
		go func() { // hashing is most of the cost, off the folds' lock
			defer m.wg.Done()
			m.compareLastStop(rec, changed, frozen, snaps)
		}()
	})
}

// readLastStop reads the record of the last clean stop; ok is false when
// there is none, or it cannot be read (which is said).
func (m *Main) readLastStop() (rec lastStop, ok bool) {
	path := m.lastStopPath()
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return rec, false
	}
	if err != nil || json.Unmarshal(b, &rec) != nil {
		m.lg.Warn("the record of the last stop cannot be read; nothing is compared", "path", path, "err", err)
		return rec, false
	}
	return rec, true
}

// compareLastStop says how the ledger and the other folds at the last
// stop's event compare with those recorded there: differs names the
// folds whose state is not the recorded one, with both digests of each.
func (m *Main) compareLastStop(rec lastStop, changed []string, frozen *ledger.Frozen, snaps map[string][]byte) {
	d, err := projections.FrozenSHA256(frozen)
	if err != nil {
		m.lg.Warn("the folds could not be compared with the last stop's", "err", err)
		return
	}
	args := []any{"seq", rec.AppliedSeq, "last_version", rec.Version, "version", bridge.Version(), "changed", strings.Join(changed, ", ")}
	var differs []string
	var digests []any
	if d != rec.Ledger {
		differs = append(differs, "ledger")
		digests = append(digests, "last_ledger_sha256", rec.Ledger, "ledger_sha256", d)
	}
	now := sha256Hex(snaps)
	for _, name := range foldNames {
		was, is := rec.Folds[name], now[name]
		if (was == "") != (is == "") {
			m.lg.Debug("a fold is not compared with the last stop's: it is past the bound on one side", "fold", name, "entries_max", lastStopFoldEntriesMax)
		}
		if was != "" && is != "" && was != is {
			differs = append(differs, name)
			digests = append(digests, "last_"+name+"_sha256", was, name+"_sha256", is)
		}
	}
	args = append(args, "differs", strings.Join(differs, ", "))
	switch {
	case len(differs) > 0 && len(changed) == 0:
		// Nothing that should fold differently did: a fault to look into.
		m.lg.Error("THE LOG FOLDS DIFFERENTLY than at the last stop, under the same build and inputs, in what differs names: a fold that is not deterministic, or a record that was changed; run `aglx audit` and keep this log",
			append(args, digests...)...)
	case len(differs) > 0:
		m.lg.Warn("THE LOG FOLDS DIFFERENTLY than at the last stop: the same log gives another state in what differs names (the ledger: other balances) since what is named in changed. For a new build, docs/DESIGN.md, \"Changes in what an older log replays to\", lists why by date, and the old build folds as before; for a changed input, the old one does. `aglx audit` checks the new balances",
			append(args, digests...)...)
	case len(changed) > 0:
		m.lg.Info("the log folds as at the last stop, though these changed", append(args, "ledger_sha256", d)...)
	default:
		m.lg.Debug("the log folds as at the last stop", append(args, "ledger_sha256", d)...)
	}
}

// changedFrom names what of now differs from rec: the build, and each
// fold input.
func (rec lastStop) changedFrom(now lastStop) []string {
	var out []string
	if strings.Contains(rec.Version, "no commit stamped") || strings.Contains(now.Version, "no commit stamped") {
		// `go run` and builds without VCS stamp no commit: two such
		// builds may differ without their versions saying so.
		out = append(out, "the build, perhaps (not stamped with a commit)")
	}
	for _, c := range []struct {
		what      string
		was, isTo string
	}{
		{"the build", rec.Version, now.Version},
		{"--name", rec.Name, now.Name},
		{"the node key", rec.KeyID, now.KeyID},
		{"--zones", rec.Zones, now.Zones},
		{"--sync-from", strings.Join(rec.SyncFrom, " "), strings.Join(now.SyncFrom, " ")},
	} {
		if c.was != c.isTo {
			out = append(out, c.what)
		}
	}
	return out
}
