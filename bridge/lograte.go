package bridge

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// LogLinesPerSecondMax bounds the lines one kind of per-frame log line
// (a refused frame, a refused datagram, a failed append) may write in a
// second. Refusals are the sender's to cause: spoofed datagrams or a
// client in a loop could otherwise fill the node's disk with its log. The
// metrics count every one; the log says how many it left out.
const LogLinesPerSecondMax = 20 // lines

// logRate lets at most LogLinesPerSecondMax lines through per second and
// counts the rest, to say how many were left out with the next line let
// through. Safe for concurrent use; the zero value is ready.
type logRate struct {
	mu      sync.Mutex
	window  time.Time // start of the current second
	lines   int       // lines let through in it
	dropped int       // lines left out since the last one let through
}

// log writes the line unless the second's lines are spent. now is passed
// in so that tests need not wait for the clock.
func (r *logRate) log(lg *slog.Logger, now time.Time, level slog.Level, msg string, args ...any) {
	r.mu.Lock()
	if now.Sub(r.window) >= time.Second {
		r.window, r.lines = now, 0
	}
	if r.lines >= LogLinesPerSecondMax {
		r.dropped++
		r.mu.Unlock()
		return
	}
	r.lines++
	dropped := r.dropped
	r.dropped = 0
	r.mu.Unlock()
	if dropped > 0 {
		args = append(args, "not_logged_before", dropped)
	}
	lg.Log(context.Background(), level, msg, args...)
}
