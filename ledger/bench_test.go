package ledger

import (
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/aglx/ledger/protocol"
)

// benchLedger returns a ledger with n accounts, each minted 10^9 credits,
// their URIs, and the sequence of the last event applied.
func benchLedger(b *testing.B, n int) (*Ledger, []string, uint64) {
	b.Helper()
	l := New(node)
	uris := make([]string, n)
	seed := amt("1000000000")
	for i := range uris {
		uris[i] = fmt.Sprintf("agent://a%07d.bench", i)
	}
	for i, uri := range uris {
		o := l.Apply(Event{Seq: uint64(i + 1), EventID: fmt.Sprintf("mint-ev-%d", i), Time: t0, From: node, To: uri, Auth: AuthNode,
			Payload: &protocol.CreditTransfer{Amount: seed, Currency: protocol.Currency, TransactionID: fmt.Sprintf("mint-%d", i)}})
		if o.Status != 200 {
			b.Fatalf("mint: %d %s", o.Status, o.Reason)
		}
	}
	return l, uris, uint64(n)
}

// benchTransfers returns n decoded credit.transfer events between random
// accounts of uris, with sequences after seq: what the projection hands
// the ledger after protocol.Parse.
//
// The events' strings are cut from one big string and their payloads from
// one slice, so that they are a handful of objects, not four per event: a
// garbage collection during the timed loop must mark the benchmark's own
// input, and a million small objects made that cost about a tenth of the
// time measured, a cost of the benchmark, not of the ledger.
func benchTransfers(uris []string, seq uint64, n int) []Event {
	amounts := []*protocol.Amount{amt("0.01"), amt("1"), amt("2.5"), amt("17.25")}
	rng := rand.New(rand.NewPCG(1, 2))
	var text []byte
	type span struct{ id, tx [2]int }
	spans := make([]span, n)
	for i := range spans {
		sp := &spans[i]
		sp.id[0] = len(text)
		text = fmt.Appendf(text, "01JBENCH%018d", i)
		sp.id[1], sp.tx[0] = len(text), len(text)
		text = fmt.Appendf(text, "tx-%d", i)
		sp.tx[1] = len(text)
	}
	all := string(text)
	payloads := make([]protocol.CreditTransfer, n)
	evs := make([]Event, n)
	for i := range evs {
		from, to := rng.IntN(len(uris)), rng.IntN(len(uris)-1)
		if to >= from {
			to++
		}
		sp := spans[i]
		payloads[i] = protocol.CreditTransfer{Amount: amounts[i%len(amounts)], Currency: protocol.Currency, TransactionID: all[sp.tx[0]:sp.tx[1]]}
		evs[i] = Event{
			Seq: seq + uint64(i) + 1, EventID: all[sp.id[0]:sp.id[1]], Time: t0.Add(time.Duration(i) * time.Millisecond),
			From: uris[from], To: uris[to], Auth: AuthValid,
			Payload: &payloads[i],
		}
	}
	return evs
}

// benchBatch is the stretch the benchmark warms and applies at a time: the
// most the projections' runner applies under one hold of its lock
// (projections.applyBatchMax).
const benchBatch = 128 // events

