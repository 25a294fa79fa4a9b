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
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// SelfSignedValidity is how long a certificate the node makes for itself
// is valid. It is remade when it has less than a tenth of that left.
const SelfSignedValidity = 365 * 24 * time.Hour

// TLSConfig returns the server TLS configuration: from certFile and keyFile
// when given, else from a self-signed certificate kept in dir (made on first
// use, for the hosts named). TLS 1.3 only: there are no old clients to keep.
// It also returns the certificate's SHA-256 fingerprint, which operators
// hand to clients that pin it.
func TLSConfig(certFile, keyFile, dir string, hosts []string) (*tls.Config, string, error) {
	if (certFile == "") != (keyFile == "") {
		return nil, "", errors.New("tls: give both a certificate and a key, or neither")
	}
	if certFile == "" {
		certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
		if err := ensureSelfSigned(certFile, keyFile, hosts, false); err != nil {
			return nil, "", err
		}
		// The pair is written as two files; a crash between them leaves
		// a key that is not the certificate's. The node's own pair is
		// made again then, rather than refuse every start.
		if _, err := tls.LoadX509KeyPair(certFile, keyFile); err != nil {
			if err := ensureSelfSigned(certFile, keyFile, hosts, true); err != nil {
				return nil, "", err
			}
		}
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, "", fmt.Errorf("tls: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13}, Fingerprint(cert.Certificate[0]), nil
}

// Fingerprint is the SHA-256 of a certificate's DER, as hex pairs joined
// by colons, the form most tools print.
func Fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	h := hex.EncodeToString(sum[:])
	pairs := make([]string, 0, len(sum))
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
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
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
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, name); err != nil {
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
// caFile, or pins the certificate with the given fingerprint, or both.
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
		want := strings.ToUpper(strings.ReplaceAll(fingerprint, ":", ""))
		if caFile == "" {
			// Pinning replaces the chain check: the pinned certificate is
			// the trust anchor.
			cfg.InsecureSkipVerify = true
		}
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("tls: the server sent no certificate")
			}
			got := strings.ReplaceAll(Fingerprint(cs.PeerCertificates[0].Raw), ":", "")
			if got != want {
				return fmt.Errorf("tls: the server's certificate has fingerprint %s, not the pinned one", Fingerprint(cs.PeerCertificates[0].Raw))
			}
			return nil
		}
	}
	return cfg, nil
}
