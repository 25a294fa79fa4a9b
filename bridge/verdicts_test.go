package bridge

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/projections"
	"github.com/aglx/ledger/protocol"
)

// TestResendsLeaveNoVerdicts: what the validation workers record for a
// frame is dropped once it is of no more use: by the fold for an event it
// applies, and by the bridge for a resend answered from the first copy,
// which the fold never sees. A signed auth.request sent again and again
// under one ID kept its records, parsed key and all, until newer ones
// pushed them out: tens of megabytes anyone could keep filled
// (helper-76).
func TestResendsLeaveNoVerdicts(t *testing.T) {
	const node = "registry://localhost"
	l, quiet := openBenchLog(t)
	_, nodeKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	cache := projections.NewVerdictCache()
	reg := projections.NewRegistry(projections.RegistryConfig{NodeURI: node, NodeKey: nodeKey, Verdicts: cache})
	runner := projections.NewRunner(l, quiet, reg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runFor(t, ctx, cancel, runner)
	srv := New(l, Config{Name: node, AllowPlaintextSecurity: true, Verifier: &projections.IngestVerifier{Registry: reg, Cache: cache}}, quiet)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.ServeTCP(ln, events.TransportTCP)
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		srv.Shutdown(sctx)
	}()
	key, err := protocol.GenerateKey(protocol.KeyEd25519)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := protocol.MarshalPublicKey(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf(`{"agent_id":"m","public_key":%q,"timestamp":%q}`, pub, time.Now().UTC().Format(time.RFC3339))
	c, err := Dial(ctx, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const copies = 200
	for range copies {
		f := &protocol.Frame{Transport: protocol.TransportTCP, Body: []byte(body), Headers: []protocol.Header{
			{Name: protocol.HeaderFrom, Value: "agent://mallory.local"}, {Name: protocol.HeaderTo, Value: node},
			{Name: protocol.HeaderType, Value: protocol.TypeAuthRequest}, {Name: protocol.HeaderID, Value: "same-id"},
			{Name: protocol.HeaderContentType, Value: "application/json"}}}
		if err := protocol.SignFrame(key, f); err != nil {
			t.Fatal(err)
		}
		if err := c.WriteFrame(f); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	for range copies {
		if _, err := c.ReadReply(); err != nil {
			t.Fatal(err)
		}
	}
	// Every reply is out: the resends' records are gone with them; the
	// first copy's goes when the fold applies it.
	for deadline := time.Now().Add(20 * time.Second); cache.Len() != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the cache holds records of %d events after %d copies of one message were answered", cache.Len(), copies)
		}
	}
}