// BenchmarkLedgerApply measures the fold's two resources that matter:
//
//   - transfers: decoded transfers between random accounts of 100k (the
//     issue's case) and of 1k (accounts all in cache, to tell the CPU cost
//     from the cost of memory latency), on one goroutine, warmed and
//     applied in stretches of benchBatch as the runner does; reports
//     postings/s.
//   - memory: a ledger of 1M accounts; reports bytes per account (each
//     with the one posting that created it), bytes per further posting,
//     and bytes per account with its posting's share taken out.
//
// Run (docs/LEDGER.md has the figures):
//
//	go test -run '^$' -bench 'LedgerApply/transfers' -benchtime 1000000x -cpu 1 -count 5 ./ledger/
//	go test -run '^$' -bench 'LedgerApply/memory' -benchtime 1x ./ledger/
func BenchmarkLedgerApply(b *testing.B) {
	for _, n := range []int{100_000, 1_000} {
		b.Run(fmt.Sprintf("transfers/accounts=%dk", n/1000), func(b *testing.B) {
			l, uris, seq := benchLedger(b, n)
			evs := benchTransfers(uris, seq, b.N)
			runtime.GC() // the setup's garbage is not the fold's
			b.ReportAllocs()
			b.ResetTimer()
			for start := 0; start < len(evs); start += benchBatch {
				batch := evs[start:min(start+benchBatch, len(evs))]
				l.Warm(batch)
				for i := range batch {
					if o := l.Apply(batch[i]); o.Status != protocol.StatusOK {
						b.Fatalf("Apply(%s) = %d %s", describe(batch[i]), o.Status, o.Reason)
					}
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "postings/s")
		})
	}
	b.Run("memory/accounts=1M", func(b *testing.B) {
		const n = 1_000_000
		for range b.N {
			b.StopTimer()
			perAccount, perPosting, perBoth := measureMemory(b, n)
			b.StartTimer()
			b.ReportMetric(perAccount, "B/account")
			b.ReportMetric(perPosting, "B/posting")
			b.ReportMetric(perBoth, "B/account+posting")
		}
	})
}

// measureMemory builds a ledger of n accounts and reports the live heap it
// takes: per account with its first posting, per further posting, and per
// account alone (the first minus the second).
func measureMemory(b *testing.B, n int) (perAccount, perPosting, perBoth float64) {
	uris := make([]string, n)
	for i := range uris {
		uris[i] = fmt.Sprintf("agent://a%07d.bench", i)
	}
	evs := benchTransfers(uris, uint64(n), n)
	seed := amt("1000000000")
	heap := func() float64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return float64(m.HeapAlloc)
	}
	h0 := heap()
	l := New(node)
	for i, uri := range uris {
		mintTx := fmt.Sprintf("mint-%d", i)
		l.Apply(Event{Seq: uint64(i + 1), EventID: fmt.Sprintf("01JMINT%019d", i), Time: t0, From: node, To: uri, Auth: AuthNode,
			Payload: &protocol.CreditTransfer{Amount: seed, Currency: protocol.Currency, TransactionID: mintTx}})
	}
	h1 := heap()
	for i := range evs {
		if o := l.Apply(evs[i]); o.Status != protocol.StatusOK {
			b.Fatalf("Apply(%s) = %d %s", describe(evs[i]), o.Status, o.Reason)
		}
	}
	h2 := heap()
	runtime.KeepAlive(l)
	runtime.KeepAlive(evs)
	perBoth = (h1 - h0) / float64(n)
	perPosting = (h2 - h1) / float64(n)
	return perBoth - perPosting, perPosting, perBoth
}

// BenchmarkDigestWrite measures writing a ledger's snapshot into a hash,
// as a digest does, for a ledger of 100k postings between 1k accounts:
// time per posting, and what it allocates (all of it garbage at once: the
// snapshot is written a posting at a time, TestDigestHoldsNoWholeSnapshot).
//
//	go test -run '^$' -bench DigestWrite -benchtime 5x ./ledger/
func BenchmarkDigestWrite(b *testing.B) {
	l, uris, seq := benchLedger(b, 1_000)
	evs := benchTransfers(uris, seq, 100_000)
	for i := range evs {
		if o := l.Apply(evs[i]); o.Status != protocol.StatusOK {
			b.Fatalf("Apply(%s) = %d %s", describe(evs[i]), o.Status, o.Reason)
		}
	}
	f := l.Freeze()
	runtime.GC()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		h := sha256.New()
		if _, err := f.WriteTo(h); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(evs)+len(uris)), "ns/posting")
}

// BenchmarkEntriesDeepPage times one page of 100 postings near the end of
// an account's history of a million postings (the payer's side of every
// transfer between two accounts): from the nearest skip, as Entries
// pages, and walked from the first block, as it paged until 2026-12-02.
// The page is read under the folds' read lock, which holds up every fold
// waiting to write.
func BenchmarkEntriesDeepPage(b *testing.B) {
	const n = 1_000_000 // transfers
	l, uris, seq := benchLedger(b, 2)
	evs := benchTransfers(uris, seq, n)
	for i := range evs {
		evs[i].From, evs[i].To = uris[0], uris[1]
		if o := l.Apply(evs[i]); o.Status != 200 {
			b.Fatalf("transfer %d: %d %s", i, o.Status, o.Reason)
		}
	}
	after := evs[n-200].Seq
	for _, bc := range []struct {
		name  string
		skips bool
	}{{"from the nearest skip", true}, {"from the first block", false}} {
		b.Run(bc.name, func(b *testing.B) {
			saved := l.entrySkips
			if !bc.skips {
				l.entrySkips = nil
			}
			defer func() { l.entrySkips = saved }()
			for b.Loop() {
				if page := l.Entries(uris[0], after, 100); len(page) != 100 {
					b.Fatalf("a page of %d postings", len(page))
				}
			}
		})
	}
}
