package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/aglx/ledger/bridge"
	"github.com/aglx/ledger/projections"
)

// zonesDigestFile, beside the node's key, records which zone
// configuration the node last ran with (projections.ZonesDigest).
const zonesDigestFile = "zones.sha256"

// noteZoneChange warns when the zone configuration differs from the one
// this data dir last ran with, and records the new one. The zone file is
// an input to the folds: memberships are folded again from the log at
// every start, under the zones as configured now, so a changed minimum or
// a removed zone changes past answers' effects (helper-81: a restart
// without --zones emptied every zone with no word). A warning, not a
// refusal: changing the zones is the operator's to do. Nor does a digest
// that cannot be written stop the node (a key directory on a read-only
// mount, helper-83): the start then only says so.
func (m *Main) noteZoneChange(zones []projections.Zone) error {
	path := filepath.Join(filepath.Dir(m.cfg.NodeKeyPath()), zonesDigestFile)
	now := projections.ZonesDigest(zones)
	was, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("zone digest: %w", err)
	case string(was) == now:
		return nil
	default:
		m.lg.Warn("the zone configuration differs from the one this data dir last ran with: zone memberships are folded again from the log under the new one, and may differ from what agents were told (zone.confirm, zone.deny); restore the old --zones file to keep them",
			"zones", m.cfg.Zones, "was", string(was), "now", now)
	}
	err = os.MkdirAll(filepath.Dir(path), 0o700)
	if err == nil {
		err = bridge.WriteFileDurable(path, []byte(now), 0o600)
	}
	if err != nil {
		m.lg.Warn("the zone configuration's digest could not be recorded: a later start under other zones will not be noticed", "path", path, "err", err)
	}
	return nil
}
