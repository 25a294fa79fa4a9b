package main

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/aglx/ledger/protocol"
)

// TestMintGivesUpOnASilentNode: a node that takes the mint's frame and
// never answers (its store stuck, or a peer that accepts and says
// nothing) held aglx mint for ever: its 30 s bounded the dial only. It
// now gives up after --timeout, exits 3 (outcome unknown) and names the
// --tx-id to run it again with.
func TestMintGivesUpOnASilentNode(t *testing.T) {
	keyPath, apiURL, ln := mintPeer(t)
	conns := make(chan net.Conn, 1)
	go func() { // takes the frame and says nothing
		c, err := ln.Accept()
		if err != nil {
			return
		}
		conns <- c
		protocol.NewDecoder(c, protocol.DecoderOptions{}).Decode()
	}()
	defer func() {
		select {
		case c := <-conns:
			c.Close()
		default:
		}
	}()
	var out strings.Builder
	done := make(chan error, 1)
	go func() {
		done <- runMint([]string{"--key", keyPath, "--addr", ln.Addr().String(), "--http", apiURL, "--to", "agent://a.local", "--amount", "5", "--tx-id", "mint-silent", "--timeout", "500ms"}, &out)
	}()
	select {
	case err := <-done:
		if code, ok := err.(exitCode); !ok || code != mintUnknown {
			t.Fatalf("aglx mint to a silent node = %v; want exit %d, outcome unknown\n%s", err, mintUnknown, out.String())
		}
		if !strings.Contains(out.String(), "--tx-id mint-silent") {
			t.Fatalf("aglx mint to a silent node does not say to run it again with its --tx-id:\n%s", out.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("aglx mint to a node that never answers still waits after 10 s (--timeout 500ms)")
	}
}
