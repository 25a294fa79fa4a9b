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
