package bridge

import "testing"

// TestCanonicalAddr: every spelling of one IP address and port keys one
// lane, one kept connection and one down mark.
func TestCanonicalAddr(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"127.0.0.1:7000", "127.0.0.1:7000"},
		{"[::ffff:127.0.0.1]:7000", "127.0.0.1:7000"},
		{"[::FFFF:7f00:1]:7000", "127.0.0.1:7000"},
		{"[0:0::1]:7000", "[::1]:7000"},
		{"[::1]:7000", "[::1]:7000"},
		{"[fe80::1%eth0]:7000", "[fe80::1%eth0]:7000"}, // zones stay (and allowed refuses them)
		{"[2001:DB8::1]:7000", "[2001:db8::1]:7000"},
		{"agent.local:7000", "agent.local:7000"}, // not an IP literal: the relay refuses it
		{"", ""},
	} {
		if got := canonicalAddr(tc.in); got != tc.want {
			t.Errorf("canonicalAddr(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
