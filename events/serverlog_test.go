package events

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"
)

// countLines is a slog handler that counts the lines it is given.
type countLines struct{ n *atomic.Int64 }

func (h countLines) Enabled(context.Context, slog.Level) bool  { return true }
func (h countLines) Handle(context.Context, slog.Record) error { h.n.Add(1); return nil }
func (h countLines) WithAttrs([]slog.Attr) slog.Handler        { return h }
func (h countLines) WithGroup(string) slog.Handler             { return h }

// TestServerLogIsBounded: the embedded server logs an error for every
// client that fails to authenticate; passed on as they came, 300 such
// clients wrote 300 lines in a third of a second (helper-55). The node
// passes at most serverLogLinesPerSecond of them, and none of the warnings
// every start gives.
func TestServerLogIsBounded(t *testing.T) {
	var n atomic.Int64
	l := newServerLog(slog.New(countLines{&n}))
	l.Warnf("Plaintext passwords detected, use nkeys or bcrypt")
	if n.Load() != 0 {
		t.Fatal("a warning every start gives reached the log")
	}
	start := time.Now()
	for i := range 1000 {
		l.Errorf("authentication error from client %d", i)
	}
	allowed := int64(serverLogLinesPerSecond) * (2 + int64(time.Since(start)/time.Second))
	if got := n.Load(); got == 0 || got > allowed {
		t.Fatalf("%d lines for 1,000 errors; want some, and at most %d", got, allowed)
	}
}
