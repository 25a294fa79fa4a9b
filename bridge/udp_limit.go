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
	// udpHostsMax bounds the hosts whose budget is remembered. When it is
	// full the oldest budgets are forgotten; a host forgotten starts with
	// a full burst, which the global bound still caps.
	udpHostsMax = 4096 // hosts
)

// udpLimiter decides which datagrams the node reads. Each UDP read loop
// has its own and is its only user, so it takes no lock.
type udpLimiter struct {
	all   *rate.Limiter
	hosts map[string]*rate.Limiter
	order []string // insertion order, for forgetting the oldest
}

func newUDPLimiter() *udpLimiter {
	return &udpLimiter{all: rate.NewLimiter(UDPPerSecondMax, UDPBurst), hosts: make(map[string]*rate.Limiter)}
}

// allow reports whether a datagram from addr may be read now. A host over
// its budget does not spend the global one, and a datagram the global
// budget refuses does not spend the host's.
//
// While more than half of udpHostsMax hosts are remembered (many sources
// at once: a flood, spoofed most likely), a host not remembered starts with
// an empty budget rather than a full burst: otherwise one sender resets its
// own budget by sending from enough other addresses to have it forgotten
// (helper-71). A quiet agent then waits a fifth of a second for its first
// datagram.
func (l *udpLimiter) allow(addr net.Addr, now time.Time) bool {
	host, network := hostOf(addr), "net "+prefixOf(addr, 24, 48)
	n := l.budget(network, UDPPerNetPerSecondMax, UDPPerNetBurst, now)
	h := l.budget(host, UDPPerHostPerSecondMax, UDPPerHostBurst, now)
	if l.all.TokensAt(now) < 1 || n.TokensAt(now) < 1 {
		return false
	}
	return h.AllowN(now, 1) && n.AllowN(now, 1) && l.all.AllowN(now, 1)
}

// budget is the remembered budget of key, made (with rate r and burst b)
// if there is none. The caller holds mu.
func (l *udpLimiter) budget(key string, r rate.Limit, b int, now time.Time) *rate.Limiter {
	h := l.hosts[key]
	if h == nil {
		if len(l.order) >= udpHostsMax {
			drop := l.order[:udpHostsMax/4]
			for _, k := range drop {
				delete(l.hosts, k)
			}
			l.order = append(l.order[:0], l.order[udpHostsMax/4:]...)
		}
		h = rate.NewLimiter(r, b)
		if len(l.order) > udpHostsMax/2 {
			h.AllowN(now, b)
		}
		l.hosts[key] = h
		l.order = append(l.order, key)
	}
	return h
}
