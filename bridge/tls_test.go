package bridge

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
)

// TestSelfSignedPairIsRemadeWhenItDoesNotMatch: a crash between writing
// the node's key and its certificate leaves a pair that does not load;
// the next start makes a new pair instead of failing every time.
func TestSelfSignedPairIsRemadeWhenItDoesNotMatch(t *testing.T) {
	dir := t.TempDir()
	_, first, err := TLSConfig("", "", dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	if _, _, err := TLSConfig("", "", other, nil); err != nil {
		t.Fatal(err)
	}
	key, _ := os.ReadFile(filepath.Join(other, "key.pem"))
	if err := os.WriteFile(filepath.Join(dir, "key.pem"), key, 0o600); err != nil { // the new key, the old certificate
		t.Fatal(err)
	}
	_, again, err := TLSConfig("", "", dir, nil)
	if err != nil || again == first {
		t.Fatalf("TLSConfig over a mismatched pair = %q, %v; want a new certificate", again, err)
	}
}

// TestSelfSignedCertificateFollowsTheHost: a node restarted on another
// --tls-listen host gets a certificate that names it; the one it had
// would fail every client that checks the name. Restarted on the same
// host, it keeps its certificate, and so its fingerprint.
func TestSelfSignedCertificateFollowsTheHost(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		host string
		same bool // the fingerprint is the one before
	}{
		{"127.0.0.1", false},
		{"127.0.0.1", true},
		{"node.example", false},
		{"node.example", true},
		{"", true}, // no host named: any certificate will do
	}
	prev := ""
	for _, tt := range tests {
		cfg, fp, err := TLSConfig("", "", dir, []string{tt.host})
		if err != nil {
			t.Fatal(err)
		}
		if (fp == prev) != tt.same {
			t.Errorf("host %q: fingerprint the same as before = %v, want %v", tt.host, fp == prev, tt.same)
		}
		if tt.host != "" {
			c, err := x509.ParseCertificate(cfg.Certificates[0].Certificate[0])
			if err != nil || c.VerifyHostname(tt.host) != nil {
				t.Errorf("host %q: the certificate does not name it (%v)", tt.host, err)
			}
		}
		prev = fp
	}
}
