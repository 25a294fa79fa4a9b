package bridge

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// SelfSignedValidity is how long a certificate the node makes for itself
// is valid. It is remade when it has less than a tenth of that left.
const SelfSignedValidity = 365 * 24 * time.Hour

// TLSConfig returns the server TLS configuration: from certFile and keyFile
// when given, else from a self-signed certificate kept in dir (made on first
// use, for the hosts named). TLS 1.3 only: there are no old clients to keep.
// The certificate is served through the returned Certs, which picks up a
// renewed one without a restart (Certs.get); its Fingerprint is what
// operators hand to clients that pin it. lg may be nil.
func TLSConfig(certFile, keyFile, dir string, hosts []string, lg *slog.Logger) (*tls.Config, *Certs, error) {
	if (certFile == "") != (keyFile == "") {
		return nil, nil, errors.New("tls: give both a certificate and a key, or neither")
	}
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	c := &Certs{certFile: certFile, keyFile: keyFile, hosts: hosts, lg: lg, checkEvery: CertCheckInterval}
	var was string // the node's own certificate's fingerprint before this start
	if certFile == "" {
		c.own = true
		c.certFile, c.keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
		if b, err := os.ReadFile(c.certFile); err == nil {
			if blk, _ := pem.Decode(b); blk != nil {
				was = Fingerprint(blk.Bytes)
			}
		}
		if err := ensureSelfSigned(c.certFile, c.keyFile, hosts, false); err != nil {
			return nil, nil, err
		}
		// The pair is written as two files; a crash between them leaves
		// a key that is not the certificate's. The node's own pair is
		// made again then, rather than refuse every start.
		if _, err := tls.LoadX509KeyPair(c.certFile, c.keyFile); err != nil {
			if err := ensureSelfSigned(c.certFile, c.keyFile, hosts, true); err != nil {
				return nil, nil, err
			}
		}
	}
	if err := c.load(); err != nil {
		return nil, nil, err
	}
	c.madeAtStart = c.own && was != c.fp
	if was != "" && was != c.fp {
		// Said at once: clients that pin it fail from now on, and a
		// changed --tls-listen remade it without a word (helper-106).
		lg.Warn("tls: the node's own certificate was made anew at this start (it did not name every --tls-listen host, was near its end, or did not match its key): clients that pin it (pin=, ca=) must be given the new one",
			"sha256_fingerprint", c.fp, "was", was, "not_after", c.cert.Leaf.NotAfter)
	}
	c.checked = time.Now()
	return &tls.Config{GetCertificate: c.get, MinVersion: tls.VersionTLS13}, c, nil
}

// CertCheckInterval is how often, at most, the node looks at its
// certificate files for a renewed certificate, and at its own certificate
// for whether a tenth of its validity is left. It looks when a client
// connects, so an idle node looks at the next connection.
const CertCheckInterval = time.Minute

// Certs serves the node's TLS certificate. Certificates are renewed on
// disk (an ACME client every 60 days or so; the node's own every 330);
// until 2026-11-30 the node read them only at start, so a node that ran
// past its certificate's end refused every TLS client, security messages
// included, until restarted, and a restart replays the whole log. Now a
// renewed pair is taken at the next check; a pair that does not load (a
// renewal half written) is logged and the one in use kept.
type Certs struct {
	certFile, keyFile string
	own               bool // made by the node: remade when a tenth of its validity is left
	// madeAtStart: the node's own certificate was made at this start
	// (there was none, or it was remade), which its start line says.
	madeAtStart bool
	hosts       []string
	lg          *slog.Logger
	checkEvery  time.Duration

	mu         sync.Mutex
	cert       *tls.Certificate
	fp         string
	digest     [sha256.Size]byte // of the files cert was read from (readPair)
	checked    time.Time
	refreshing bool // a refresh runs
}

// readPair reads the certificate and key files, and a digest of both
// that tells whether they changed: a comparison of contents, which unlike
// modification times holds on any file system.
func readPair(certFile, keyFile string) (certPEM, keyPEM []byte, digest [sha256.Size]byte, err error) {
	if certPEM, err = os.ReadFile(certFile); err != nil {
		return nil, nil, digest, err
	}
	if keyPEM, err = os.ReadFile(keyFile); err != nil {
		return nil, nil, digest, err
	}
	h := sha256.New()
	h.Write(certPEM)
	h.Write([]byte{0})
	h.Write(keyPEM)
	h.Sum(digest[:0])
	return certPEM, keyPEM, digest, nil
}

