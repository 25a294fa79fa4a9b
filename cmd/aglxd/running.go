package main

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/aglx/ledger/bridge"
)

// runningFile, in the data dir, says that a node runs there: made at
// start, once the data dir is locked, and removed by a stop that
// finished. One found at start means the last run did not stop cleanly
// (SIGKILL, a crash, a lost machine, or a stop past its 30 s). The start
// after such an end logs warnings nobody had explained, from the NATS
// server recovering its stores and from the repair of the event stream,
// and said nothing about why (helper-109); now it says first that the
// last run ended so, and that those lines are the recovery.
const runningFile = "aglxd.running"

type runRecord struct {
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`
	Version string    `json:"version"`
}

// markRunning says whether the last run stopped cleanly, and records
// this one.
func (m *Main) markRunning() {
	path := filepath.Join(m.cfg.DataDir, runningFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		m.uncleanRecord = b
		var last runRecord
		json.Unmarshal(b, &last) // a record that does not read still says the run did not stop cleanly
		m.lg.Warn("the last run here did not stop cleanly (killed, crashed, the machine went down, or its stop did not finish): nothing it acknowledged is lost. The NATS server's warnings that follow (\"Stream state outdated\", \"Recovering stream state\") and the repair of the event stream from the write-ahead stream are the recovery, and need nothing done",
			"last_pid", last.PID, "last_started", last.Started, "last_version", last.Version)
	case !errors.Is(err, fs.ErrNotExist):
		m.lg.Warn("the record of the last run cannot be read", "path", path, "err", err)
	}
	b, _ = json.Marshal(runRecord{PID: os.Getpid(), Started: time.Now().UTC(), Version: bridge.Version()})
	// Durably: a machine that goes down is one of the ends it is for.
	if err := bridge.WriteFileDurable(path, b, 0o600); err != nil {
		m.lg.Warn("the record of this run cannot be written; the next start cannot tell whether this one stopped cleanly", "path", path, "err", err)
		return
	}
	m.runningMarked = true
}

// markStopped removes the record of this run, after a stop that finished.
func (m *Main) markStopped() {
	if !m.runningMarked {
		return
	}
	path := filepath.Join(m.cfg.DataDir, runningFile)
	if m.uncleanRecord != nil && m.log == nil {
		// A start that failed before the log opened has not repaired the
		// event stream, nor perhaps recovered the store: the run that did
		// not stop cleanly is still the one the next start must name.
		if err := bridge.WriteFileDurable(path, m.uncleanRecord, 0o600); err != nil {
			m.lg.Warn("the record of the last run, which did not stop cleanly, cannot be put back; the next start will not say why it recovers", "path", path, "err", err)
		}
		m.runningMarked = false
		return
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		m.lg.Warn("the record of this run cannot be removed; the next start will say this one did not stop cleanly", "err", err)
	}
	m.runningMarked = false
}
