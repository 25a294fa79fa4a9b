package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/aglx/ledger/bridge"
)

// syncFromFile, beside the node's key, records the peers whose
// registry.sync the node last took (--sync-from), one per line. Peers are
// no secret, so the file says them rather than a digest of them, and an
// operator can read it.
const syncFromFile = "sync-from.txt"

// noteSyncFromChange warns when --sync-from names other peers than this
// data dir last ran with, and records the new ones. Like the zone file
// (noteZoneChange), --sync-from is an input to the registry fold: every
// start folds the whole log again under it, so a peer added now has its
// past syncs, refused when they came, merged into the registry, and a
// peer removed has its past syncs undone. The start already warns of
// syncs refused from peers not named (warnUnnamedSyncs); this says what
// changed, which that cannot: a peer added has no refused syncs left to
// warn of. A warning, not a refusal, and a file that cannot be written
// only makes the start say so.
func (m *Main) noteSyncFromChange(peers []string) error {
	path := filepath.Join(filepath.Dir(m.cfg.NodeKeyPath()), syncFromFile)
	now := slices.Sorted(slices.Values(peers))
	now = slices.Compact(now)
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("sync-from record: %w", err)
	default:
		was := slices.Sorted(slices.Values(strings.Fields(string(b))))
		added, removed := setDiff(now, was), setDiff(was, now)
		if len(added) == 0 && len(removed) == 0 {
			return nil
		}
		m.lg.Warn("--sync-from names other peers than this data dir last ran with: the registry is folded again from the log under the new list, so the past registry.sync of a peer added is now merged, and that of a peer removed undone; restore the old --sync-from to keep the registry as it was",
			"added", strings.Join(added, " "), "removed", strings.Join(removed, " "), "record", path)
	}
	err = os.MkdirAll(filepath.Dir(path), 0o700)
	if err == nil {
		var out strings.Builder
		for _, p := range now {
			out.WriteString(p + "\n")
		}
		err = bridge.WriteFileDurable(path, []byte(out.String()), 0o600)
	}
	if err != nil {
		m.lg.Warn("the --sync-from list could not be recorded: a later start under other peers will not be noticed", "path", path, "err", err)
	}
	return nil
}

// setDiff is what of a is not in b; both sorted.
func setDiff(a, b []string) []string {
	var out []string
	for _, s := range a {
		if _, found := slices.BinarySearch(b, s); !found {
			out = append(out, s)
		}
	}
	return out
}
