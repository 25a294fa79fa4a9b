package bridge

import (
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/protocol"
)

// TestBindLimiter: a host may bind keys in a burst, then at the sustained
// rate; other hosts keep their own budgets; an IPv6 host is its /64; a
// table full of hosts in use puts new ones on a shared budget, and hosts
// whose budgets have filled again are forgotten to make room.
func TestBindLimiter(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	l := newBindLimiter()
	take := func(host string, n int, at time.Time) int {
		ok := 0
		for range n {
			if l.allow(host, at) {
				ok++
			}
		}
		return ok
	}
	a := hostOfPeer("192.0.2.1:40000")
	if got := take(a, BindsPerHostBurst+50, now); got != BindsPerHostBurst {
		t.Fatalf("a burst took %d, want %d", got, BindsPerHostBurst)
	}
	if got := take(a, 100, now.Add(time.Second)); got != BindsPerHostPerSecondMax {
		t.Fatalf("a second later %d, want %d", got, BindsPerHostPerSecondMax)
	}
	if got := take(hostOfPeer("192.0.2.2:40000"), 10, now); got != 10 {
		t.Fatalf("another host took %d of 10", got)
	}
	v6a, v6b := hostOfPeer("[2001:db8:1:2::1]:5000"), hostOfPeer("[2001:db8:1:2::ffff]:5001")
	if v6a != v6b {
		t.Fatalf("two addresses of one /64 are two hosts: %q, %q", v6a, v6b)
	}
	// Fill the table with hosts that spent a token each, within the same
	// instant: none has filled again, so the next host shares a budget.
	l = newBindLimiter()
	for i := range bindHostsMax {
		take(fmt.Sprintf("10.0.%d.%d", i/256, i%256), 1, now)
	}
	if got := take("198.51.100.1", BindsPerHostBurst+10, now); got != BindsPerHostBurst {
		t.Fatalf("past a full table, a new host took %d, want the shared budget's %d", got, BindsPerHostBurst)
	}
	if got := take("198.51.100.2", 5, now); got != 0 {
		t.Fatalf("the shared budget, spent, gave another new host %d", got)
	}
	// A second on, the remembered budgets are full again: they are
	// forgotten, and a new host gets one of its own.
	if got := take("198.51.100.3", 5, now.Add(time.Second)); got != 5 {
		t.Fatalf("with the remembered budgets full again, a new host took %d of 5", got)
	}
}

// TestTheEdgeRefusesBindsPastAHostsBudget: an auth.request from a host
// that has spent its budget is refused (429) at the edge, and not
// recorded; one from another host is taken.
func TestTheEdgeRefusesBindsPastAHostsBudget(t *testing.T) {
	s := New(nil, Config{}, nil)
	now := time.Now().UTC()
	for range BindsPerHostBurst {
		s.binds.allow(hostOfPeer("192.0.2.9:4000"), now)
	}
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := protocol.MarshalPublicKey(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	frame := func() *protocol.Frame {
		f := &protocol.Frame{Transport: protocol.TransportTCP, Headers: []protocol.Header{
			{Name: protocol.HeaderFrom, Value: "agent://a.local"}, {Name: protocol.HeaderTo, Value: "registry://localhost"},
			{Name: protocol.HeaderType, Value: protocol.TypeAuthRequest}},
			Body: fmt.Appendf(nil, `{"agent_id": "a", "public_key": %q, "timestamp": %q}`, pub, now.Format(time.RFC3339))}
		if err := protocol.SignFrame(key, f); err != nil {
			t.Fatal(err)
		}
		return f
	}
	for _, tc := range []struct {
		peer string
		want protocol.Status // 0: taken (an event to record)
	}{
		{"192.0.2.9:4001", protocol.StatusTooManyRequests},
		{"192.0.2.10:4001", 0},
	} {
		it := s.prepare(frame(), nil, events.TransportTLS, tc.peer)
		it.receivedAt = now
		s.validate(it)
		switch got := protocol.StatusOf(it.refusal); {
		case tc.want == 0 && (it.refusal != nil || it.env == nil):
			t.Errorf("from %s: refused %v; want it taken", tc.peer, it.refusal)
		case tc.want != 0 && (got != tc.want || it.env != nil):
			t.Errorf("from %s: %d, event %v; want %d and nothing recorded", tc.peer, got, it.env != nil, tc.want)
		}
	}
}
