package main

import (
	"io"
	"net"
	"testing"
	"time"
)

// TestIdleConnectionsAreClosed: a connection that completes no frame
// within --idle-timeout is closed, whether it sends nothing, trickles a
// frame it never finishes, or answered frames before and then fell
// silent; so idle peers cannot hold every connection slot.
func TestIdleConnectionsAreClosed(t *testing.T) {
	m := startNodeWith(t, t.TempDir(), func(c *Config) { c.IdleTimeout = time.Second })
	for i, tc := range []struct {
		name string
		send []byte
	}{
		{"silent", nil},
		{"an unfinished frame", []byte("AGLX/1.0 TCP\nFROM: agent://slow.local\nTO: ")},
		{"silent after a frame", referenceFiles(t)[3]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", m.TCPAddr())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Write(tc.send); err != nil {
				t.Fatal(err)
			}
			// The node closes its end: the read ends (after any reply)
			// with EOF, long before this deadline.
			c.SetReadDeadline(time.Now().Add(20 * time.Second))
			if _, err := io.Copy(io.Discard, c); err != nil {
				t.Fatalf("reading until the node closes: %v", err)
			}
			if got := m.bridge.Counters().ConnectionsIdle; got != int64(i+1) {
				t.Fatalf("connections closed as idle: %d, want %d", got, i+1)
			}
		})
	}
}
