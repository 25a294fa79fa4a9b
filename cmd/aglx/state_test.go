package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aglx/ledger/projections"
	"github.com/aglx/ledger/protocol"
)

// TestStateSaysWhereTheSavedStatesStand: aglx state reads the states in a
// data dir (the node's own and a prepared one) and says where each stands
// and under which build and inputs; a damaged one is said to be unusable,
// and an empty dir that the next start replays the whole log.
func TestStateSaysWhereTheSavedStatesStand(t *testing.T) {
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys")
	if err := os.MkdirAll(keys, 0o700); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := runState([]string{"--data", dir}, &out); err == nil || !strings.Contains(err.Error(), "replays the whole log") {
		t.Fatalf("an empty data dir: %v", err)
	}
	k, err := protocol.GenerateKey(protocol.KeyEd25519)
	if err != nil {
		t.Fatal(err)
	}
	outbox := projections.NewOutbox()
	folds := projections.NewFolds(projections.RegistryConfig{NodeURI: "registry://localhost", NodeKey: k, Outbox: outbox})
	saved := time.Date(2026, 12, 2, 11, 0, 0, 0, time.UTC)
	b, err := projections.EncodeState(projections.StateHeader{Identity: map[string]string{"version": "v1", "name": "registry://localhost"},
		Seq: 42, EventID: "01EVENT", SavedAt: saved}, folds, outbox)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(keys, "folds.state"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 1
	if err := os.WriteFile(filepath.Join(keys, "folds.next.state"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := runState([]string{"--data", dir, "--json"}, &out); err != nil {
		t.Fatal(err)
	}
	var got []stateReport
	if err := json.Unmarshal(out.Bytes(), &got); err != nil || len(got) != 2 {
		t.Fatalf("aglx state --json: %v\n%s", err, out.String())
	}
	if r := got[0]; r.Seq != 42 || r.EventID != "01EVENT" || r.SavedAt == nil || !r.SavedAt.Equal(saved) || r.Identity["version"] != "v1" || r.Error != "" {
		t.Fatalf("the node's state: %+v", r)
	}
	if r := got[1]; r.Error == "" || r.Seq != 0 {
		t.Fatalf("a damaged prepared state: %+v; want it said unusable", r)
	}
	out.Reset()
	if err := runState([]string{filepath.Join(keys, "folds.state")}, &out); err != nil ||
		!strings.Contains(out.String(), "seq:       42 (event 01EVENT)") || !strings.Contains(out.String(), "version:   v1") {
		t.Fatalf("aglx state FILE: %v\n%s", err, out.String())
	}
}

// TestStateTakesFlagsAfterFiles: `aglx state FILE --json` read "--json" as
// a second file, said it was unusable, and printed a table, exit 0: the
// other commands that take files read flags after them (helper-81).
func TestStateTakesFlagsAfterFiles(t *testing.T) {
	k, err := protocol.GenerateKey(protocol.KeyEd25519)
	if err != nil {
		t.Fatal(err)
	}
	outbox := projections.NewOutbox()
	folds := projections.NewFolds(projections.RegistryConfig{NodeURI: "registry://localhost", NodeKey: k, Outbox: outbox})
	b, err := projections.EncodeState(projections.StateHeader{Identity: map[string]string{"version": "v1"}, Seq: 7, EventID: "01EVENT", SavedAt: time.Now()}, folds, outbox)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "folds.state")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := runState([]string{path, "--json"}, &out); err != nil {
		t.Fatalf("aglx state FILE --json = %v", err)
	}
	var got []stateReport
	if err := json.Unmarshal(out.Bytes(), &got); err != nil || len(got) != 1 || got[0].Seq != 7 {
		t.Fatalf("aglx state FILE --json printed (%v):\n%s", err, out.String())
	}
}
