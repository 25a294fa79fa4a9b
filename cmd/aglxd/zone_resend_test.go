package main

import (
	"context"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/protocol"
)

// TestZoneJoinResendGetsNoToken: the outbox keeps every reply for a resend
// of the same message (same FROM and ID inside the duplicate window). A
// zone.join's reply holds a session token, and anyone who read the join
// from the event stream (any NATS reader, aglx tail) could send it again
// on a connection of its own and be handed the token (helper-54). A resend
// now gets 409; the first copy's sender keeps the only token.
func TestZoneJoinResendGetsNoToken(t *testing.T) {
	secret := []byte("zone secret of sixteen+ bytes!!")
	m := rfStartNode(t, t.TempDir(), "", rfZone{ID: "z", Secret: hex.EncodeToString(secret), MinRep: 0.4})
	tcp, sec := dial(t, m.TCPAddr()), dialTLS(t, m)
	dora := &rfAgent{"agent://dora.local", rfNewKey(t, protocol.KeyEd25519)}
	id, _, _ := rfEnroll(t, m, tcp, sec, dora)
	f := rfFrame(dora.uri, m.cfg.Name, "zone.join", fmt.Sprintf(`{"zone_id":"z","agent_id":%q,"timestamp":%q}`, id, rfStamp(0)))
	f.Headers = append(f.Headers, protocol.Header{Name: "ID", Value: "join-1"})
	rep, a := rfSend(t, sec, rfHMAC(t, secret, f))
	tok, _ := rfWant(t, "dora's join", rep, "zone.confirm", 200)["session_token"].(string)
	if tok == "" {
		t.Fatalf("dora's zone.confirm has no session_token: %s", rep.Body)
	}

	// Someone else reads the stored event and sends it again as stored.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := m.log.WaitPublished(ctx, a.Seq); err != nil {
		t.Fatal(err)
	}
	var stolen *protocol.Frame
	openLog(t, m).Read(ctx, events.ReadOptions{StartSeq: a.Seq}, func(ev *events.Envelope) error {
		stolen = ev.Frame()
		stolen.Transport = protocol.TransportTCP
		return context.Canceled
	})
	if stolen == nil || stolen.ID() != "join-1" {
		t.Fatalf("read back %v, want dora's zone.join with its ID", stolen)
	}
	rep2, _ := rfSend(t, dialTLS(t, m), stolen)
	if strings.Contains(string(rep2.Body), tok) {
		t.Fatalf("a resend from another connection got dora's session token:\n%s %s\n%s", rep2.Type(), rep2.Value("STATUS"), rep2.Body)
	}
	rfWant(t, "the resend", rep2, "error", 409)
}
