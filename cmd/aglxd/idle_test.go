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

// TestIdleClockWaitsForTheReplies: the idle clock runs only while the
// node owes the peer nothing. A peer waiting longer than --idle-timeout
// for a reply (here the write-ahead commit is held back) keeps its
// connection, gets the reply, and can send the next frame on it.
func TestIdleClockWaitsForTheReplies(t *testing.T) {
	ns := startExternalNATS(t)
	proxy := startGateProxy(t, ns.Addr().String())
	const idle = time.Second
	m := startNodeWith(t, t.TempDir(), func(c *Config) {
		c.NATSURL = "nats://" + proxy.ln.Addr().String()
		c.IdleTimeout = idle
	})
	t.Cleanup(proxy.resume)
	c := dial(t, m.TCPAddr())

	proxy.pause()
	c.Write(referenceFiles(t)[3])
	c.Flush()
	// Longer than the idle timeout with the reply owed: nothing may close.
	time.Sleep(3 * idle)
	proxy.resume()
	readAck(t, c)
	c.Write(referenceFiles(t)[3])
	c.Flush()
	readAck(t, c)
	if got := m.bridge.Counters().ConnectionsIdle; got != 0 {
		t.Fatalf("%d connections closed as idle while the node owed them a reply", got)
	}
}

// TestReplyIsFlushedBeforeASilentFrame: a frame the node never answers (an
// ack from the peer) right behind one it does must not keep the first
// reply in the node's buffer until some later frame comes.
func TestReplyIsFlushedBeforeASilentFrame(t *testing.T) {
	m := startNodeWith(t, t.TempDir(), func(*Config) {})
	c := dial(t, m.TCPAddr())
	c.Write(referenceFiles(t)[3]) // task.result: answered
	c.Write([]byte("AGLX/1.0 TCP\nFROM: agent://a.local\nTO: registry://localhost\nTYPE: ack\n\n{}\n"))
	c.Flush()
	c.Conn().SetReadDeadline(time.Now().Add(20 * time.Second)) // the idle timeout is 5 min
	readAck(t, c)
}
