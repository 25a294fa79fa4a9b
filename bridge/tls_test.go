package bridge

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSelfSignedPairIsRemadeWhenItDoesNotMatch: a crash between writing
// the node's key and its certificate leaves a pair that does not load;
// the next start makes a new pair instead of failing every time.
func TestSelfSignedPairIsRemadeWhenItDoesNotMatch(t *testing.T) {
	dir := t.TempDir()
	_, firstCerts, err := TLSConfig("", "", dir, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	if _, _, err := TLSConfig("", "", other, nil, nil); err != nil {
		t.Fatal(err)
	}
	key, _ := os.ReadFile(filepath.Join(other, "key.pem"))
	if err := os.WriteFile(filepath.Join(dir, "key.pem"), key, 0o600); err != nil { // the new key, the old certificate
		t.Fatal(err)
	}
	_, againCerts, err := TLSConfig("", "", dir, nil, nil)
	if err != nil || againCerts.Fingerprint() == firstCerts.Fingerprint() {
		t.Fatalf("TLSConfig over a mismatched pair: %v; want a new certificate", err)
	}
}

// TestSelfSignedCertificateFollowsTheHost: a node restarted on another
// --tls-listen host gets a certificate that names it; the one it had
// would fail every client that checks the name, and the start says so,
// with both fingerprints (helper-106: a pinned peer broke without a word).
// Restarted on the same host, it keeps its certificate, and so its
// fingerprint, and says nothing.
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
		var logged bytes.Buffer
		_, certs, err := TLSConfig("", "", dir, []string{tt.host}, slog.New(slog.NewTextHandler(&logged, nil)))
		if err != nil {
			t.Fatal(err)
		}
		fp := certs.Fingerprint()
		if (fp == prev) != tt.same {
			t.Errorf("host %q: fingerprint the same as before = %v, want %v", tt.host, fp == prev, tt.same)
		}
		if certs.MadeAtStart() == tt.same { // made at the first start too
			t.Errorf("host %q: MadeAtStart = %v, want %v", tt.host, certs.MadeAtStart(), !tt.same)
		}
		said := strings.Contains(logged.String(), "made anew") && strings.Contains(logged.String(), "was="+prev)
		if want := prev != "" && !tt.same; said != want {
			t.Errorf("host %q: said the certificate was made anew: %v, want %v\n%s", tt.host, said, want, logged.String())
		}
		if tt.host != "" {
			c, err := x509.ParseCertificate(certs.cert.Certificate[0])
			if err != nil || c.VerifyHostname(tt.host) != nil {
				t.Errorf("host %q: the certificate does not name it (%v)", tt.host, err)
			}
		}
		prev = fp
	}
	// Moved aside, as OPERATIONS.md says to make it anew: made, and said
	// so by MadeAtStart, without the warning about a replaced one.
	for _, f := range []string{"cert.pem", "key.pem"} {
		if err := os.Rename(filepath.Join(dir, f), filepath.Join(dir, f+".old")); err != nil {
			t.Fatal(err)
		}
	}
	var logged bytes.Buffer
	_, certs, err := TLSConfig("", "", dir, nil, slog.New(slog.NewTextHandler(&logged, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if !certs.MadeAtStart() || certs.Fingerprint() == prev || strings.Contains(logged.String(), "made anew") {
		t.Fatalf("after the pair was moved aside: MadeAtStart %v, fingerprint %s (was %s), log %q", certs.MadeAtStart(), certs.Fingerprint(), prev, logged.String())
	}
}

// TestRenewedCertificateIsServedWithoutRestart: an operator's certificate
// renewed on disk (as an ACME client does) is served from the next check
// on, and a renewal caught half written (a key that is not the
// certificate's) leaves the old one in service; the node's own
// certificate is remade when a tenth of its validity is left. Until
// 2026-11-30 certificates were read only at start, and a node that ran
// past its certificate's end refused every TLS client.
func TestRenewedCertificateIsServedWithoutRestart(t *testing.T) {
	op := t.TempDir()
	certFile, keyFile := filepath.Join(op, "cert.pem"), filepath.Join(op, "key.pem")
	renew := func() {
		t.Helper()
		if err := ensureSelfSigned(certFile, keyFile, nil, true); err != nil {
			t.Fatal(err)
		}
	}
	renew()
	cfg, certs, err := TLSConfig(certFile, keyFile, "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	certs.checkEvery = 0 // look at the files at every handshake
	served := func() string {
		t.Helper()
		c, err := cfg.GetCertificate(&tls.ClientHelloInfo{})
		if err != nil {
			t.Fatal(err)
		}
		return Fingerprint(c.Certificate[0])
	}
	first := served()
	renew()
	// A handshake starts the look at the files; one a moment later gets
	// the renewed pair.
	second := served()
	for deadline := time.Now().Add(10 * time.Second); second == first && time.Now().Before(deadline); second = served() {
		time.Sleep(5 * time.Millisecond)
	}
	if second == first || certs.Fingerprint() != second {
		t.Fatalf("after a renewal on disk: served %s (first %s, Fingerprint %s); want the new one", second, first, certs.Fingerprint())
	}
	other := t.TempDir()
	if err := ensureSelfSigned(filepath.Join(other, "cert.pem"), filepath.Join(other, "key.pem"), nil, true); err != nil {
		t.Fatal(err)
	}
	key, _ := os.ReadFile(filepath.Join(other, "key.pem"))
	if err := os.WriteFile(keyFile, key, 0o600); err != nil { // half a renewal: a new key, the old certificate
		t.Fatal(err)
	}
	certs.refresh(time.Now())
	if got := served(); got != second {
		t.Fatalf("with a mismatched pair on disk: served %s; want the one before, %s", got, second)
	}

	_, own, err := TLSConfig("", "", t.TempDir(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	was := own.Fingerprint()
	own.refresh(own.cert.Leaf.NotAfter.Add(-SelfSignedValidity / 20)) // a twentieth left
	if own.Fingerprint() == was || time.Until(own.cert.Leaf.NotAfter) < SelfSignedValidity/2 {
		t.Fatalf("the node's own certificate with a twentieth left: not remade (fingerprint %s, was %s)", own.Fingerprint(), was)
	}
}

// TestExpiredCertificateWaitsForTheFiles: the look at the files runs in the
// background, so the handshake that starts it gets the pair served before.
// When that pair has run out, the handshake would fail with it: it waits
// for the renewed one instead.
func TestExpiredCertificateWaitsForTheFiles(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := ensureSelfSigned(certFile, keyFile, nil, true); err != nil {
		t.Fatal(err)
	}
	cfg, certs, err := TLSConfig(certFile, keyFile, "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	certs.mu.Lock()
	expired := *certs.cert.Leaf
	expired.NotAfter = time.Now().Add(-time.Hour)
	certs.cert.Leaf, certs.checked = &expired, time.Time{}
	was := certs.fp
	certs.mu.Unlock()
	if err := ensureSelfSigned(certFile, keyFile, nil, true); err != nil { // the renewal on disk
		t.Fatal(err)
	}
	c, err := cfg.GetCertificate(&tls.ClientHelloInfo{})
	if err != nil {
		t.Fatal(err)
	}
	if got := Fingerprint(c.Certificate[0]); got == was {
		t.Fatal("the handshake after the certificate ran out got it again, not the renewed one on disk")
	}
}

// TestClientTLSRefusesAMistypedPin: a pin that is no fingerprint at all
// read only as the server's certificate not matching it. It is refused,
// saying what is wrong with it; the forms taken all mean one fingerprint.
func TestClientTLSRefusesAMistypedPin(t *testing.T) {
	good := strings.Repeat("AB:", 31) + "AB"
	for _, tc := range []struct {
		pin  string
		says string // "" when taken
	}{
		{good, ""},
		{strings.ReplaceAll(good, ":", ""), ""},
		{strings.ToLower(good), ""},
		{"AA:BB", "4 hex digits, want 64"},
		{strings.Repeat("ZZ", 32), "'Z' is not a hex digit"},
		{good + ":CD", "66 hex digits, want 64"},
		{"sha256:" + good, "'s' is not a hex digit"},
		{strings.Repeat("AB ", 32), "' ' is not a hex digit"},
	} {
		_, err := ClientTLS("", tc.pin, "localhost")
		if tc.says == "" && err != nil || tc.says != "" && (err == nil || !strings.Contains(err.Error(), tc.says)) {
			t.Errorf("ClientTLS with pin %q: %v; want %q", tc.pin, err, tc.says)
		}
		if got, err := ParsePin(tc.pin); tc.says == "" && (err != nil || got != good) {
			t.Errorf("ParsePin(%q) = %q, %v; want %s", tc.pin, got, err, good)
		}
	}
}
