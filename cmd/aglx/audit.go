package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

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
// by comparing snapshot digests at the same log position. It exits 3
// (auditDiscrepancies) on any discrepancy, 4 (auditKeyMismatch) when the
// node names another key than --key-id that the log's own key rotations
// do not lead to from the pinned one, 1 when it could not audit.
// Folding with the node's own code, it proves that the node's state is
// what its log folds to, not that the fold's rules are right
// (docs/LEDGER.md). It reads only what any NATS reader and HTTP client may:
// the auditor needs no secret of the node's.
//
// The audit covers the log to its end as it stands when the audit starts,
// read from the stream itself, not from the node. A node replaying after a
// start answers the digest of where its fold has got to; audited there, a
// node at 11,264 of 113,852 events was said OK without its later mints
// ever being checked. So the audit waits (at most --wait) until the node
// has applied that far, and compares the digests there; a node that does
// not get there in time fails the audit, with nothing said OK.
func runAudit(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("audit")
	natsURL := fs.String("nats", "nats://"+bridge.DefaultNATSAddr, "the node's NATS address")
	api := fs.String("http", "http://"+bridge.DefaultHTTPAddr, "the node's HTTP API")
	pin := fs.String("key-id", "", "the node's key id as you recorded it (sha256:...); the audit stops if the node names another key, unless the log's key rotations lead from this one to it")
	wait := fs.Duration("wait", 5*time.Minute, "how long to wait for a node still replaying its log to reach the log's end as it stood when the audit started; then the audit fails (0: fail at once)")
	// Flags after an argument were ignored: `aglx audit X --key-id K`
	// audited without the pin. It takes none, and reads every flag.
	if _, err := parseQuery(fs, args, 0); err != nil {
		return err
	}
	// A node that is starting answers 503 until it serves: waited for,
	// as the replay is below (it failed the audit at once: helper-69).
	// One --wait for the whole audit: the node's start, its replay and
	// its digest each waited the whole of it (helper-71).
	deadline := time.Now().Add(*wait)
	left := func() time.Duration { return max(time.Until(deadline), 0) }
	var node bridge.NodeInfo
	if err := getJSONUntil(ctx, *api, "/v1/node", &node, httpTimeout, left()); err != nil {
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
	// A pin that is not the node's key now may be one it rotated from:
	// decided once the log's key history is folded, below.
	rotatedFromPin := *pin != "" && *pin != keyID
	nc, err := nats.Connect(*natsURL, nats.Name("aglx audit"))
	if err != nil {
		return fmt.Errorf("connect %s: %w (is a node serving NATS there? --nats names it)", *natsURL, err)
	}
	defer nc.Close()
	lg, err := events.Attach(ctx, nc, events.StreamNameDefault)
	if err != nil {
		return err
	}
	end, err := lg.LastSeq(ctx)
	if err != nil {
		return fmt.Errorf("reading where the log ends: %w", err)
	}
	if err := waitApplied(ctx, *api, end, *wait, deadline, stdout); err != nil {
		return err
	}
	// ?seq= makes the node answer at end or later even if it restarted
	// meanwhile; a later position is audited whole too, since the fold
	// below reads the log up to the digest's position.
	live, err := digestAt(ctx, *api, end, left())
	if err != nil {
		return fmt.Errorf("asking the node its ledger digest at seq %d: %w", end, err)
	}
	if live.AppliedSeq < end {
		return fmt.Errorf("the node answered its digest at seq %d, short of the log's end at seq %d when the audit started: nothing audited", live.AppliedSeq, end)
	}
	rep, err := projections.Audit(ctx, lg, node.Name, pub, live)
	if err != nil {
		return err
	}
	// The pin holds if the log's key history holds it and ends with the
	// node's key: every rotation after it was signed with the key before.
	if rotatedFromPin && (!slices.ContainsFunc(rep.NodeKeys, func(k projections.KeyView) bool { return k.KeyID == *pin }) ||
		rep.NodeKeys[len(rep.NodeKeys)-1].KeyID != keyID) {
		fmt.Fprintf(stdout, "KEY MISMATCH: the node %s names key %s, not %s as pinned with --key-id, and its log's key history does not lead from that key to it: not auditing against a key you did not expect.\n", node.Name, keyID, *pin)
		return exitCode(auditKeyMismatch)
	}
	fmt.Fprintf(stdout, "node:            %s, key %s\naudited:         the log to seq %d (its end when the audit started: seq %d)\nevents folded:   %d (to seq %d)\npostings:        %d\naccounts:        %d\nledger digest:   %s\nnode digest:     %s\n",
		node.Name, keyID, rep.AppliedSeq, end, rep.Events, rep.AppliedSeq, rep.Postings, rep.Accounts, rep.Digest, rep.NodeDigest)
	if rotatedFromPin {
		fmt.Fprintf(stdout, "note:            the key pinned with --key-id, %s, was rotated to %s by rotations the log holds, each signed with the key before it: record the new key id\n", *pin, keyID)
	}
	if len(rep.NodeKeys) > 1 {
		fmt.Fprintf(stdout, "node keys:       %d in the log's history (aglxd --rotate-node-key), oldest first:\n", len(rep.NodeKeys))
		for _, k := range rep.NodeKeys {
			fmt.Fprintf(stdout, "  - %s, bound by %s", k.KeyID, k.BoundBy)
			if !k.RetiredAt.IsZero() {
				fmt.Fprintf(stdout, ", retired %s", k.RetiredAt.Format(time.RFC3339))
			}
			fmt.Fprintln(stdout)
		}
	}
	if rep.Unvouched > 0 {
		fmt.Fprintf(stdout, "\nnote: %d credit messages in the node's name (mints, adjustments), the first at seq %d, are not signed by the key that spoke for the node then (now %s), and the ledger did not book them: was the store taken over under another key (--take-over-store), or are they forged? (docs/OPERATIONS.md, --node-key)\n",
			rep.Unvouched, rep.UnvouchedFirst, keyID)
	}
	if len(rep.Problems) > 0 {
		fmt.Fprintf(stdout, "\n%d discrepancies", rep.ProblemsTotal)
		if rep.ProblemsTotal > len(rep.Problems) {
			fmt.Fprintf(stdout, " (the first %d shown)", len(rep.Problems))
		}
		fmt.Fprintln(stdout, ":")
		for _, p := range rep.Problems {
			fmt.Fprintln(stdout, "  -", p)
		}
		return exitCode(auditDiscrepancies)
	}
	fmt.Fprintf(stdout, "\nOK: every posting to seq %d checked, the sum is zero, and the node's ledger matches the log there.\n", rep.AppliedSeq)
	return nil
}

// auditDiscrepancies is aglx audit's exit status when it found the ledger
// wrong, apart from 1, an audit that could not be made (the node or NATS
// unreachable, --wait run out): a cron job must tell a wrong ledger from
// an outage (helper-88).
const auditDiscrepancies = 3

// auditKeyMismatch is aglx audit's exit status when the node names another
// key than --key-id: not an outage (1) and not a wrong ledger (3), but a
// node that was given another key or whose store was taken over, which an
// auditor's cron job must not retry as if the node were only away
// (helper-106).
const auditKeyMismatch = 4

// Bounds of waitApplied.
const (
	appliedPoll     = 200 * time.Millisecond // how often it asks /healthz
	appliedProgress = 10 * time.Second       // how often it says how far the node is
)

// waitApplied waits until the node's projections have applied the event
// at seq, asking /healthz (applied_seq), until deadline (what is left of
// --wait, which the messages name). It says once
// that it waits, and how far the node is every appliedProgress. A node
// that is starting (503 "starting") or whose log does not answer for a
// moment is waited for too; the error at the end says what it last said.
func waitApplied(ctx context.Context, api string, seq uint64, wait time.Duration, deadline time.Time, stdout io.Writer) error {
	var said time.Time
	for {
		h, err := health(ctx, api)
		if err == nil && h.AppliedSeq >= seq {
			if !said.IsZero() {
				fmt.Fprintf(stdout, "the node has applied seq %d: auditing\n", h.AppliedSeq)
			}
			return nil
		}
		where := fmt.Sprintf("it has applied seq %d of %d (projections %s)", h.AppliedSeq, seq, h.Projections)
		if err != nil {
			where = err.Error()
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("the node has not applied the log to its end at seq %d, where it stood when the audit started, within --wait %s: %s. Nothing was audited; run it again once /readyz says ready, or with a longer --wait", seq, wait, where)
		}
		if now := time.Now(); now.Sub(said) >= appliedProgress {
			fmt.Fprintf(stdout, "waiting (at most --wait %s) for the node to apply the log to seq %d, its end when the audit started: %s\n", wait, seq, where)
			said = now
		}
		t := time.NewTimer(min(appliedPoll, time.Until(deadline)))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("waiting for the node to apply the log to seq %d: %w", seq, ctx.Err())
		}
	}
}

