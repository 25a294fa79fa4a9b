package bridge

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
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

// TestParsePeer: a peer names how it is trusted (its TLS certificate by CA
// file or pin, or plain TCP asked for by name), and a peer that does not,
// or names it wrong, is refused at start with the reason.
func TestParsePeer(t *testing.T) {
	ca := filepath.Join(t.TempDir(), "cert.pem")
	if err := os.WriteFile(ca, testCertPEM(t), 0o600); err != nil {
		t.Fatal(err)
	}
	const pin = "0b:54:00:11:22:33:44:55:66:77:88:99:aa:bb:cc:dd:ee:ff:00:11:22:33:44:55:66:77:88:99:aa:bb:cc:dd"
	wantPin, _ := ParsePin(pin)
	tests := []struct {
		in   string
		want Peer
		err  string // empty: accepted
	}{
		{"registry://backup.local@127.0.0.1:2594?plain", Peer{URI: "registry://backup.local", Addr: "127.0.0.1:2594", Plain: true}, ""},
		{"registry://Backup.Local@h:1?plain", Peer{URI: "registry://backup.local", Addr: "h:1", Plain: true}, ""},
		{"registry://backup.local@h:2596?ca=" + ca, Peer{URI: "registry://backup.local", Addr: "h:2596", CA: ca}, ""},
		{"registry://backup.local@h:2596?pin=" + pin, Peer{URI: "registry://backup.local", Addr: "h:2596", Pin: wantPin}, ""},
		{"registry://backup.local@h:2596?ca=" + ca + "&pin=" + pin, Peer{URI: "registry://backup.local", Addr: "h:2596", CA: ca, Pin: wantPin}, ""},
		{"registry://backup.local@127.0.0.1:2594", Peer{}, "say how to trust the peer"},
		{"registry://backup.local@h:1?", Peer{}, "say how to trust the peer"},
		{"registry://backup.local@h:1?plain&pin=" + pin, Peer{}, "does not go with"},
		{"registry://backup.local@h:1?pin=00ff", Peer{}, "not a SHA-256 fingerprint"},
		{"registry://backup.local@h:1?ca=/nonexistent/cert.pem", Peer{}, "no such file"},
		{"registry://backup.local@h:1?tls", Peer{}, `"tls" is not`},
		{"registry://backup.local@h?plain", Peer{}, "is not HOST:PORT"},
		{"registry://backup.local@h:?plain", Peer{}, "is not a number"},
		{"registry://backup.local@h:https?plain", Peer{}, "is not a number"},
		{"registry://backup.local@h:1?ca=/nonexistent/cert.pem&ca=" + ca, Peer{}, "given twice"},
		{"registry://backup.local@h:1?pin=" + pin + "&pin=" + pin, Peer{}, "given twice"},
		{"registry://backup.local@[::1]:2596?ca=" + ca, Peer{URI: "registry://backup.local", Addr: "[::1]:2596", CA: ca}, ""},
		{"agent://x@127.0.0.1:1?plain", Peer{}, "must be a registry:// URI"},
		{"registry://backup.local", Peer{}, "want registry://NAME@HOST:PORT"},
		{"registry://backup.local@", Peer{}, "want registry://NAME@HOST:PORT"},
		{"backup@1.2.3.4:5?plain", Peer{}, "is not an AGLX address"},
	}
	for _, tc := range tests {
		got, err := ParsePeer(tc.in)
		if err == nil {
			if err = got.CheckTrust(); err != nil {
				got = Peer{}
			}
		}
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("ParsePeer(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ParsePeer(%q) = %+v, %v; want an error saying %q", tc.in, got, err, tc.err)
		}
		if err == nil {
			if again, err := ParsePeer(got.String()); err != nil || again != got {
				t.Errorf("ParsePeer(%q.String() = %q) = %+v, %v; want it again", tc.in, got.String(), again, err)
			}
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

// testCertPEM is a self-made certificate in PEM, as a node makes its own.
func testCertPEM(t *testing.T) []byte {
	t.Helper()
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := ensureSelfSigned(cert, key, []string{"localhost"}, false); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(cert)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
