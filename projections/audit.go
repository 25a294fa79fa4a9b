package projections

import (
	"context"
	"crypto"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"

	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/ledger"
	"github.com/aglx/ledger/protocol"
	"github.com/cockroachdb/apd/v3"
)

// Digest identifies the ledger's whole state at a log position: the
// SHA-256 of its canonical snapshot after the event at AppliedSeq.
type Digest struct {
	AppliedSeq uint64 `json:"applied_seq"`
	LedgerSeq  uint64 `json:"ledger_seq"`
	SHA256     string `json:"sha256"`
}

// DigestOf is the digest of a ledger projection's state.
func DigestOf(c *Credits, applied uint64) (Digest, error) {
	return DigestLater(c, applied)()
}

// DigestLater takes the ledger's state for a digest, under Runner.View
// (or in a fold), and returns what makes the digest of it, which may run
// after the View, off the fold's lock: most of a digest's cost is writing
// the state out and hashing it (ledger.Freeze).
func DigestLater(c *Credits, applied uint64) func() (Digest, error) {
	frozen, seq := c.L.Freeze(), c.L.Seq()
	return func() (Digest, error) {
		sum, err := FrozenSHA256(frozen)
		if err != nil {
			return Digest{}, err
		}
		return Digest{AppliedSeq: applied, LedgerSeq: seq, SHA256: sum}, nil
	}
}

