// Package ledger is the node's credit ledger: an exact-decimal, double-entry
// fold over the AGLX messages in the event log.
//
// A Ledger is a pure, deterministic state machine in the sense of
// hashicorp/raft's FSM: Apply takes one decoded event and returns its
// outcome, and the same events in the same order give the same state on
// every node and every replay, byte for byte (see Snapshot). To keep that
// promise the package does no I/O, reads no clock (time comes from the
// events) and starts no goroutines. It also trusts nobody to have checked
// the money in a payload: every amount is checked again here.
//
// Money is apd with protocol.MoneyContext: 34 significant digits, with
// Inexact and Rounded trapped, so a figure is either exact or refused;
// float64 never touches it.
//
// The invariants, checked by Check and asserted by the tests after every
// Apply:
//   - all balances sum to exactly zero; the node's own URI holds the
//     issuance account, whose balance is minus the credits in circulation;
//   - every account's balance is its earned total minus its spent total;
//   - every account's pending figure is the sum of its live holds;
//   - only the issuance account, and accounts corrected by credit.adjust,
//     go below zero.
//
// A Ledger is not safe for concurrent use: like every projection it is
// driven by one goroutine, and readers hold the runner's lock
// (projections.Runner.View).
//
// docs/LEDGER.md records the semantics the issue leaves open and the
// decisions taken here.
package ledger
