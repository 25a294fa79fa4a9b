package ledger

import (
	"fmt"

	"github.com/cockroachdb/apd/v3"
)

// Check verifies the ledger's invariants and returns the first violation
// found, or nil. It is the audit: aglx audit folds the log into a fresh
// Ledger and runs Check, and the tests run it after every event.
//
//   - All balances sum to exactly zero.
//   - Every account's balance is its earned total minus its spent total,
//     and replaying its postings from zero reproduces every running balance
//     recorded, in growing sequence order.
//   - Every account's pending figure is the sum of its live holds.
//   - No posting other than an adjustment takes an account other than the
//     issuance account below zero.
//
// It does its sums in apd, independently of the 128-bit arithmetic the
// ledger books with, and costs one pass over accounts, postings and holds.
// A violation is a bug in this package, never bad input: Apply refuses bad
// input.
func (l *Ledger) Check() error {
	if err := l.checkSum(); err != nil {
		return err
	}
	pending := make([]apd.Decimal, l.accounts.len())
	for i := range l.holds.rows.len() {
		h := l.holds.get(uint32(i))
		if h.state == holdLive {
			if _, err := l.wide.Add(&pending[h.account], &pending[h.account], dec(h.amount)); err != nil {
				return err
			}
		}
	}
	for i := range l.accounts.len() {
		id := accountID(i)
		a := l.accounts.get(id)
		if err := l.checkAccount(id, a); err != nil {
			return err
		}
		if pending[id].Cmp(dec(a.pending)) != 0 || a.pending.sign() < 0 {
			return fmt.Errorf("ledger: %s has pending %s, but its live holds sum to %s", a.name(&l.strs), a.pending.text(), pending[id].Text('f'))
		}
	}
	return nil
}

// dec converts a stored figure for Check's apd arithmetic.
func dec(f fixed) *apd.Decimal { return f.decimal(new(apd.Decimal)) }

// checkSum verifies that all balances sum to exactly zero. It is the cheap
// part of Check, one pass over the accounts.
func (l *Ledger) checkSum() error {
	var sum, d apd.Decimal
	for i := range l.accounts.len() {
		if _, err := l.wide.Add(&sum, &sum, l.accounts.get(accountID(i)).balance.decimal(&d)); err != nil {
			return fmt.Errorf("ledger: summing balances: %w", err)
		}
	}
	if sum.Sign() != 0 {
		return fmt.Errorf("ledger: balances sum to %s, not zero", sum.Text('f'))
	}
	return nil
}

// checkAccount replays one account's postings.
func (l *Ledger) checkAccount(id accountID, a *account) error {
	var run, diff, earned, spent apd.Decimal
	var last uint64
	var err error
	l.eachEntry(a, 0, func(i uint32) bool {
		err = l.checkPosting(id, a, i, &run, &earned, &spent, &last)
		return err == nil
	})
	if err != nil {
		return err
	}
	if run.Cmp(dec(a.balance)) != 0 || earned.Cmp(dec(a.earned)) != 0 || spent.Cmp(dec(a.spent)) != 0 {
		return fmt.Errorf("ledger: %s: balance %s, earned %s, spent %s; its postings give %s, %s, %s",
			a.name(&l.strs), a.balance.text(), a.earned.text(), a.spent.text(), run.Text('f'), earned.Text('f'), spent.Text('f'))
	}
	if _, err := l.wide.Sub(&diff, dec(a.earned), dec(a.spent)); err != nil || diff.Cmp(dec(a.balance)) != 0 {
		return fmt.Errorf("ledger: %s: balance %s is not earned %s minus spent %s", a.name(&l.strs), a.balance.text(), a.earned.text(), a.spent.text())
	}
	return nil
}

// checkPosting replays posting i of account id onto the running figures.
func (l *Ledger) checkPosting(id accountID, a *account, i uint32, run, earned, spent *apd.Decimal, last *uint64) error {
	uri := a.name(&l.strs)
	{
		p, f := l.postings.get(i), l.figures(i)
		if p.seq <= *last {
			return fmt.Errorf("ledger: %s: posting at seq %d follows seq %d", uri, p.seq, *last)
		}
		*last = p.seq
		if f.amount.sign() <= 0 || p.from == p.to {
			return fmt.Errorf("ledger: posting at seq %d moves %s from %d to %d", p.seq, f.amount.text(), p.from, p.to)
		}
		amount, recorded := dec(f.amount), f.toBalance
		var err error
		if p.from == id {
			recorded = f.fromBalance
			if _, err = l.wide.Sub(run, run, amount); err == nil {
				_, err = l.wide.Add(spent, spent, amount)
			}
			if id != issuance && p.kind() != kindAdjust && run.Sign() < 0 {
				return fmt.Errorf("ledger: %s: the %s at seq %d left it at %s", uri, p.kind(), p.seq, run.Text('f'))
			}
		} else if _, err = l.wide.Add(run, run, amount); err == nil {
			_, err = l.wide.Add(earned, earned, amount)
		}
		if err != nil {
			return err
		}
		if run.Cmp(dec(recorded)) != 0 {
			return fmt.Errorf("ledger: %s: running balance at seq %d is recorded as %s, replayed as %s", uri, p.seq, recorded.text(), run.Text('f'))
		}
	}
	return nil
}
