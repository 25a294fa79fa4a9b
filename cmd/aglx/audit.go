package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/aglx/ledger/bridge"
	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/projections"
	"github.com/aglx/ledger/protocol"
	"github.com/nats-io/nats.go"
)

// runAudit folds the ledger again from the log, the way the node does, and
// checks it three ways: after every posting, against balances it keeps
// itself in plain apd arithmetic (every running balance the ledger records
// must match, and all balances must sum to zero); at the end, with the
// ledger's own full consistency check; and against the node's live state,
// by comparing snapshot digests at the same log position. It exits 1 on
// any discrepancy. It reads only what any NATS reader and HTTP client may:
// the auditor needs no secret of the node's.
func runAudit(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("aglx audit", flag.ContinueOnError)
	natsURL := fs.String("nats", "nats://127.0.0.1:4222", "the node's NATS address")
	api := fs.String("http", "http://127.0.0.1:2595", "the node's HTTP API")
	pin := fs.String("key-id", "", "the node's key id as you recorded it (sha256:...); the audit stops if the node names another key")
	if stop, err := parseFlags(fs, args); stop {
		return err
	}
	var node bridge.NodeInfo
	if err := getJSON(*api, "/v1/node", &node); err != nil {
		return fmt.Errorf("asking the node its name and key: %w", err)
	}
	// The fold needs the node's public key only, to check what the node
	// signed itself (mints). It comes from the node; --key-id pins it to
	// the one the auditor holds on record.
	pub, err := protocol.ParsePublicKey(node.PublicKey)
	if err != nil {
		return fmt.Errorf("the node's public key: %w", err)
	}
	keyID := protocol.KeyID(pub)
	if *pin != "" && *pin != keyID {
		return fmt.Errorf("the node's key is %s, not %s as pinned with --key-id: not auditing against a key you did not expect", keyID, *pin)
	}
	var live projections.Digest
	if err := getJSON(*api, "/v1/ledger/digest", &live); err != nil {
		return fmt.Errorf("asking the node its ledger digest: %w", err)
	}
	nc, err := nats.Connect(*natsURL, nats.Name("aglx audit"))
	if err != nil {
		return fmt.Errorf("connect %s: %w", *natsURL, err)
	}
	defer nc.Close()
	lg, err := events.Attach(ctx, nc, events.StreamNameDefault)
	if err != nil {
		return err
	}
	rep, err := projections.Audit(ctx, lg, node.Name, pub, live)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "node:            %s, key %s\nevents folded:   %d (to seq %d)\npostings:        %d\naccounts:        %d\nledger digest:   %s\nnode digest:     %s\n",
		node.Name, keyID, rep.Events, rep.AppliedSeq, rep.Postings, rep.Accounts, rep.Digest, rep.NodeDigest)
	if len(rep.Problems) > 0 {
		fmt.Fprintf(stdout, "\n%d discrepancies", rep.ProblemsTotal)
		if rep.ProblemsTotal > len(rep.Problems) {
			fmt.Fprintf(stdout, " (the first %d shown)", len(rep.Problems))
		}
		fmt.Fprintln(stdout, ":")
		for _, p := range rep.Problems {
			fmt.Fprintln(stdout, "  -", p)
		}
		return exitCode(1)
	}
	fmt.Fprintln(stdout, "\nOK: every posting checked, the sum is zero, and the node's ledger matches the log.")
	return nil
}
