package ledger

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/aglx/ledger/protocol"
)

// TestFrozenIsWrittenWhileTheLedgerGoesOn: a digest freezes the ledger
// under the fold's lock and writes it out after, while the fold applies
// more events. What it writes is the ledger as it stood when frozen, byte
// for byte, however far the ledger has gone on meanwhile; the postings,
// read from the ledger's own tables after the lock (helper-88), are no
// exception. Run under the race detector, it also shows that reading them
// does not race with the fold's appends.
func TestFrozenIsWrittenWhileTheLedgerGoesOn(t *testing.T) {
	l := New(node)
	seq := uint64(0)
	mint := func(i int) {
		seq++
		// Long URIs and ids, and a figure too big to pack, so that every
		// table a posting's view reads grows on while it is read.
		to := fmt.Sprintf("agent://an-account-with-a-name-longer-than-a-row-keeps-%06d.local", i)
		o := l.Apply(Event{Seq: seq, EventID: fmt.Sprintf("mint-ev-%d", i), Time: t0, From: node, To: to, Auth: AuthNode,
			Payload: &protocol.CreditTransfer{Amount: amt("123456789012.123456789012"), Currency: protocol.Currency, TransactionID: fmt.Sprintf("mint-%d", i)}})
		if o.Status != 200 {
			t.Fatalf("mint %d: %d %s", i, o.Status, o.Reason)
		}
	}
	for i := range 3000 {
		mint(i)
	}
	want, err := l.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	f := l.Freeze()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 3000; i < 9000; i++ { // the fold goes on
			mint(i)
		}
	}()
	got, err := f.Snapshot()
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the frozen ledger written while the fold went on differs from the ledger as it stood (%d bytes against %d)", len(got), len(want))
	}
}
