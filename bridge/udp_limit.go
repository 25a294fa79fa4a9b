package bridge

import (
	"net"
	"time"

	"golang.org/x/time/rate"
)

// UDP admission. Every announce the node takes is an event, kept for good,
// and a datagram's source address and FROM cost its sender nothing: one
// sender on one core filled 30 MB of disk a second with announces under
// fresh names, and a full disk stops the whole ledger (helper-68). So the
// node reads at most so many datagrams a second from one host and from
// all together, and drops the rest unread and unanswered (counted in
// aglx_udp_limited_total). An agent announces itself every few seconds at
// most; these bounds leave room for thousands of agents.
const (
	// UDPPerHostPerSecondMax and UDPPerHostBurst bound the datagrams taken
	// from one host (an IPv4 address, or an IPv6 /64).
	UDPPerHostPerSecondMax = 5  // datagrams per second
	UDPPerHostBurst        = 20 // datagrams
	// UDPPerSecondMax and UDPBurst bound the datagrams taken from all
	// hosts together: at most about 0.7 MB of log a second from UDP.
	UDPPerSecondMax = 1000 // datagrams per second
	UDPBurst        = 2000 // datagrams
	// UDPPerNetPerSecondMax and UDPPerNetBurst bound the datagrams taken
	// from one network (an IPv4 /24, an IPv6 /48): one site's addresses,
	// each within its own bound, took the whole global budget, a /56 of
	// 256 /64s alone 1,280 a second (helper-71).
	UDPPerNetPerSecondMax = 100 // datagrams per second
	UDPPerNetBurst        = 200 // datagrams
	// udpHostsMax bounds the hosts and networks whose budget is
	// remembered. When it is full, the budgets that have filled up again
	// are forgotten: a full budget is what a forgotten one would start
	// with, so forgetting it gives no one anything.
	udpHostsMax = 4096 // hosts and networks
	// udpSweepEvery bounds how often a full table is searched for budgets
	// to forget, so that a flood of new sources does not make every
	// datagram pay for a search of the whole table.
	udpSweepEvery = 100 * time.Millisecond
)

// udpLimiter decides which datagrams the node reads. Each UDP read loop
// has its own and is its only user, so it takes no lock.
type udpLimiter struct {
	all   *rate.Limiter
	hosts rateTable // by host and by network
}

func newUDPLimiter() *udpLimiter {
	return &udpLimiter{all: rate.NewLimiter(UDPPerSecondMax, UDPBurst), hosts: newRateTable(udpHostsMax, udpSweepEvery)}
}

// allow reports whether a datagram from addr may be read now. A host over
// its budget does not spend the global one, and a datagram the global
// budget refuses does not spend the host's.
//
// Only budgets that have filled up again are forgotten, so a sender
// cannot reset its own by sending from enough other addresses to have it
// forgotten (helper-71), and a quiet agent is not starved by sources it
// never meets: forgetting the oldest budgets, active or not, and starting
// every new one empty past half the table, let 1,000 spoofed datagrams a
// second drop almost every real announce (helper-82). When every budget
// in the table is in use (more sources within a few seconds than it
// holds), a new source is not remembered and starts with none.
func (l *udpLimiter) allow(addr net.Addr, now time.Time) bool {
	host, network := hostOf(addr), "net "+prefixOf(addr, 24, 48)
	n, newN := l.budget(network, UDPPerNetPerSecondMax, UDPPerNetBurst, now)
	h, newH := l.budget(host, UDPPerHostPerSecondMax, UDPPerHostBurst, now)
	if l.all.TokensAt(now) < 1 || n.TokensAt(now) < 1 {
		return false
	}
	ok := h.AllowN(now, 1) && n.AllowN(now, 1) && l.all.AllowN(now, 1)
	// A budget is remembered once a token has been taken from it: one
	// never spent is full, which is what a forgotten one starts as, and
	// remembering it would only fill the table (helper-83: fresh hosts of
	// one /48, each refused by its network's budget, filled it faster
	// than it was swept).
	if newH && h.TokensAt(now) < float64(h.Burst()) {
		l.hosts.add(host, h, now)
	}
	if newN && n.TokensAt(now) < float64(n.Burst()) {
		l.hosts.add(network, n, now)
	}
	return ok
}

// budget is the remembered budget of key, or a new one (with rate r and
// burst b), not yet remembered, and whether it is new. A new one starts
// full, unless the table is full of budgets in use: then it starts
// empty, or changing one's address would be a fresh burst.
func (l *udpLimiter) budget(key string, r rate.Limit, b int, now time.Time) (*rate.Limiter, bool) {
	if h := l.hosts.get(key); h != nil {
		return h, false
	}
	h := rate.NewLimiter(r, b)
	if l.hosts.full(now) {
		h.AllowN(now, b)
	}
	return h, true
}
