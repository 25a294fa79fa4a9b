package main

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aglx/ledger/bridge"
	"github.com/aglx/ledger/protocol"
)

// TestMintWithALostReplyIsUnknown: a mint whose frame was written and
// whose reply was lost (the node took it, then the connection dropped)
// may be booked: aglx mint exits 3, outcome unknown, and says to run it
// again with its --tx-id. It exited 1, which says "refused", and a script
// that minted again under a new transaction id paid twice (helper-89).
func TestMintWithALostReplyIsUnknown(t *testing.T) {
	keyPath, apiURL, ln := mintPeer(t)
	go func() { // takes the frame, then the connection drops before the reply
		c, err := ln.Accept()
		if err != nil {
			return
		}
		d := protocol.NewDecoder(c, protocol.DecoderOptions{})
		d.Decode()
		c.Close()
	}()
	var out strings.Builder
	err := runMint([]string{"--key", keyPath, "--addr", ln.Addr().String(), "--http", apiURL, "--to", "agent://a.local", "--amount", "5"}, &out)
	if code, ok := err.(exitCode); !ok || code != mintUnknown {
		t.Fatalf("aglx mint with the reply lost after sending = %v (exit 1: 'refused'); want exit %d, outcome unknown\n%s", err, mintUnknown, out.String())
	}
}

// mintPeer is what aglx mint talks to: an HTTP API that names the node
// and the key of the node key file at keyPath, and a listener for its
// frame, whose connections the test handles. Both close with the test.
func mintPeer(t *testing.T) (keyPath, apiURL string, ln net.Listener) {
	t.Helper()
	key, keyPath := nodeKeyFile(t)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(bridge.NodeInfo{Name: "registry://localhost", KeyID: protocol.KeyID(key.Public())})
	}))
	t.Cleanup(api.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return keyPath, api.URL, ln
}
