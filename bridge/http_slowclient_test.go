package bridge

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestASteadySlowDownloadIsNotCut: a client that reads its answer
// steadily, only slowly (a 1 MiB page at ~400 KB/s, a ~3 Mbit/s link), is
// in one Write call for
// longer than writeStallMax, since net/http hands a large body to the
// connection in one Write. At capacity with no idle connection the next
// client got that download cut, though it was never stuck (helper-89).
// Each piece of a write is stamped now.
func TestASteadySlowDownloadIsNotCut(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// The kernel's send buffer on a slow link stays near the path's
	// bandwidth-delay product, not loopback's megabytes.
	lim := LimitListener(smallSendBuffer{ln}, 1)
	page := bytes.Repeat([]byte("x"), 1<<20)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(len(page)))
		w.Write(page)
	}), ConnState: lim.ConnState}
	go srv.Serve(lim)
	defer srv.Close()

	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	c, err := d.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	got := make(chan int64, 1)
	var read atomic.Int64
	go func() { // reads 4 KiB every 10 ms, without a pause
		var n int64
		buf := make([]byte, 4096)
		for {
			k, err := c.Read(buf)
			n += int64(k)
			read.Store(n)
			if err != nil || n >= int64(len(page)) {
				got <- n
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	// Longer than writeStallMax, so that the download's writes have been
	// waiting on the reader long enough to count as stuck, were they.
	time.Sleep(1500 * time.Millisecond)
	if n := read.Load(); n == 0 || n >= int64(len(page)) {
		t.Fatalf("%d of %d bytes read when the second client comes: the download must be under way", n, len(page))
	}
	other, err := net.Dial("tcp", ln.Addr().String()) // e.g. /healthz
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	fmt.Fprintf(other, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	go io.Copy(io.Discard, other)
	select {
	case n := <-got:
		if n < int64(len(page)) {
			t.Fatalf("a steady download at ~400 KB/s was cut after %d of %d bytes to make room", n, len(page))
		}
	case <-time.After(20 * time.Second):
		t.Fatal("download did not end")
	}
}

type smallSendBuffer struct{ net.Listener }

func (l smallSendBuffer) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(64 << 10)
	}
	return c, err
}
