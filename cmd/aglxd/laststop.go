package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/aglx/ledger/bridge"
	"github.com/aglx/ledger/ledger"
)

// lastStopFile, beside the node's key, records what a clean stop left:
// the build, the position the folds had applied, and the ledger's digest
// there. The next start folds the same log again, under its own build,
// and compares (checkLastStop): a rule changed between builds changes
// balances on replay (docs/DESIGN.md, "Changes in what an older log
// replays to"), and until 2026-12-02 an upgrade did so without a word
// (helper-106).
const lastStopFile = "last-stop.json"

// lastStopPostingsMax bounds the ledger a stop hashes for the record, in
// postings: about 2 µs each, so some 4 s of a stop's 30. A larger ledger
// is recorded without its digest, and the start then compares the build
// only.
const lastStopPostingsMax = 2_000_000 // postings

// lastStopWait bounds how long a stop waits for the folds to apply the
// last events before it records them.
const lastStopWait = 2 * time.Second

type lastStop struct {
	Version    string    `json:"version"`
	AppliedSeq uint64    `json:"applied_seq"`
	Ledger     string    `json:"ledger_sha256,omitempty"`
	At         time.Time `json:"at"`
}

func (m *Main) lastStopPath() string {
	return filepath.Join(filepath.Dir(m.cfg.NodeKeyPath()), lastStopFile)
}

// recordStop writes the record of a clean stop, once no frame can be
// appended any more. What cannot be recorded is logged, not failed: the
// next start then has nothing to compare with.
func (m *Main) recordStop(ctx context.Context) {
	if m.runner == nil || m.credits == nil || m.log == nil {
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
	rec := lastStop{Version: bridge.Version(), At: time.Now().UTC()}
	var frozen *ledger.Frozen
	m.runner.View(func(applied uint64) {
		rec.AppliedSeq = applied
		if f := m.credits.L.Freeze(); f.Postings() <= lastStopPostingsMax {
			frozen = f
		}
	})
	if frozen != nil {
		d, err := ledgerSHA256(frozen)
		if err != nil {
			m.lg.Warn("the stop is not recorded", "err", err)
			return
		}
		rec.Ledger = d
	}
	b, _ := json.Marshal(rec)
	if err := bridge.WriteFileDurable(m.lastStopPath(), b, 0o600); err != nil {
		m.lg.Warn("the stop is not recorded: the next start cannot tell whether its build folds the log as this one did", "path", m.lastStopPath(), "err", err)
	}
}

// watchLastStop reads the record of the last clean stop and has the
// ledger compared with it when the replay at start passes the position
// it names (Runner.AtSeq: the node takes frames while it replays, so the
// state must be taken there, not once replayed), and says so: a build
// that folds the same log to another ledger is an upgrade that moved
// balances. It removes the record, which describes one stop only. Call
// it before the runner runs.
func (m *Main) watchLastStop() {
	path := m.lastStopPath()
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	os.Remove(path)
	var rec lastStop
	if err != nil || json.Unmarshal(b, &rec) != nil {
		m.lg.Warn("the record of the last stop cannot be read; nothing is compared", "path", path, "err", err)
		return
	}
	now := bridge.Version()
	args := []any{"last_version", rec.Version, "version", now, "seq", rec.AppliedSeq}
	if rec.AppliedSeq == 0 || rec.Ledger == "" {
		if rec.Version != now {
			m.lg.Info("this build differs from the one that stopped last, whose ledger was empty or too large to hash at the stop: docs/DESIGN.md lists what folds differently, by date", args...)
		}
		return
	}
	m.runner.AtSeq(rec.AppliedSeq, func(exact bool) {
		if !exact {
			m.lg.Info("the ledger could not be compared with the last stop's: the log no longer has the event it stopped at", args...)
			return
		}
		frozen := m.credits.L.Freeze()
		m.wg.Add(1)
		go func() { // hashing is most of the cost, off the folds' lock
			defer m.wg.Done()
			d, err := ledgerSHA256(frozen)
			switch {
			case err != nil:
				m.lg.Warn("the ledger could not be compared with the last stop's", "err", err)
			case d != rec.Ledger:
				m.lg.Warn("THE LEDGER FOLDS DIFFERENTLY under this build: the same log gives other balances than under the build that stopped last. docs/DESIGN.md, \"Changes in what an older log replays to\", lists why by date; to keep the old balances, run the old build; `aglx audit` checks the new ones",
					append(args, "last_ledger_sha256", rec.Ledger, "ledger_sha256", d)...)
			case rec.Version != now:
				m.lg.Info("this build folds the log to the same ledger as the one that stopped last", append(args, "ledger_sha256", d)...)
			default:
				m.lg.Debug("the ledger is as the last stop left it", append(args, "ledger_sha256", d)...)
			}
		}()
	})
}

// ledgerSHA256 is the SHA-256 of a frozen ledger's snapshot, the digest
// of GET /v1/ledger/digest.
func ledgerSHA256(f *ledger.Frozen) (string, error) {
	h := sha256.New()
	if _, err := f.WriteTo(h); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
