package bridge

import (
	"net/netip"
	"testing"

	"github.com/aglx/ledger/events"
)

func TestWithEvent(t *testing.T) {
	a := events.Appended{EventID: "01E", Seq: 7}
	tests := []struct{ body, want string }{
		{`{"transaction_id":"t","balance":"3"}`, `{"event_id":"01E","seq":7,"transaction_id":"t","balance":"3"}`},
		{`{}`, `{"event_id":"01E","seq":7}`},
		{` { } `, `{"event_id":"01E","seq":7}`},
		{``, `{"event_id":"01E","seq":7}`},
		// A body that names its event already (a signed answer) is kept as is.
		{`{"event_id":"01X","seq":3,"signature":"ed25519:00"}`, `{"event_id":"01X","seq":3,"signature":"ed25519:00"}`},
	}
	for _, tc := range tests {
		if got := string(withEvent([]byte(tc.body), a)); got != tc.want {
			t.Errorf("withEvent(%q) = %s, want %s", tc.body, got, tc.want)
		}
	}
}

func TestParsePeer(t *testing.T) {
	tests := []struct {
		in   string
		want Peer
		ok   bool
	}{
		{"registry://backup.local@127.0.0.1:2594", Peer{URI: "registry://backup.local", Addr: "127.0.0.1:2594"}, true},
		{"registry://Backup.Local@h:1", Peer{URI: "registry://backup.local", Addr: "h:1"}, true},
		{"agent://x@127.0.0.1:1", Peer{}, false},
		{"registry://backup.local", Peer{}, false},
		{"registry://backup.local@", Peer{}, false},
		{"backup@1.2.3.4:5", Peer{}, false},
	}
	for _, tc := range tests {
		got, err := ParsePeer(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParsePeer(%q) = %+v, %v; want %+v, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestRelayAllowed(t *testing.T) {
	r := &Relay{Networks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}}
	tests := []struct {
		addr string
		want bool
	}{
		{"127.0.0.1:2594", true},
		{"127.9.9.9:1", true},
		{"[::1]:2594", true},
		{"[::ffff:127.0.0.1]:2594", true},
		{"10.1.0.42:2594", false},
		{"169.254.169.254:80", false},
		{"localhost:2594", false}, // names are not resolved: IP literals only
		{"127.0.0.1", false},
	}
	for _, tc := range tests {
		if got := r.allowed(tc.addr); got != tc.want {
			t.Errorf("allowed(%q) = %v, want %v", tc.addr, got, tc.want)
		}
	}
}
