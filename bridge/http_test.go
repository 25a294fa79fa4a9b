package bridge

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestLimitListener: past n open connections, Accept waits until one of
// them closes; Close ends a waiting Accept.
func TestLimitListener(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := LimitListener(inner, 2)
	accepted := make(chan net.Conn, 3)
	ended := make(chan error, 1)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				ended <- err
				return
			}
			accepted <- c
		}
	}()
	var clients []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients = append(clients, c)
	}
	var open []net.Conn
	for range 2 {
		select {
		case c := <-accepted:
			open = append(open, c)
		case <-time.After(10 * time.Second):
			t.Fatal("the first two connections were not accepted")
		}
	}
	select {
	case <-accepted:
		t.Fatal("a third connection was accepted with two open and a limit of two")
	case <-time.After(200 * time.Millisecond):
	}
	open[0].Close()
	select {
	case c := <-accepted:
		c.Close()
	case <-time.After(10 * time.Second):
		t.Fatal("the third connection was not accepted after one closed")
	}
	open[1].Close()
	ln.Close()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("Accept did not end when the listener closed")
	}
}

// TestIdleConnectionsMakeRoom: with every slot held by a kept-alive
// connection between requests, a new client waited for the server's idle
// timeout (two minutes in aglxd), so a few idle clients could fail the
// orchestrator's health checks. The longest-idle connection is closed to
// make room.
func TestIdleConnectionsMakeRoom(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := LimitListener(inner, 2)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }),
		IdleTimeout: time.Minute, ReadHeaderTimeout: time.Minute, ConnState: ln.ConnState}
	go srv.Serve(ln)
	defer srv.Close()

	for range 2 { // two clients, each with one answered request and its connection kept
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: node\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get("http://" + inner.Addr().String() + "/healthz")
	if err != nil {
		t.Fatalf("a third client with both slots idle: %v", err)
	}
	resp.Body.Close()
}
