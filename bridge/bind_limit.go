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
// burst; a flood of a million from one host takes more than a day.
const (
	BindsPerHostPerSecondMax = 10   // auth.requests per second
	BindsPerHostBurst        = 1000 // auth.requests
	// bindHostsMax bounds the hosts whose budget is remembered. When it is
	// full, the budgets that have filled up again are forgotten (a full
	// budget is what a forgotten one starts as); if none has, the hosts
	// not remembered share one budget until some have.
	bindHostsMax = 4096 // hosts
)

// bindLimiter decides which auth.requests the edge takes. Every
// connection's reader asks it, so it locks.
type bindLimiter struct {
	mu       sync.Mutex
	hosts    map[string]*rate.Limiter
	overflow *rate.Limiter // the hosts not remembered
}

func newBindLimiter() *bindLimiter {
	return &bindLimiter{hosts: map[string]*rate.Limiter{}, overflow: rate.NewLimiter(BindsPerHostPerSecondMax, BindsPerHostBurst)}
}

// allow reports whether an auth.request from host may be taken now.
func (l *bindLimiter) allow(host string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.hosts[host]
	if b == nil {
		if len(l.hosts) >= bindHostsMax {
			for h, o := range l.hosts {
				if o.TokensAt(now) >= BindsPerHostBurst {
					delete(l.hosts, h)
				}
			}
		}
		if len(l.hosts) >= bindHostsMax {
			return l.overflow.AllowN(now, 1)
		}
		b = rate.NewLimiter(BindsPerHostPerSecondMax, BindsPerHostBurst)
		l.hosts[host] = b
	}
	return b.AllowN(now, 1)
}

// hostOfPeer is hostOf for a peer's address as a connection recorded it.
func hostOfPeer(peer string) string {
	ap, err := netip.ParseAddrPort(peer)
	if err != nil {
		return peer
	}
	return hostOf(&net.TCPAddr{IP: ap.Addr().Unmap().AsSlice(), Port: int(ap.Port())})
}
