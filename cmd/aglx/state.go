package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/aglx/ledger/projections"
)

// stateFiles are the saved fold states a node keeps beside its key: the one
// it saves itself (at a clean stop, and in the background), and one a new
// build prepared ahead of its start (aglxd --prepare-state-from).
var stateFiles = []string{"folds.state", "folds.next.state"}

// stateReport is what aglx state says of one file.
type stateReport struct {
	Path     string            `json:"path"`
	Bytes    int               `json:"bytes,omitempty"`
	Seq      uint64            `json:"seq,omitempty"`
	EventID  string            `json:"event_id,omitempty"`
	SavedAt  *time.Time        `json:"saved_at,omitempty"`
	Identity map[string]string `json:"identity,omitempty"`
	// Error says why the file cannot be read as a state: a start would
	// replay the whole log rather than use it.
	Error string `json:"error,omitempty"`
}

// runState prints the header of the saved fold states of a node's data dir
// (or of the files named): where each stands in the log, when it was
// saved, and the build and inputs a start must have to take it up. It
// reads the files only, so it works with the node stopped, which is when
// an on-call engineer wants to know what the next start will fold.
func runState(args []string, stdout io.Writer) error {
	fs := newFlagSet("state")
	data := fs.String("data", "./aglx-data", "the node's data dir: its states are in DATA/keys")
	asJSON := fs.Bool("json", false, "print JSON")
	// Flags after the files too: `aglx state FILE --json` read "--json"
	// as a file, said it was unusable, and printed a table.
	paths, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(paths) == 0 {
		for _, f := range stateFiles {
			p := filepath.Join(*data, "keys", f)
			if _, err := os.Stat(p); err == nil {
				paths = append(paths, p)
			}
		}
		if len(paths) == 0 {
			return fmt.Errorf("no saved fold state in %s: the node's next start replays the whole log", filepath.Join(*data, "keys"))
		}
	}
	var reports []stateReport
	for _, p := range paths {
		r := stateReport{Path: p}
		b, err := os.ReadFile(p)
		if err == nil {
			var h projections.StateHeader
			if h, err = projections.ReadStateHeader(b); err == nil {
				at := h.SavedAt
				r.Bytes, r.Seq, r.EventID, r.SavedAt, r.Identity = len(b), h.Seq, h.EventID, &at, h.Identity
			}
		}
		if err != nil {
			r.Error = err.Error()
		}
		reports = append(reports, r)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(reports)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	for i, r := range reports {
		if i > 0 {
			fmt.Fprintln(tw)
		}
		fmt.Fprintf(tw, "%s\n", r.Path)
		if r.Error != "" {
			fmt.Fprintf(tw, "  unusable:\t%s\n", r.Error)
			continue
		}
		fmt.Fprintf(tw, "  seq:\t%d (event %s)\n", r.Seq, r.EventID)
		fmt.Fprintf(tw, "  saved at:\t%s\n", r.SavedAt.UTC().Format(time.RFC3339))
		fmt.Fprintf(tw, "  bytes:\t%d\n", r.Bytes)
		for _, k := range slices.Sorted(maps.Keys(r.Identity)) {
			fmt.Fprintf(tw, "  %s:\t%s\n", k, r.Identity[k])
		}
	}
	return tw.Flush()
}