// healthz is the part of /healthz's answer waitApplied reads.
type healthz struct {
	Status      string `json:"status"`
	AppliedSeq  uint64 `json:"applied_seq"`
	Projections string `json:"projections"`
	Error       string `json:"error"`
}

// health asks /healthz. Its 503 is an answer too, read for the status it
// names: a node that is starting says "starting", and one whose log is
// unavailable says why; any other status is an error.
func health(ctx context.Context, api string) (healthz, error) {
	var h healthz
	api = strings.TrimRight(apiURL(api, ""), "/")
	ctx, cancel := context.WithTimeout(ctx, httpTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, api+"/healthz", nil)
	if err != nil {
		return h, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return h, fmt.Errorf("asking %s/healthz: %w (is a node serving its HTTP API there? --http names it)", api, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusServiceUnavailable {
		return h, fmt.Errorf("%s/healthz: %s", api, resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, answerBytesMax)).Decode(&h); err != nil {
		return h, fmt.Errorf("%s/healthz: %s: %w", api, resp.Status, err)
	}
	if resp.StatusCode != http.StatusOK {
		msg := h.Status
		if h.Error != "" {
			msg += ": " + h.Error
		}
		return h, errors.New("the node answers 503 " + msg)
	}
	return h, nil
}

// digestTimeout bounds one request for the ledger digest: it hashes the
// whole ledger, which took 16 s at 650,000 postings, and getJSON's 10 s
// made the audit of a large ledger impossible (helper-69).
const digestTimeout = 5 * time.Minute

// digestAt asks the node its ledger digest at seq or later. The node makes
// a new digest only so often, since making one holds up its fold, and
// answers 503 meanwhile: the audit asks again, once a second, within wait.
func digestAt(ctx context.Context, api string, seq uint64, wait time.Duration) (projections.Digest, error) {
	var d projections.Digest
	err := getJSONUntil(ctx, api, fmt.Sprintf("/v1/ledger/digest?seq=%d", seq), &d, digestTimeout, wait)
	return d, err
}

// getJSONUntil is getJSONWithin, asked again while the node answers 503
// (starting, or not yet willing), until wait has passed or ctx ends
// (Ctrl-C: it waited out --wait, up to 5 minutes, helper-75). It asks
// again after the answer's Retry-After, at least a second: a node making
// digests of a large ledger says when it will make the next one, minutes
// ahead, and until 2026-12-02 the audit asked every second meanwhile. If
// that is past wait, it stops at once and says so rather than wait for an
// answer it was told will not come.
func getJSONUntil(ctx context.Context, api, path string, v any, timeout, wait time.Duration) error {
	until := time.Now().Add(wait)
	for {
		err := getJSONWithin(ctx, api, path, v, timeout)
		var se *statusError
		if !errors.As(err, &se) || se.code != http.StatusServiceUnavailable || time.Now().After(until) {
			return err
		}
		pause := max(time.Second, se.retryAfter)
		if time.Now().Add(pause).After(until) && se.retryAfter > time.Second {
			return fmt.Errorf("%w; the node asks to be asked again in %s, past --wait %s", err, se.retryAfter, wait)
		}
		t := time.NewTimer(min(pause, time.Until(until)))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (the node was answering: %v)", ctx.Err(), err)
		}
	}
}
