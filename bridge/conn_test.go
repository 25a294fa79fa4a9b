package bridge

import (
	"io"
	"net"
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
	if _, err := (deadlineWriter{a}).Write([]byte("a reply")); err != nil {
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
