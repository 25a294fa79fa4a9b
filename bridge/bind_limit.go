package bridge

import (
	"net"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Key bindings per host. An auth.request binds a key to a name, and the
// registry keeps at most RegistryKeysMax (about a million) names with
// keys, never forgetting one: a sender with one throwaway key could bind
// it to made-up names as fast as the node takes frames, fill that bound in
// minutes, and after that no new agent could bind a key, and agents
// without one can be impersonated by anyone (helper-87). So the edge takes
// at most so many auth.requests a second from one host (an IPv4 address,
// an IPv6 /64), and refuses the rest (429) before they are recorded. A
// host that starts a thousand agents at once binds them all within the
// burst; a flood of a million from one host takes more than a day. One
// network (an IPv4 /24, an IPv6 /48) has a budget of its own as well, ten
// hosts' worth: a /56 holds 256 /64s, whose budgets alone let a million
// names be bound in five minutes (helper-90).
//
// A resend of an auth.request (same FROM and ID) is charged like the
// first: the edge cannot tell it from a new one before the log does. A
// host over its budget gets 429, which asks it to send again in a moment.
const (
	BindsPerHostPerSecondMax = 10     // auth.requests per second
	BindsPerHostBurst        = 1000   // auth.requests
	BindsPerNetPerSecondMax  = 100    // auth.requests per second
	BindsPerNetBurst         = 10_000 // auth.requests
	// bindBudgetsMax bounds the hosts and networks whose budget is
	// remembered (rateTable, searched for full budgets at most once per
	// bindSweepEvery, under the lock every reader takes); the ones the
	// table has no room for share one budget.
	bindBudgetsMax = 4096 // hosts and networks
	bindSweepEvery = 100 * time.Millisecond
)

// bindLimiter decides which auth.requests the edge takes. Every
// connection's reader asks it, so it locks.
type bindLimiter struct {
	mu       sync.Mutex
	budgets  rateTable     // by host, and by "net " and network
	overflow *rate.Limiter // those not remembered
}

func newBindLimiter() *bindLimiter {
	return &bindLimiter{budgets: newRateTable(bindBudgetsMax, bindSweepEvery), overflow: rate.NewLimiter(BindsPerHostPerSecondMax, BindsPerHostBurst)}
}

// allow reports whether an auth.request from peer (an address and port as
// a connection recorded it) may be taken now: its host and its network
// must each have a token, and neither is spent if the other has none.
func (l *bindLimiter) allow(peer string, now time.Time) bool {
	host, network := peerUnits(peer)
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.budget("net "+network, BindsPerNetPerSecondMax, BindsPerNetBurst, now)
	h := l.budget(host, BindsPerHostPerSecondMax, BindsPerHostBurst, now)
	if n == h { // both on the overflow budget
		return h.AllowN(now, 1)
	}
	if n.TokensAt(now) < 1 || h.TokensAt(now) < 1 {
		return false
	}
	return h.AllowN(now, 1) && n.AllowN(now, 1)
}

// budget is the budget under key, made if there is room. The caller
// holds l.mu.
func (l *bindLimiter) budget(key string, perSecond rate.Limit, burst int, now time.Time) *rate.Limiter {
	if b := l.budgets.get(key); b != nil {
		return b
	}
	b := rate.NewLimiter(perSecond, burst)
	if !l.budgets.add(key, b, now) {
		return l.overflow
	}
	return b
}

// peerUnits are the host (hostOf) and the network (an IPv4 /24, an IPv6
// /48) of a peer's address as a connection recorded it.
func peerUnits(peer string) (host, network string) {
	ap, err := netip.ParseAddrPort(peer)
	if err != nil {
		return peer, peer
	}
	a := &net.TCPAddr{IP: ap.Addr().Unmap().AsSlice(), Port: int(ap.Port())}
	return hostOf(a), prefixOf(a, 24, 48)
}
