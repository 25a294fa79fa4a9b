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
// rate; other hosts keep their own budgets; an IPv6 host is its /64; the
// hosts of one network share its budget too, so that a /56's 256 /64s do
// not multiply the host's (helper-90); a table full of budgets in use puts
// new hosts on a shared budget, and budgets that have filled again are
// forgotten to make room.
func TestBindLimiter(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	l := newBindLimiter()
	take := func(peer string, n int, at time.Time) int {
		ok := 0
		for range n {
			if l.allow(peer, at) {
				ok++
			}
		}
		return ok
	}
	if got := take("192.0.2.1:40000", BindsPerHostBurst+50, now); got != BindsPerHostBurst {
		t.Fatalf("a burst took %d, want %d", got, BindsPerHostBurst)
	}
	if got := take("192.0.2.1:40001", 100, now.Add(time.Second)); got != BindsPerHostPerSecondMax {
		t.Fatalf("a second later %d, want %d", got, BindsPerHostPerSecondMax)
	}
	if got := take("198.51.100.2:40000", 10, now); got != 10 {
		t.Fatalf("a host of another network took %d of 10", got)
	}
	if got := take("[2001:db8:1:2::ffff]:5001", BindsPerHostBurst+10, now); got != BindsPerHostBurst {
		t.Fatalf("an IPv6 host took %d, want %d", got, BindsPerHostBurst)
	}
	if got := take("[2001:db8:1:2::1]:5000", 10, now); got != 0 {
		t.Fatalf("another address of the same /64 took %d; want none", got)
	}

	// One /48's /64s: together no more than the network's budget.
	l = newBindLimiter()
	total := 0
	for i := range 256 {
		total += take(fmt.Sprintf("[2001:db8:7:%x::1]:5000", i), BindsPerHostBurst, now)
	}
	if total != BindsPerNetBurst {
		t.Fatalf("256 /64s of one /48 took %d together; want the network's %d", total, BindsPerNetBurst)
	}

	// Fill the table with budgets that spent a token each, within one
	// instant: none has filled again, so a new host shares a budget.
	l = newBindLimiter()
	for i := range bindBudgetsMax / 2 {
		take(fmt.Sprintf("10.%d.%d.1:1", i/256, i%256), 1, now) // a host and its network each
	}
	if got := take("203.0.113.1:1", BindsPerHostBurst+10, now); got != BindsPerHostBurst {
		t.Fatalf("past a full table, a new host took %d, want the shared budget's %d", got, BindsPerHostBurst)
	}
	if got := take("203.0.113.2:1", 5, now); got != 0 {
		t.Fatalf("the shared budget, spent, gave another new host %d", got)
	}
	// A second on, the remembered budgets are full again: they are
	// forgotten, and a new host gets one of its own.
	if got := take("203.0.113.3:1", 5, now.Add(time.Second)); got != 5 {
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
		s.binds.allow("192.0.2.9:4000", now)
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
