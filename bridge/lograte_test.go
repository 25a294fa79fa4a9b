package bridge

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestLogRateBoundsLines: a sender who makes the node refuse frames in a
// loop gets LogLinesPerSecondMax lines a second into the log, not one a
// frame, and the next line let through says how many were left out.
func TestLogRateBoundsLines(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name        string
		offsets     []time.Duration // when each line is asked for
		wantLines   int
		wantDropped string // in the last line, or "" for none
	}{
		{"a few", []time.Duration{0, time.Millisecond, 2 * time.Millisecond}, 3, ""},
		{"a flood in one second", repeat(1000, 0), LogLinesPerSecondMax, ""},
		{"a flood, then the next second", append(repeat(1000, 0), time.Second), LogLinesPerSecondMax + 1, "not_logged_before=980"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			lg := slog.New(slog.NewTextHandler(&out, nil))
			var r logRate
			for _, d := range tt.offsets {
				r.log(lg, t0.Add(d), slog.LevelInfo, "frame refused", "peer", "p")
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			if len(lines) != tt.wantLines {
				t.Fatalf("%d lines, want %d", len(lines), tt.wantLines)
			}
			last := lines[len(lines)-1]
			if (tt.wantDropped == "") == strings.Contains(last, "not_logged_before") || !strings.Contains(last, tt.wantDropped) {
				t.Fatalf("last line %q, want %q", last, tt.wantDropped)
			}
		})
	}
}

func repeat(n int, d time.Duration) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = d
	}
	return out
}
