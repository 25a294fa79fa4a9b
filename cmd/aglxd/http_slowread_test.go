package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/aglx/ledger/bridge"
	"github.com/aglx/ledger/protocol"
)

// TestClientsThatReadNothingDoNotLockOutHealthz: 256 clients ask for a
// page of history each and never read the answer, so every connection
// the HTTP API may have is stuck in a write. /healthz is still answered:
// the connection stuck longest is closed to make room. Until 2026-12-01
// only idle connections were, and the liveness probe waited for the write
// timeout, a minute, again and again (helper-88).
func TestClientsThatReadNothingDoNotLockOutHealthz(t *testing.T) {
	m := startNode(t, t.TempDir())
	node := lfParty{uri: m.cfg.Name, key: m.key}
	c := dial(t, m.TCPAddr())
	const mints = 1000
	done := make(chan error, 1)
	go func() {
		for range mints {
			if _, err := c.ReadReply(); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for i := range mints {
		body := fmt.Sprintf(`{"amount":"1","currency":"AGLX","reason":"r","timestamp":%q,"transaction_id":"m-%d"}`, lfNow(), i)
		if err := c.WriteFrame(node.signed(t, "agent://bob.local", protocol.TypeCreditTransfer, body)); err != nil {
			t.Fatal(err)
		}
	}
	c.Flush()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	lfGet(t, m, "/v1/accounts/agent/bob.local/entries?limit=1000", mints)

	// A small receive buffer, so that the answers, a third of a megabyte
	// each, soon fill what the sockets hold and the writes stick.
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 2048) })
	}}
	for range bridge.HTTPConnectionsMax {
		conn, err := d.Dial("tcp", m.HTTPAddr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		for range 30 { // pipelined: more than the socket buffers hold
			fmt.Fprintf(conn, "GET /v1/accounts/agent/bob.local/entries?limit=1000 HTTP/1.1\r\nHost: x\r\n\r\n")
		}
		// and never read
	}
	// Until every slot is held by a connection that is not idle (its
	// answers being made, or stuck in their writes). A sleep of 2 s stood
	// here (helper-110). Under the race detector on a loaded machine the
	// answers (a gigabyte of JSON before every write sticks) take minutes,
	// and the first stuck writes reach the server's write timeout and end
	// before the last connections have had their first answer: there the
	// wait gives up after 20 s and /healthz is asked all the same, and
	// the listener's own tests (bridge, TestLimitListener and the ones after it) hold the
	// mechanism to account.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		open, idle := m.httpLimit.Held()
		if open == bridge.HTTPConnectionsMax && idle == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Logf("%d of %d slots held, %d idle, after 20 s: asking /healthz with the slots as they are", open, bridge.HTTPConnectionsMax, idle)
			break
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+m.HTTPAddr()+"/healthz", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("/healthz with %d clients not reading their answers: %v", bridge.HTTPConnectionsMax, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz: %d", resp.StatusCode)
	}
}
