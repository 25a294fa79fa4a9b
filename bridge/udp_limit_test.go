package bridge

import (
	"fmt"
	"net"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// TestUDPLimiter: one host gets its burst and then its rate, whatever the
// FROM in its datagrams; another host is not held back by it; all hosts
// together get at most the global burst; an IPv6 host counts by its /64.
func TestUDPLimiter(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	a := &net.UDPAddr{IP: net.ParseIP("127.0.0.1"), Port: 4000}
	b := &net.UDPAddr{IP: net.ParseIP("127.0.0.2"), Port: 4000}
	taken := func(l *udpLimiter, addr func(i int) net.Addr, n int, now time.Time) int {
		ok := 0
		for i := range n {
			if l.allow(addr(i), now) {
				ok++
			}
		}
		return ok
	}
	tests := []struct {
		name string
		run  func(t *testing.T, l *udpLimiter)
	}{
		{"one host: its burst, then its rate", func(t *testing.T, l *udpLimiter) {
			if got := taken(l, func(int) net.Addr { return a }, 100, at); got != UDPPerHostBurst {
				t.Fatalf("100 datagrams at once from one host: %d taken, want the burst %d", got, UDPPerHostBurst)
			}
			if got := taken(l, func(int) net.Addr { return a }, 100, at.Add(time.Second)); got != UDPPerHostPerSecondMax {
				t.Fatalf("a second later: %d taken, want %d", got, UDPPerHostPerSecondMax)
			}
		}},
		{"another host is not held back", func(t *testing.T, l *udpLimiter) {
			taken(l, func(int) net.Addr { return a }, 100, at)
			if got := taken(l, func(int) net.Addr { return b }, 1, at); got != 1 {
				t.Fatal("a second host was refused after the first spent its budget")
			}
		}},
		{"one IPv6 /64 is one host", func(t *testing.T, l *udpLimiter) {
			got := taken(l, func(i int) net.Addr {
				ip := net.ParseIP("2001:db8::1")
				ip[15] = byte(i)
				return &net.UDPAddr{IP: ip, Port: 4000}
			}, 100, at)
			if got != UDPPerHostBurst {
				t.Fatalf("100 addresses of one /64: %d taken, want %d", got, UDPPerHostBurst)
			}
		}},
		{"all hosts together: at most the global burst", func(t *testing.T, l *udpLimiter) {
			got := taken(l, func(i int) net.Addr {
				return &net.UDPAddr{IP: net.IPv4(10, byte(i>>8), byte(i), 1), Port: 4000} // each in its own /24
			}, 3*UDPBurst, at)
			if got == 0 || got > UDPBurst {
				t.Fatalf("%d hosts at once: %d taken, want some and at most the global burst %d", 3*UDPBurst, got, UDPBurst)
			}
			if len(l.hosts.m) > udpHostsMax {
				t.Fatalf("%d budgets remembered, want at most %d", len(l.hosts.m), udpHostsMax)
			}
		}},
		{"one network: its own bound", func(t *testing.T, l *udpLimiter) {
			got := taken(l, func(i int) net.Addr {
				return &net.UDPAddr{IP: net.IPv4(10, 0, 0, byte(i)), Port: 4000}
			}, 256*UDPPerHostBurst, at)
			if got != UDPPerNetBurst {
				t.Fatalf("256 hosts of one /24, each its whole burst: %d taken, want the network's burst %d", got, UDPPerNetBurst)
			}
		}},
		// One site's /64s, each within its own bound, took the whole
		// global budget, and a quiet agent elsewhere got nothing
		// (helper-71).
		{"one IPv6 site does not starve a quiet agent", func(t *testing.T, l *udpLimiter) {
			agent := &net.UDPAddr{IP: net.ParseIP("192.0.2.7"), Port: 4000}
			for sec := range 10 {
				now := at.Add(time.Duration(sec) * time.Second)
				taken(l, func(i int) net.Addr {
					return &net.UDPAddr{IP: net.ParseIP(fmt.Sprintf("2001:db8:0:%02x00::1", i%256)), Port: 4000}
				}, 256*UDPPerHostBurst, now)
				if !l.allow(agent, now) {
					t.Fatalf("second %d: a quiet agent's one announce was dropped while one /56 flooded", sec)
				}
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, newUDPLimiter()) })
	}
}

// TestUDPLimiterForgettingResetsNoBudget: a sender that has spent its
// budget cannot get a fresh one by sending from enough other addresses
// for its own to be forgotten: under that pressure a host not remembered
// starts with none (helper-71).
func TestUDPLimiterForgettingResetsNoBudget(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	l := newUDPLimiter()
	l.all = rate.NewLimiter(1e9, 1<<30) // the per-host bound alone
	a := &net.UDPAddr{IP: net.ParseIP("127.0.0.1"), Port: 4000}
	first, again := 0, 0
	for range 100 {
		if l.allow(a, at) {
			first++
		}
	}
	for i := range udpHostsMax {
		l.allow(&net.UDPAddr{IP: net.IPv4(10, 9, byte(i>>8), byte(i)), Port: 1}, at)
	}
	for range 100 {
		if l.allow(a, at) {
			again++
		}
	}
	if first != UDPPerHostBurst || again != 0 {
		t.Fatalf("host a: %d datagrams taken, then, at the same instant after %d other sources, %d more; want %d and 0", first, udpHostsMax, again, UDPPerHostBurst)
	}
}

// TestUDPLimiterKeepsRoomForAgentsUnderSpoofing: sources that each send a
// datagram or two, from addresses never seen again, well within the global
// budget, do not make a real agent's announces go unread. Budgets were
// forgotten oldest first, active or not, and past half the table every new
// one started empty, for good: 1,000 spoofed datagrams a second dropped
// almost every real announce while the global budget stayed full
// (helper-82).
func TestUDPLimiterKeepsRoomForAgentsUnderSpoofing(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	l := newUDPLimiter()
	agent := &net.UDPAddr{IP: net.ParseIP("192.0.2.7"), Port: 4000}
	taken := 0
	const rounds, spoofed = 20, 1000 // a round every 2 s: 500 spoofed datagrams a second
	for r := range rounds {
		now := at.Add(time.Duration(r) * 2 * time.Second)
		for i := range spoofed {
			n := r*spoofed + i
			l.allow(&net.UDPAddr{IP: net.IPv4(10, byte(n>>16), byte(n>>8), byte(n)), Port: 1}, now.Add(time.Duration(i)*time.Millisecond))
		}
		if l.allow(agent, now.Add(time.Second)) {
			taken++
		}
		if len(l.hosts.m) > udpHostsMax {
			t.Fatalf("%d budgets remembered, want at most %d", len(l.hosts.m), udpHostsMax)
		}
	}
	if taken != rounds {
		t.Fatalf("the agent's announces: %d of %d taken, with the global budget never spent", taken, rounds)
	}
}

// TestUDPLimiterOneNetworkOfFreshHosts: one IPv6 /48 sending from a fresh
// /64 every time, 60,000 datagrams a second, is held to its network's
// budget and does not keep quiet agents elsewhere from being read. Each
// refused datagram left a budget behind that had never been spent, and
// the table filled between two sweeps, so agents started empty
// (helper-83: about two thirds of their announces taken); a budget is now
// remembered only once a token has been taken from it.
func TestUDPLimiterOneNetworkOfFreshHosts(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	l := newUDPLimiter()
	agents, taken, sent := 20, 0, 0
	fresh := 0
	for ms := 0; ms < 5000; ms += 10 {
		now := at.Add(time.Duration(ms) * time.Millisecond)
		for range 600 {
			fresh++
			ip := net.ParseIP("2001:db8:1::1")
			ip[6], ip[7] = byte(fresh>>8), byte(fresh) // a new /64 of the /48 each time
			l.allow(&net.UDPAddr{IP: ip, Port: 1}, now)
		}
		for a := range agents {
			if ms%1000 == a*50 { // each agent once a second
				sent++
				if l.allow(&net.UDPAddr{IP: net.IPv4(192, 0, 2, byte(a)), Port: 4000}, now) {
					taken++
				}
			}
		}
		if len(l.hosts.m) > udpHostsMax {
			t.Fatalf("%d budgets remembered, want at most %d", len(l.hosts.m), udpHostsMax)
		}
	}
	if taken != sent {
		t.Fatalf("the agents' announces: %d of %d taken beside one /48's flood", taken, sent)
	}
}
