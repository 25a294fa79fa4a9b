package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// The goals of issue 3 ("Durable at speed"), judged by `aglx bench` in
// every run, so that one command says whether they hold on the machine it
// runs on. Each is a ratio or a latency measured in the same run as its
// reference, because these machines are noisy.
const (
	// goalIngestRatio: durable ingest of unsigned frames, against raw
	// JetStream async publish with the default fsync.
	goalIngestRatio = 0.5
	// goalSignedRatio: signed credit.transfer ingest, against the
	// machine's signature-verification ceiling (cores / one check's time).
	goalSignedRatio = 0.7
	// goalPacedP99: the ack latency's p99 at half of the peak rate.
	goalPacedP99 = 10 * time.Millisecond
)

// goalResult is one goal over all runs.
type goalResult struct {
	Goal   string    `json:"goal"`
	Values []float64 `json:"values"` // one per run: a ratio, or milliseconds
	Unit   string    `json:"unit"`
	Met    int       `json:"runs_met"`
	Runs   int       `json:"runs"`
}

func judgeGoals(reports []benchReport) []goalResult {
	ingest := goalResult{Goal: fmt.Sprintf("durable ingest >= %.2f of the JetStream ceiling", goalIngestRatio), Unit: "ratio"}
	signed := goalResult{Goal: fmt.Sprintf("signed transfers >= %.2f of the verify ceiling", goalSignedRatio), Unit: "ratio"}
	paced := goalResult{Goal: fmt.Sprintf("p99 ack latency < %s at half of peak", goalPacedP99), Unit: "ms"}
	for _, r := range reports {
		ingest.add(r.Rows[rowPeak].Ratio, r.Rows[rowPeak].Ratio >= goalIngestRatio)
		signed.add(r.Signed.Ratio, r.Signed.Ratio >= goalSignedRatio)
		p99 := r.Rows[rowPaced].P99
		paced.add(float64(p99.Microseconds())/1000, p99 < goalPacedP99)
	}
	return []goalResult{ingest, signed, paced}
}

func (g *goalResult) add(v float64, met bool) {
	g.Values = append(g.Values, v)
	g.Runs++
	if met {
		g.Met++
	}
}

// median of the values; for an even count, the lower middle one, so that
// it is always a value that was measured.
func (g goalResult) median() float64 {
	v := slices.Clone(g.Values)
	slices.Sort(v)
	return v[(len(v)-1)/2]
}

func printGoals(w io.Writer, goals []goalResult) {
	fmt.Fprintf(w, "| %-50s | %-28s | %8s | %-12s |\n", "goal (issue 3)", "each run", "median", "met")
	fmt.Fprintf(w, "|%s|%s|%s|%s|\n", dashes(52), dashes(30), dashes(10), dashes(14))
	for _, g := range goals {
		vals := make([]string, len(g.Values))
		for i, v := range g.Values {
			vals[i] = fmt.Sprintf("%.2f", v)
		}
		verdict := fmt.Sprintf("%d of %d runs", g.Met, g.Runs)
		fmt.Fprintf(w, "| %-50s | %-28s | %8.2f | %-12s |\n", g.Goal, strings.Join(vals, " "), g.median(), verdict)
	}
}
