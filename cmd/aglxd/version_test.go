package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aglx/ledger/bridge"
	"github.com/aglx/ledger/protocol"
)

// runMainEnv makes the test binary run aglxd's main instead of the
// tests, so that a test can run the command whole, exit status included.
const runMainEnv = "AGLXD_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	code := m.Run()
	if binPath != "" { // the binary aglxdBinary built for the process tests
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// versionRunMax bounds one run of aglxd --version: a node started by
// mistake would run until killed.
const versionRunMax = time.Minute

// TestVersionFlag: aglxd --version was an unknown flag (exit 2). It prints
// the build and exits 0 before anything else: no data dir is made, no
// lock taken, no port opened, and the other flags are not checked, as
// with -h. Each run is in an empty directory, with an empty data dir
// given or the default ./aglx-data, and both must stay empty.
func TestVersionFlag(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string // DATA is the empty data dir
	}{
		{"alone", []string{"--version"}},
		{"single dash", []string{"-version"}},
		{"after the node's flags", []string{"--data", "DATA", "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--nats-listen", "127.0.0.1:0", "--version"}},
		{"with a flag that does not validate", []string{"--version", "--data", "DATA", "--log-format", "xml"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			data := filepath.Join(dir, "data")
			if err := os.Mkdir(data, 0o700); err != nil {
				t.Fatal(err)
			}
			args := make([]string, len(tc.args))
			for i, a := range tc.args {
				args[i] = strings.ReplaceAll(a, "DATA", data)
			}
			ctx, cancel := context.WithTimeout(context.Background(), versionRunMax)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], args...)
			cmd.Env = append(os.Environ(), runMainEnv+"=1")
			cmd.Dir = dir
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			if err != nil && !errors.As(err, &ee) {
				t.Fatalf("aglxd %v: %v", args, err)
			}
			if want := "aglxd " + bridge.Version() + "\n"; err != nil || stdout.String() != want || stderr.Len() != 0 {
				t.Fatalf("aglxd %v = %v, stdout %q, stderr %q; want exit 0, stdout %q and nothing on stderr", args, err, stdout.String(), stderr.String(), want)
			}
			var made []string
			filepath.WalkDir(dir, func(path string, _ fs.DirEntry, err error) error {
				if path != dir && path != data {
					made = append(made, path)
				}
				return err
			})
			if len(made) > 0 {
				t.Fatalf("aglxd %v made %v", args, made)
			}
		})
	}
}

// lockedBuffer is a log the test reads while the node's goroutines write it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestNodeSaysItsVersion: a running node did not say which build it was.
// GET /v1/node has a "version" member beside those it had, and the
// node's first log line names the version.
func TestNodeSaysItsVersion(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Relay = false
	cfg.DataDir = t.TempDir()
	cfg.Listen, cfg.UDP, cfg.HTTP, cfg.NATSListen, cfg.TLSListen = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	var logged lockedBuffer
	m := NewMain(cfg, slog.New(slog.NewJSONHandler(&logged, nil)))
	if err := m.Run(context.Background()); err != nil {
		m.Close(context.Background())
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })

	var node map[string]any
	if err := json.Unmarshal(rfGetOK(t, m, "/v1/node", 0), &node); err != nil {
		t.Fatal(err)
	}
	pub, _ := protocol.MarshalPublicKey(m.key.Public())
	for _, tc := range []struct {
		member string
		want   string
	}{
		{"version", bridge.Version()},
		{"name", cfg.Name},
		{"public_key", pub},
		{"key_id", protocol.KeyID(m.key.Public())},
		{"tls", m.TLSAddr()},
		{"tls_sha256", m.tlsCerts.Fingerprint()},
		{"fsync", "always"}, // what an ack promises (helper-106)
	} {
		t.Run(tc.member, func(t *testing.T) {
			if got, ok := node[tc.member].(string); !ok || got != tc.want {
				t.Errorf("GET /v1/node %q = %v, want %q", tc.member, node[tc.member], tc.want)
			}
		})
	}

	first, _, _ := strings.Cut(logged.String(), "\n")
	var rec map[string]any
	if err := json.Unmarshal([]byte(first), &rec); err != nil || rec["msg"] != "aglxd starting" || rec["version"] != bridge.Version() {
		t.Errorf("first log line %s (%v); want aglxd starting with version %q", first, err, bridge.Version())
	}
	if n := len(node); n != 7 {
		t.Errorf("GET /v1/node has %d members, want 7: %v", n, node)
	}
}