// FrozenSHA256 is the SHA-256, in hex, of a frozen ledger's canonical
// snapshot: a Digest's SHA256.
func FrozenSHA256(f *ledger.Frozen) (string, error) {
	h := sha256.New()
	if _, err := f.WriteTo(h); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// AuditReport is what Audit found.
type AuditReport struct {
	Events, Postings, Accounts int
	AppliedSeq                 uint64
	Digest, NodeDigest         string
	// Unvouched counts the credit messages in the node's name (mints,
	// adjustments) that its current key does not vouch for, and that the
	// ledger therefore did not book; UnvouchedFirst is the first one's
	// seq. They are no discrepancy (the node's ledger refused them too),
	// but an auditor must hear of them: a store started under another key
	// (--take-over-store) refuses every earlier mint this way, and the
	// balances they made are gone (helper-88).
	Unvouched      int
	UnvouchedFirst uint64
	// NodeKeys is the node's key history as the log has it, oldest first:
	// its first key and each its rotations bound.
	NodeKeys []KeyView
	// Problems lists the first auditProblemsMax discrepancies;
	// ProblemsTotal counts them all.
	Problems      []string
	ProblemsTotal int
}

// auditProblemsMax bounds the discrepancies listed; the count goes on.
const auditProblemsMax = 100

// Audit folds the ledger again from the log, the way the node does, up to
// the position of the node's digest live, and checks it three ways: after
// every posting, against balances it keeps itself in plain apd arithmetic
// (every running balance the ledger records must match); at the end, that
// all balances sum to zero and with the ledger's own full consistency check;
// and against the node's live state, by comparing snapshot digests at the
// same log position. Discrepancies are listed in the report. It needs the
// node's public key only, to check what the node itself signed (mints):
// an auditor never holds the node's secret.
func Audit(ctx context.Context, lg *events.Log, nodeURI string, nodePub crypto.PublicKey, live Digest) (*AuditReport, error) {
	rep := &AuditReport{AppliedSeq: live.AppliedSeq, NodeDigest: live.SHA256}
	problem := func(format string, args ...any) {
		rep.ProblemsTotal++
		if len(rep.Problems) < auditProblemsMax {
			rep.Problems = append(rep.Problems, fmt.Sprintf(format, args...))
		}
	}
	// The audit checks every signature again, itself, but as the node's
	// replay does: a stretch at a time, in batches on every core, ahead of
	// the fold, which takes a verdict only if it was made with the key the
	// fold would use.
	verdicts := NewVerdictCache()
	// A node that rotated its key is checked from the key its log began
	// with, as the node itself does (events.MetaNodeFirstKey), and must
	// end with the key it names now.
	first, err := lg.NodeFirstKey()
	if err != nil {
		return nil, err
	}
	registry := NewRegistry(RegistryConfig{NodeURI: nodeURI, NodePublicKey: nodePub, NodeFirstKey: first, Verdicts: verdicts})
	verifier := &IngestVerifier{Registry: registry, Cache: verdicts}
	credits := NewCredits(nodeURI, registry, nil)
	// The auditor's own books: plain apd, no shortcuts.
	mc := protocol.MoneyContext()
	books := map[string]*apd.Decimal{}
	bal := func(uri string) *apd.Decimal {
		if d, ok := books[uri]; ok {
			return d
		}
		d := new(apd.Decimal)
		books[uri] = d
		return d
	}
	credits.Observe = func(e *Event, out ledger.Outcome) {
		if e.From == nodeURI && out.Status == protocol.StatusUnauthorized {
			if rep.Unvouched++; rep.Unvouched == 1 {
				rep.UnvouchedFirst = e.Seq
			}
		}
		p := out.Posting
		if p.Seq == 0 {
			return
		}
		rep.Postings++
		from, to := bal(p.From), bal(p.To)
		if _, err := mc.Sub(from, from, p.Amount.Decimal()); err != nil {
			problem("seq %d: %s - %s: %v", e.Seq, p.From, p.Amount, err)
		}
		if _, err := mc.Add(to, to, p.Amount.Decimal()); err != nil {
			problem("seq %d: %s + %s: %v", e.Seq, p.To, p.Amount, err)
		}
		if from.Cmp(p.FromBalance.Decimal()) != 0 {
			problem("seq %d: %s recorded balance %s, recomputed %s", e.Seq, p.From, p.FromBalance, from.Text('f'))
		}
		if to.Cmp(p.ToBalance.Decimal()) != 0 {
			problem("seq %d: %s recorded balance %s, recomputed %s", e.Seq, p.To, p.ToBalance, to.Text('f'))
		}
	}
	if live.AppliedSeq == 0 {
		d, _ := DigestOf(credits, 0)
		if rep.Digest = d.SHA256; rep.Digest != live.SHA256 {
			problem("the node's ledger before any event has digest %s; an empty ledger's is %s", live.SHA256, rep.Digest)
		}
		return rep, nil
	}
	var read uint64 // the last event folded
	fold := newStretchFold(verifier, func(ev *Event) { registry.Apply(ev); credits.Apply(ev) })
	err = lg.Read(ctx, events.ReadOptions{}, func(env *events.Envelope) error {
		if env.Seq > live.AppliedSeq {
			return events.ErrStop
		}
		rep.Events++
		if env.Seq != read+1 {
			// The node's stream has no gaps (it denies deletes); one is
			// damage, and the folds on both sides would agree without it.
			problem("the log lacks the events from seq %d to %d", read+1, env.Seq-1)
		}
		read = env.Seq
		fold.add(env)
		if env.Seq == live.AppliedSeq {
			return events.ErrStop
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	fold.flush()
	if read != live.AppliedSeq {
		// Compared at different positions, two digests say nothing; and a
		// ledger the missing events left alone would match by chance.
		problem("the log as read ends at seq %d, short of the node's position %d: the audit covers only what it read", read, live.AppliedSeq)
	}
	// The running sum above is zero by construction of each posting; this
	// adds every balance afresh, in a context wide enough that no partial
	// sum rounds (each balance has at most 34 digits, but a partial sum of
	// two of them may need 35: summing in MoneyContext reported a sound
	// ledger as rounded, depending on the map's order), and in URI order,
	// so that two audits of one log list the same problems.
	wide := &apd.Context{Precision: 100, MaxExponent: 100, MinExponent: -100,
		Traps: apd.DefaultTraps | apd.Inexact | apd.Rounded, Rounding: apd.RoundHalfEven}
	var total apd.Decimal
	for _, uri := range slices.Sorted(maps.Keys(books)) {
		d := books[uri]
		if _, err := wide.Add(&total, &total, d); err != nil {
			problem("summing %s: %v", uri, err)
		}
		if v, ok := credits.L.Account(uri); !ok || v.Balance.Decimal().Cmp(d) != 0 {
			problem("%s: the ledger says %s, the postings say %s", uri, v.Balance, d.Text('f'))
		}
	}
	if !total.IsZero() {
		problem("all balances sum to %s, not zero", total.Text('f'))
	}
	if err := credits.L.Check(); err != nil {
		problem("the ledger's own check: %v", err)
	}
	if _, id, _ := registry.CurrentKey(nodeURI); id != protocol.KeyID(nodePub) {
		problem("the log's node key at seq %d is %s, not the key the node names (%s): its key history does not lead to it", live.AppliedSeq, id, protocol.KeyID(nodePub))
	}
	rep.NodeKeys = registry.keyViews(nodeURI)
	rep.Accounts = len(books)
	d, err := DigestOf(credits, live.AppliedSeq)
	if err != nil {
		return nil, err
	}
	rep.Digest = d.SHA256
	if rep.Digest != live.SHA256 {
		problem("the node's ledger at seq %d has digest %s; the log folds to %s", live.AppliedSeq, live.SHA256, rep.Digest)
	}
	return rep, nil
}
