package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aglx/ledger/bridge"
	"github.com/aglx/ledger/protocol"
)

// TestAuditPinsTheNodeKey: an auditor needs no secret of the node's, only
// its public key, which the node names itself; --key-id makes the audit
// refuse a node that names another key than the one on record, before it
// folds anything.
func TestAuditPinsTheNodeKey(t *testing.T) {
	k, err := protocol.GenerateKey(protocol.KeyEd25519)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := protocol.MarshalPublicKey(k.Public())
	if err != nil {
		t.Fatal(err)
	}
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/node":
			json.NewEncoder(w).Encode(bridge.NodeInfo{Name: "registry://localhost", PublicKey: pub, KeyID: protocol.KeyID(k.Public())})
		default:
			http.NotFound(w, r)
		}
	}))
	defer api.Close()
	err = runAudit(context.Background(), []string{"--http", api.URL, "--key-id", "sha256:0000000000000000"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), protocol.KeyID(k.Public())) || !strings.Contains(err.Error(), "pinned") {
		t.Fatalf("audit against another key than the pinned one: %v", err)
	}
	// With the right pin it gets past the key, to the digest this server
	// does not have: the key check let it through.
	err = runAudit(context.Background(), []string{"--http", api.URL, "--key-id", protocol.KeyID(k.Public())}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "digest") {
		t.Fatalf("audit with the right pin: %v", err)
	}
}