// MadeAtStart reports whether the node made its own certificate at this
// start: a first start, or one whose certificate had been moved aside
// (OPERATIONS.md, "TLS"), remade without a word but its new fingerprint
// (helper-109).
func (c *Certs) MadeAtStart() bool { return c.madeAtStart }

// NotAfter is the end of the certificate being served.
func (c *Certs) NotAfter() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cert.Leaf.NotAfter
}

// Fingerprint is the SHA-256 fingerprint of the certificate being served.
func (c *Certs) Fingerprint() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fp
}

// get is the server's GetCertificate: the current certificate. Once
// checkEvery has passed, it starts a look at the files in the background:
// reading them, or making a key, under the lock held every handshake
// behind a slow disk.
func (c *Certs) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if now.Sub(c.checked) < c.checkEvery || c.refreshing {
		return c.cert, nil
	}
	c.checked, c.refreshing = now, true
	refresh := func() {
		c.refresh(now)
		c.mu.Lock()
		c.refreshing = false
		c.mu.Unlock()
	}
	if c.cert.Leaf != nil && now.After(c.cert.Leaf.NotAfter) {
		// The pair served has run out: this handshake would fail with
		// it, so it waits for the look at the files.
		c.mu.Unlock()
		refresh()
		c.mu.Lock()
	} else {
		go refresh()
	}
	return c.cert, nil
}

// refresh remakes the node's own certificate when a tenth of its validity
// is left at now, and takes the pair on disk if its files changed. c.mu
// must not be held; it is taken only to look at and swap the pair.
func (c *Certs) refresh(now time.Time) {
	c.mu.Lock()
	leaf, had := c.cert.Leaf, c.digest
	c.mu.Unlock()
	if c.own && leaf != nil && leaf.NotAfter.Sub(now) <= SelfSignedValidity/10 {
		if err := ensureSelfSigned(c.certFile, c.keyFile, c.hosts, true); err != nil {
			c.lg.Error("tls: remaking the node's certificate failed; serving the old one", "not_after", leaf.NotAfter, "err", err)
		}
	}
	certPEM, keyPEM, digest, err := readPair(c.certFile, c.keyFile)
	if err != nil {
		c.lg.Warn("tls: cannot read the certificate files; serving the certificate read before", "err", err)
		return
	}
	if digest == had {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	was := c.fp
	if err := c.take(certPEM, keyPEM, digest); err != nil {
		c.lg.Warn("tls: the certificate files changed but do not load; serving the certificate read before, trying again in a minute", "err", err)
		return
	}
	c.lg.Info("tls: certificate renewed", "sha256_fingerprint", c.fp, "was", was, "not_after", c.cert.Leaf.NotAfter)
}

// load reads the pair from disk into c.
func (c *Certs) load() error {
	certPEM, keyPEM, digest, err := readPair(c.certFile, c.keyFile)
	if err != nil {
		return fmt.Errorf("tls: %w", err)
	}
	return c.take(certPEM, keyPEM, digest)
}

// take makes the pair read as digest the one served; c.mu is held, or c
// not yet shared.
func (c *Certs) take(certPEM, keyPEM []byte, digest [sha256.Size]byte) error {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("tls: %s and %s: %w", c.certFile, c.keyFile, err)
	}
	if pair.Leaf == nil {
		if pair.Leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return fmt.Errorf("tls: %w", err)
		}
	}
	c.cert, c.fp, c.digest = &pair, Fingerprint(pair.Certificate[0]), digest
	return nil
}

// Fingerprint is the SHA-256 of a certificate's DER, as hex pairs joined
// by colons, the form most tools print.
func Fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	return colonHex(sum[:])
}

// colonHex writes b as upper-case hex pairs joined by colons.
func colonHex(b []byte) string {
	h := hex.EncodeToString(b)
	pairs := make([]string, 0, len(b))
	for i := 0; i < len(h); i += 2 {
		pairs = append(pairs, strings.ToUpper(h[i:i+2]))
	}
	return strings.Join(pairs, ":")
}

