package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestJudgeGoals: the verdict `aglx bench` prints for issue 3's goals
// counts each run against each goal's bound, and its median is a value
// that was measured.
func TestJudgeGoals(t *testing.T) {
	run := func(ingest, signed float64, p99 time.Duration) benchReport {
		rows := make([]benchRow, rowRelaxed+1)
		rows[rowPeak].Ratio = ingest
		rows[rowPaced].P99 = p99
		return benchReport{Rows: rows, Signed: benchRow{Ratio: signed}}
	}
	tests := []struct {
		name    string
		reports []benchReport
		met     [3]int
		median  [3]float64
	}{
		{"all met", []benchReport{run(0.9, 0.8, 5*time.Millisecond)}, [3]int{1, 1, 1}, [3]float64{0.9, 0.8, 5}},
		{"bounds are inclusive for ratios, exclusive for latency", []benchReport{run(0.5, 0.7, 10*time.Millisecond)}, [3]int{1, 1, 0}, [3]float64{0.5, 0.7, 10}},
		{"three runs", []benchReport{run(0.5, 0.42, 29*time.Millisecond), run(0.81, 0.53, 21*time.Millisecond), run(0.49, 0.47, 9*time.Millisecond)},
			[3]int{2, 0, 1}, [3]float64{0.5, 0.47, 21}},
		{"two runs: the lower middle", []benchReport{run(0.6, 0.4, 12*time.Millisecond), run(0.8, 0.5, 14*time.Millisecond)},
			[3]int{2, 0, 0}, [3]float64{0.6, 0.4, 12}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			goals := judgeGoals(tc.reports)
			for i, g := range goals {
				if g.Runs != len(tc.reports) || g.Met != tc.met[i] || g.median() != tc.median[i] {
					t.Errorf("%s: met %d of %d, median %v; want met %d of %d, median %v", g.Goal, g.Met, g.Runs, g.median(), tc.met[i], len(tc.reports), tc.median[i])
				}
			}
			var out bytes.Buffer
			printGoals(&out, goals)
			if want := "| " + goals[0].Goal; !strings.Contains(out.String(), want) || strings.Count(out.String(), "\n") != 5 {
				t.Errorf("printed:\n%s", out.String())
			}
		})
	}
}

// TestBenchRefusesWhatItCannotRun: a mistyped -only used to fall through
// to the full run, minutes of work measuring something else than asked,
// and -rate means nothing but for the paced run. -runs was ignored by
// every -only.
func TestBenchRefusesWhatItCannotRun(t *testing.T) {
	for _, args := range [][]string{
		{"-only", "rwa"},
		{"-rate", "1000"},
		{"-only", "ingest", "-rate", "1000"},
		{"-only", "latency", "-rate", "-5"},
		{"-only", "raw", "-runs", "3"},
		{"-only", "disk", "-runs", "2"},
	} {
		var out bytes.Buffer
		err := runBench(context.Background(), args, &out)
		if err == nil || !strings.Contains(err.Error(), "aglx bench") {
			t.Errorf("aglx bench %v: err %v; want a refusal", args, err)
		}
	}
}
