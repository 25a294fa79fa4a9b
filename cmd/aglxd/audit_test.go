package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aglx/ledger/projections"
)

// TestAuditChecksThePositionItIsGiven: the audit compares the node's
// digest with the log's at the node's position. Given position 0 it
// compared nothing and said OK whatever digest came with it; given a
// position past the end of the log it read, it compared digests of two
// different positions, and a ledger the missing events left alone passed
// (helper-51). Both are problems now.
func TestAuditChecksThePositionItIsGiven(t *testing.T) {
	m := startNode(t, t.TempDir())
	s := lfNewSession(t, m)
	node := lfParty{uri: m.cfg.Name, key: m.key}
	lfExpect(t, s.transfer(t, node, "agent://w.local", "5", "mint-w"), "ack", 200)
	s.query(t, lfParty{uri: "agent://w.local"})
	var live projections.Digest
	if err := json.Unmarshal(lfGet(t, m, "/v1/ledger/digest", s.last), &live); err != nil {
		t.Fatal(err)
	}
	lg := openLog(t, m)
	tests := []struct {
		name    string
		claim   projections.Digest
		problem string // "" = none
	}{
		{"the node's own digest", live, ""},
		{"position 0 with a digest that is not the empty ledger's", projections.Digest{SHA256: live.SHA256}, "before any event"},
		{"a position past the log's end", projections.Digest{AppliedSeq: live.AppliedSeq + 5, SHA256: live.SHA256}, "short of the node's position"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			rep, err := projections.Audit(ctx, lg, m.cfg.Name, m.key.Public(), tt.claim)
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Join(rep.Problems, "\n")
			if tt.problem == "" && got != "" || tt.problem != "" && !strings.Contains(got, tt.problem) {
				t.Fatalf("problems %q, want one with %q", got, tt.problem)
			}
		})
	}
}

// TestAuditNotesMintsTheNodesKeyDoesNotVouchFor: a credit message in the
// node's name that its key does not vouch for (a forgery here; after a
// --take-over-store, every earlier mint) is refused by the ledger, live
// and in the audit alike, so the digests agree; the audit says how many
// there are and where the first is, since an auditor must hear of
// balances the log once gave and the ledger no longer books (helper-88).
func TestAuditNotesMintsTheNodesKeyDoesNotVouchFor(t *testing.T) {
	m := startNode(t, t.TempDir())
	s := lfNewSession(t, m)
	node := lfParty{uri: m.cfg.Name, key: m.key}
	lfExpect(t, s.transfer(t, node, "agent://w.local", "5", "mint-w"), "ack", 200)
	_, other, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	forged := lfParty{uri: m.cfg.Name, key: other}
	lfExpect(t, s.transfer(t, forged, "agent://w.local", "500", "mint-forged"), "error", 401)
	forgedSeq := s.last
	s.query(t, lfParty{uri: "agent://w.local"})
	rep := auditNode(t, m, s.last)
	if len(rep.Problems) != 0 || rep.Unvouched != 1 || rep.UnvouchedFirst != forgedSeq {
		t.Fatalf("audit: problems %q, unvouched %d (first at %d); want none, and 1 at seq %d", rep.Problems, rep.Unvouched, rep.UnvouchedFirst, forgedSeq)
	}
}

// auditNode audits m's ledger against its log, as aglx audit does, once
// seq is applied.
func auditNode(t *testing.T, m *Main, seq uint64) *projections.AuditReport {
	t.Helper()
	var live projections.Digest
	if err := json.Unmarshal(lfGet(t, m, "/v1/ledger/digest", seq), &live); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, err := projections.Audit(ctx, openLog(t, m), m.cfg.Name, m.key.Public(), live)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}