// ensureSelfSigned makes the node's own certificate and key, unless a
// certificate with a tenth of its validity left that names every host is
// there and remake is false. A node moved to another --tls-listen host
// gets a certificate for it: the old one would fail every client that
// checks the name (its fingerprint changes, and the node logs the new one).
func ensureSelfSigned(certFile, keyFile string, hosts []string, remake bool) error {
	if b, err := os.ReadFile(certFile); err == nil && !remake {
		if blk, _ := pem.Decode(b); blk != nil {
			if c, err := x509.ParseCertificate(blk.Bytes); err == nil && time.Until(c.NotAfter) > SelfSignedValidity/10 && namesAll(c, hosts) {
				return nil
			}
		}
	}
	if err := os.MkdirAll(filepath.Dir(certFile), 0o700); err != nil {
		return fmt.Errorf("tls: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("tls: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return fmt.Errorf("tls: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "aglxd"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(SelfSignedValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			if !slices.ContainsFunc(tmpl.IPAddresses, ip.Equal) {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			}
		} else if h != "" && !slices.Contains(tmpl.DNSNames, h) {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return fmt.Errorf("tls: %w", err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("tls: %w", err)
	}
	if err := writeFileAtomic(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		return err
	}
	return writeFileAtomic(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

// namesAll reports whether c is valid for every host of hosts.
func namesAll(c *x509.Certificate, hosts []string) bool {
	for _, h := range hosts {
		if h != "" && c.VerifyHostname(h) != nil {
			return false
		}
	}
	return true
}

// writeFileAtomic writes via a temporary file, synced, and a rename,
// synced in its directory, so a crash never leaves half a key behind, nor
// no key after the node has used it.
func writeFileAtomic(name string, data []byte, mode os.FileMode) error {
	if err := WriteFileDurable(name, data, mode); err != nil {
		return fmt.Errorf("tls: %w", err)
	}
	return nil
}

// WriteFileDurable writes data to name through a temporary file that is
// synced before it is renamed over name, and syncs the directory after:
// once it returns, name holds data or, after a crash before, what it held.
// The node's keys are written this way; anything signed with a key the
// disk then lost could never be checked again.
func WriteFileDurable(name string, data []byte, mode os.FileMode) error {
	tmp := name + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	// A write that fails (a full disk) must not leave what it wrote
	// behind: a saved fold state's is as large as the folds.
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, name); err != nil {
		os.Remove(tmp)
		return err
	}
	d, err := os.Open(filepath.Dir(name))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// ClientTLS returns a client configuration that trusts the certificates in
// caFile, or pins the certificate with the given fingerprint, or both. A
// pin that is not a fingerprint is refused here, before anything is
// dialled (ParsePin); a server whose certificate has another fingerprint
// fails the handshake with a *PinMismatchError. Either way nothing is
// trusted instead.
func ClientTLS(caFile, fingerprint, serverName string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS13, ServerName: serverName}
	if caFile != "" {
		b, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("tls: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("tls: %s holds no PEM certificate", caFile)
		}
		cfg.RootCAs = pool
	}
	if fingerprint != "" {
		want, err := ParsePin(fingerprint)
		if err != nil {
			return nil, fmt.Errorf("tls: %w", err)
		}
		if caFile == "" {
			// Pinning replaces the chain check: the pinned certificate is
			// the trust anchor.
			cfg.InsecureSkipVerify = true
		}
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("tls: the server sent no certificate")
			}
			if got := Fingerprint(cs.PeerCertificates[0].Raw); got != want {
				return &PinMismatchError{Got: got, Want: want}
			}
			return nil
		}
	}
	return cfg, nil
}

// PinMismatchError is a server certificate whose fingerprint is not the
// pinned one: the server answered, and is not the one pinned (or has a
// new certificate). Both are in Fingerprint's form.
type PinMismatchError struct {
	Got, Want string
}

func (e *PinMismatchError) Error() string {
	return fmt.Sprintf("tls: the server's certificate has fingerprint %s, not the pinned %s", e.Got, e.Want)
}

// ParsePin reads a certificate pin: the SHA-256 fingerprint of the
// certificate, 64 hex digits in either case, with or without colons (the
// node logs it as 0B:54:...). It returns it in Fingerprint's form, or an
// error that says what is wrong with it: a mistyped pin would otherwise
// read only as the server's certificate not matching it.
func ParsePin(pin string) (string, error) {
	digits := strings.ReplaceAll(pin, ":", "")
	const want = 2 * sha256.Size
	if i := strings.IndexFunc(digits, func(r rune) bool { return !strings.ContainsRune("0123456789abcdefABCDEF", r) }); i >= 0 {
		r, _ := utf8.DecodeRuneInString(digits[i:])
		return "", fmt.Errorf("pin %q is not a SHA-256 fingerprint: %q is not a hex digit (want %d hex digits, colons between them or not, as aglxd logs it)", pin, r, want)
	}
	if len(digits) != want {
		return "", fmt.Errorf("pin %q is not a SHA-256 fingerprint: %d hex digits, want %d (colons between them or not, as aglxd logs it)", pin, len(digits), want)
	}
	b, _ := hex.DecodeString(digits) // checked above
	return colonHex(b), nil
}
