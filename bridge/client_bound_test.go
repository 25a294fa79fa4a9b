package bridge

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/aglx/ledger/protocol"
)

// TestRelayReplyBodyBound: the relay's client reads a reply whose body is
// relayReplyBodyMax bytes, and refuses one a byte longer with a fatal
// error (which the relay takes as the receipt, dropping the connection)
// instead of reading up to the largest body a frame may have.
func TestRelayReplyBodyBound(t *testing.T) {
	for _, tc := range []struct {
		body  int
		fatal bool
	}{{relayReplyBodyMax, false}, {relayReplyBodyMax + 1, true}} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			pad := strings.Repeat("x", tc.body-len(`{"pad":""}`))
			c.Write([]byte("AGLX/1.0 TCP\nFROM: agent://w.local\nTO: agent://s.local\nTYPE: ack\n\n{\"pad\":\"" + pad + "\"}\n"))
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c, err := dialBounded(ctx, ln.Addr().String(), relayReplyBodyMax)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		c.Conn().SetDeadline(time.Now().Add(5 * time.Second))
		f, err := c.ReadReply()
		var pe *protocol.Error
		switch {
		case tc.fatal && !(errors.As(err, &pe) && pe.Fatal):
			t.Errorf("a body of %d bytes: %v, want a fatal refusal", tc.body, err)
		case !tc.fatal && (err != nil || len(f.Body) != tc.body):
			t.Errorf("a body of %d bytes: %v, want it read whole", tc.body, err)
		}
		c.Close()
		ln.Close()
	}
}
