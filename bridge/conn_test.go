package bridge

import (
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// TestDeadlineWriterRenewsTheDeadline: a write through deadlineWriter gets
// its own deadline. The buffered reply writer writes to the socket when a
// reply overflows its buffer, not only at flushes; with the deadline set
// only at flushes, such a write on a connection quiet for longer than
// WriteTimeout failed at once and lost every reply on it.
func TestDeadlineWriterRenewsTheDeadline(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go io.Copy(io.Discard, b)
	a.SetWriteDeadline(time.Now().Add(-time.Second)) // what an old flush left behind
	if _, err := a.Write([]byte("x")); err == nil {
		t.Fatal("a write past its deadline succeeded; the test shows nothing")
	}
	if _, err := (deadlineWriter{a, nil}).Write([]byte("a reply")); err != nil {
		t.Fatalf("write through deadlineWriter: %v", err)
	}
}

// TestHostOf: the per-host connection cap counts an IPv4 address, or an
// IPv6 /64, which one host usually holds whole (helper-55).
func TestHostOf(t *testing.T) {
	for _, tt := range []struct{ a, b string }{
		{"192.0.2.1", "192.0.2.1"},
		{"::ffff:192.0.2.1", "192.0.2.1"},
		{"2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"},
		{"2001:db8:1:2:bbbb::9", "2001:db8:1:2::/64"},
		{"2001:db8:1:3::1", "2001:db8:1:3::/64"},
	} {
		if got := hostOf(&net.TCPAddr{IP: net.ParseIP(tt.a), Port: 4000}); got != tt.b {
			t.Errorf("hostOf(%s) = %s, want %s", tt.a, got, tt.b)
		}
	}
}

// deadlineConn records the write deadline it is given.
type deadlineConn struct {
	net.Conn
	deadline time.Time
}

func (c *deadlineConn) SetWriteDeadline(t time.Time) error { c.deadline = t; return nil }
func (c *deadlineConn) Write(b []byte) (int, error)        { return len(b), nil }

// TestRepliesGetLessTimeOnceStopping: each reply write gets WriteTimeout
// while the node runs and ShutdownWriteTimeout once it is stopping, so
// that a peer that does not read its replies cannot hold a stop for the
// whole WriteTimeout (helper-74: 28 s of a 30 s stop).
func TestRepliesGetLessTimeOnceStopping(t *testing.T) {
	var stopping atomic.Bool
	for _, tt := range []struct {
		stopping bool
		want     time.Duration
	}{{false, WriteTimeout}, {true, ShutdownWriteTimeout}} {
		stopping.Store(tt.stopping)
		c := &deadlineConn{}
		start := time.Now()
		if _, err := (deadlineWriter{c, &stopping}).Write([]byte("a reply")); err != nil {
			t.Fatal(err)
		}
		if got := c.deadline.Sub(start); got < tt.want || got > tt.want+time.Second {
			t.Errorf("stopping %v: a write's deadline %s ahead, want %s", tt.stopping, got.Round(time.Millisecond), tt.want)
		}
	}
}
