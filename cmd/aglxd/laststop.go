package main

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
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
// applied last, and the ledger's digest there. Later starts fold the same
// log again, under their own build and inputs, and compare when their
// replay passes that event (watchLastStop): a rule changed between
// builds, or an input changed, changes balances on replay
// (docs/DESIGN.md, "Changes in what an older log replays to"), and until
// 2026-12-02 an upgrade did so without a word (helper-106). The log only
// grows, so the record stays good until the next clean stop replaces it.
const lastStopFile = "last-stop.json"

// lastStopPostingsMax bounds the ledger a stop hashes for the record, in
// postings: about 2 µs each, so some 4 s of a stop's 30. A larger ledger
// is recorded without its digest, and a start then compares nothing.
const lastStopPostingsMax = 2_000_000 // postings

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
	AppliedSeq uint64    `json:"applied_seq"`
	EventID    string    `json:"event_id"`
	Ledger     string    `json:"ledger_sha256,omitempty"`
	At         time.Time `json:"at"`
}

func (m *Main) lastStopPath() string {
	return filepath.Join(filepath.Dir(m.cfg.NodeKeyPath()), lastStopFile)
}

// foldInputs is rec with this node's build and inputs.
func (m *Main) foldInputs() lastStop {
	return lastStop{Version: bridge.Version(), Name: m.cfg.Name, KeyID: protocol.KeyID(m.key.Public()),
		Zones: m.zonesDigest, SyncFrom: slices.Sorted(slices.Values(m.cfg.SyncFrom))}
}

// recordStop writes the record of a clean stop, once no frame can be
// appended any more. What cannot be recorded is logged, not failed: a
// start then compares with the record before, or with none.
func (m *Main) recordStop(ctx context.Context) {
	if m.runner == nil || m.credits == nil || m.log == nil || m.key == nil {
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
	ctx, cancel := context.WithTimeout(ctx, lastStopWait)
	defer cancel()
	end := m.log.Durable()
	if err := m.runner.WaitFor(ctx, end); err != nil {
		m.lg.Info("the stop is not recorded: the folds had not applied the log's end", "seq", end, "applied", m.runner.Applied())
		return
	}
	rec := m.foldInputs()
	rec.At = time.Now().UTC()
	var frozen *ledger.Frozen
	m.runner.View(func(applied uint64) {
		rec.AppliedSeq = applied
		if f := m.credits.L.Freeze(); f.Postings() <= lastStopPostingsMax {
			frozen = f
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
func (m *Main) watchLastStop() {
	path := m.lastStopPath()
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	var rec lastStop
	if err != nil || json.Unmarshal(b, &rec) != nil {
		m.lg.Warn("the record of the last stop cannot be read; nothing is compared", "path", path, "err", err)
		return
	}
	if rec.AppliedSeq == 0 || rec.Ledger == "" {
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
		m.wg.Add(1)
		go func() { // hashing is most of the cost, off the folds' lock
			defer m.wg.Done()
			m.compareLastStop(rec, changed, frozen)
		}()
	})
}

// compareLastStop says how the ledger at the last stop's event compares
// with the one recorded there.
func (m *Main) compareLastStop(rec lastStop, changed []string, frozen *ledger.Frozen) {
	d, err := projections.FrozenSHA256(frozen)
	args := []any{"seq", rec.AppliedSeq, "last_version", rec.Version, "version", bridge.Version(), "changed", strings.Join(changed, ", ")}
	switch {
	case err != nil:
		m.lg.Warn("the ledger could not be compared with the last stop's", "err", err)
	case d != rec.Ledger && len(changed) == 0:
		// Nothing that should fold differently did: a fault to look into.
		m.lg.Error("THE LEDGER FOLDS DIFFERENTLY than at the last stop, under the same build and inputs: a fold that is not deterministic, or a record that was changed; run `aglx audit` and keep this log",
			append(args, "last_ledger_sha256", rec.Ledger, "ledger_sha256", d)...)
	case d != rec.Ledger:
		m.lg.Warn("THE LEDGER FOLDS DIFFERENTLY than at the last stop: the same log gives other balances since what is named in changed. For a new build, docs/DESIGN.md, \"Changes in what an older log replays to\", lists why by date, and the old build folds as before; for a changed input, the old one does. `aglx audit` checks the new balances",
			append(args, "last_ledger_sha256", rec.Ledger, "ledger_sha256", d)...)
	case len(changed) > 0:
		m.lg.Info("the ledger folds as at the last stop, though these changed", append(args, "ledger_sha256", d)...)
	default:
		m.lg.Debug("the ledger folds as at the last stop", append(args, "ledger_sha256", d)...)
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
