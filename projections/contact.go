package projections

import (
	"net"
	"strconv"
	"time"
)

// Contact is where an agent said it listens (registry.update's address and
// port), if it told this node itself and its entry has not expired at now.
// The relay delivers messages there. Call it under Runner.View.
func (r *Registry) Contact(uri string, now time.Time) (string, bool) {
	a, ok := r.agents[uri]
	if !ok || a.Source != SourceSelf || a.Address == "" || a.Port <= 0 || a.Port > 65535 || a.expired(now) {
		return "", false
	}
	return net.JoinHostPort(a.Address, strconv.FormatInt(a.Port, 10)), true
}
