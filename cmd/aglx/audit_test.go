package main

import (
	"context"
	"crypto"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aglx/ledger/bridge"
	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/projections"
	"github.com/aglx/ledger/protocol"
)

// auditNode is a node with its folds and HTTP API, whose folds start only
// when the test says: until then it is a node replaying after a start,
// /healthz saying "replaying" and the digest that of an empty ledger.
type auditNode struct {
	testNode
	http, keyPath string
	startFolds    func()
}

func startAuditNode(t *testing.T) auditNode {
	t.Helper()
	return startAuditNodeRotated(t, nil, nil)
}

// startAuditNodeRotated is startAuditNode for a node whose key was first
// was, then rotated by a rotation in its log to `to`, or to the key it has
// now when to is nil, as aglxd --rotate-node-key leaves it; nil was:
// never rotated.
func startAuditNodeRotated(t *testing.T, was, to crypto.Signer) auditNode {
	t.Helper()
	const name = "registry://localhost"
	s, err := events.StartServer(events.ServerConfig{DataDir: t.TempDir(), Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	nc, err := s.Connect("test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	l, err := events.Open(context.Background(), nc, events.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(context.Background()) })
	key, keyPath := nodeKeyFile(t)
	var first crypto.PublicKey
	if was != nil {
		first = was.Public()
		if to == nil {
			to = key
		}
		rotateInLog(t, l, name, was, to)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	registry := projections.NewRegistry(projections.RegistryConfig{NodeURI: name, NodeKey: key, NodeFirstKey: first})
	credits := projections.NewCredits(name, registry, nil)
	stats := projections.NewStats()
	runner := projections.NewRunner(l, quiet, registry, credits, stats)
	edge := bridge.New(l, bridge.Config{Name: name}, quiet)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go edge.ServeTCP(ln, events.TransportTCP)
	t.Cleanup(func() { edge.Shutdown(context.Background()) })
	pub, _ := protocol.MarshalPublicKey(key.Public())
	h := bridge.HTTPHandler(bridge.API{Log: l, Runner: runner, Stats: stats, Credits: credits, Registry: registry, Edge: edge,
		Node: bridge.NodeInfo{Name: name, PublicKey: pub, KeyID: protocol.KeyID(key.Public())}})
	hln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: h}
	go hs.Serve(hln)
	t.Cleanup(func() { hs.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() {
		cancel()
		once.Do(func() { close(done) }) // folds never started: nothing to wait for
		<-done
	})
	start := func() {
		once.Do(func() { go func() { runner.Run(ctx); close(done) }() })
	}
	return auditNode{testNode: testNode{tcp: ln.Addr().String(), natsURL: clientURL(s), log: l},
		http: "http://" + hln.Addr().String(), keyPath: keyPath, startFolds: start}
}

// rotateInLog appends the node's rotation from was to key to l and
// records the owner and the first key, as aglxd --rotate-node-key does.
func rotateInLog(t *testing.T, l *events.Log, name string, was, key crypto.Signer) {
	t.Helper()
	now := time.Now().UTC()
	body, err := bridge.KeyRotationBody(was.Public(), key.Public(), now)
	if err != nil {
		t.Fatal(err)
	}
	fr, err := bridge.KeyRotationFrame(name, name, was, body)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := protocol.Parse(fr)
	if err != nil {
		t.Fatal(err)
	}
	env := &events.Envelope{ID: fr.ID(), MsgID: fr.ID(), Type: protocol.TypeKeyRotate, From: name, To: name,
		Transport: events.TransportNode, Declared: fr.Transport, ReceivedAt: now, Headers: fr.Headers, Body: fr.Body, Msg: msg}
	ctx := context.Background()
	if _, err := l.Append(ctx, env).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	firstText, _ := protocol.MarshalPublicKey(was.Public())
	if err := l.SetOwner(ctx, name+" "+protocol.KeyID(key.Public()), firstText); err != nil {
		t.Fatal(err)
	}
}

// mint credits to with amount through aglx mint. This node's edge
// answers 202 and leaves the verdict to the state, which aglx mint calls
// an unknown outcome (exit mintUnknown).
func (n auditNode) mint(t *testing.T, to, amount string) {
	t.Helper()
	var out strings.Builder
	err := runMint([]string{"--key", n.keyPath, "--addr", n.tcp, "--http", n.http, "--to", to, "--amount", amount}, &out)
	if code, ok := err.(exitCode); err != nil && (!ok || code != mintUnknown) {
		t.Fatalf("aglx mint = %v\n%s", err, out.String())
	}
}

// syncBuffer is an output the test reads while the audit writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestAuditCoversTheLogToItsEnd: the audit asked the node for its digest
// without a position, and a node replaying after a start answered where
// its fold had got to: the audit folded the log that far, found it
// matched, and printed OK with exit 0, the later mints never checked
// (helper-65). It now reads where the log ends first, waits (at most
// --wait) until the node has applied that far, and audits there; a node
// that does not get there fails the audit, with no OK.
func TestAuditCoversTheLogToItsEnd(t *testing.T) {
	tests := []struct {
		name string
		// folds: "before" started and caught up before the audit; "during"
		// started once the audit says it waits; "never" not at all.
		folds string
		wait  string
		ok    bool
		want  []string // in the output, or the error when !ok
	}{
		{"a node that has caught up", "before", "0s", true, []string{"audited:         the log to seq 3 (its end when the audit started: seq 3)", "postings:        3", "OK: every posting to seq 3 checked"}},
		{"a replaying node that catches up while the audit waits", "during", "1m", true, []string{"waiting (at most --wait 1m0s) for the node to apply the log to seq 3", "projections replaying", "postings:        3", "OK: every posting to seq 3 checked"}},
		{"a replaying node that does not catch up in time", "never", "300ms", false, []string{"not applied the log to its end at seq 3", "within --wait 300ms", "applied seq 0 of 3", "Nothing was audited"}},
		{"a replaying node, and no wait", "never", "0s", false, []string{"not applied the log to its end at seq 3", "Nothing was audited"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := startAuditNode(t)
			for i, to := range []string{"agent://a.local", "agent://b.local", "agent://a.local"} {
				n.mint(t, to, fmt.Sprint(10*(i+1)))
			}
			n.waitPublished(t, 3)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if tt.folds == "before" {
				n.startFolds()
				for {
					resp, err := http.Get(n.http + "/readyz")
					if err == nil {
						resp.Body.Close()
						if resp.StatusCode == http.StatusOK {
							break
						}
					}
					select {
					case <-ctx.Done():
						t.Fatalf("the folds did not catch up: /readyz %v", err)
					case <-time.After(10 * time.Millisecond):
					}
				}
			}
			var out syncBuffer
			done := make(chan error, 1)
			go func() {
				done <- runAudit(ctx, []string{"--http", n.http, "--nats", n.natsURL, "--wait", tt.wait}, &out)
			}()
			if tt.folds == "during" {
				for !strings.Contains(out.String(), "waiting") {
					select {
					case err := <-done:
						t.Fatalf("the audit ended without waiting for the replay: %v\n%s", err, out.String())
					case <-ctx.Done():
						t.Fatalf("the audit did not say it waits:\n%s", out.String())
					case <-time.After(10 * time.Millisecond):
					}
				}
				n.startFolds()
			}
			var err error
			select {
			case err = <-done:
			case <-ctx.Done():
				t.Fatalf("the audit did not end:\n%s", out.String())
			}
			got := out.String()
			if tt.ok {
				if err != nil {
					t.Fatalf("aglx audit = %v\n%s", err, got)
				}
			} else {
				if err == nil || errors.As(err, new(exitCode)) {
					t.Fatalf("aglx audit = %v, want an error that says why\n%s", err, got)
				}
				if strings.Contains(got, "OK") {
					t.Fatalf("aglx audit printed OK for a node it could not audit to the log's end:\n%s", got)
				}
				got = err.Error()
			}
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("want %q in\n%s", w, got)
				}
			}
		})
	}
}

// TestMintAgainWithItsTxIDMintsOnce: aglx mint prints the transaction id it
// uses, and run again with --tx-id (after a lost reply) the ledger books
// it once. Every run used to make a new id, so a retry minted twice
// (helper-69).
func TestMintAgainWithItsTxIDMintsOnce(t *testing.T) {
	n := startAuditNode(t)
	n.startFolds()
	const to = "agent://dave.local"
	args := []string{"--key", n.keyPath, "--addr", n.tcp, "--http", n.http, "--to", to, "--amount", "5"}
	// This test node answers 202 and leaves the verdict to the state: the
	// outcome is unknown, which is no success (exit 3, helper-88).
	unknown := func(err error) bool { code, ok := err.(exitCode); return ok && code == mintUnknown }
	var first strings.Builder
	if err := runMint(args, &first); !unknown(err) {
		t.Fatalf("aglx mint = %v, want exit %d (recorded, outcome unknown)\n%s", err, mintUnknown, first.String())
	}
	_, rest, ok := strings.Cut(first.String(), "--tx-id ")
	id, _, _ := strings.Cut(rest, ")")
	if !ok || !strings.HasPrefix(id, "mint-") {
		t.Fatalf("aglx mint printed no transaction id to retry with:\n%s", first.String())
	}
	var again strings.Builder
	if err := runMint(append(args, "--tx-id", id), &again); !unknown(err) {
		t.Fatalf("aglx mint --tx-id %s = %v\n%s", id, err, again.String())
	}
	// Both stored (this test node answers 202 and leaves the verdict to
	// the state): the second is the event at seq 2.
	var acct struct{ Balance string }
	if err := getJSON(n.http, "/v1/accounts/agent/dave.local?seq=2", &acct); err != nil || acct.Balance != "5" {
		t.Fatalf("dave's balance after a mint and its retry: %q, %v; want 5", acct.Balance, err)
	}
}

// TestAuditWaitStopsOnCtrlC: while the node answers 503 (starting, or
// making a digest), the audit asks again within --wait; a Ctrl-C (its
// context ended) stops it at once. It used to sleep and ask again until
// --wait had passed, up to 5 minutes, with Ctrl-C caught and ignored
// (helper-75).
func TestAuditWaitStopsOnCtrlC(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var asked sync.Once
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Do(cancel) // Ctrl-C once the node has been asked
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"error":"starting"}`)
	})}
	go srv.Serve(ln)
	defer srv.Close()
	done := make(chan error, 1)
	go func() {
		var node bridge.NodeInfo
		done <- getJSONUntil(ctx, "http://"+ln.Addr().String(), "/v1/node", &node, httpTimeout, 5*time.Minute)
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the wait ended with %v; want it stopped by the cancel", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the wait went on after Ctrl-C")
	}
}

// TestMintRefusesWhatItWouldMisread: a --reason of several words unquoted
// recorded its first word and dropped the rest, and a --to that is no
// address was announced as minted to before the node refused it
// (helper-88). Both are refused before anything is sent.
func TestMintRefusesWhatItWouldMisread(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // in the error; "" for exit status 2
	}{
		{[]string{"--to", "agent://a.local", "--amount", "5", "--reason", "my", "reason"}, ""},
		{[]string{"--to", "a.local", "--amount", "5"}, "--to"},
		{[]string{"--to", "Agent://a.local", "--amount", "5"}, "--to"},
	} {
		var out strings.Builder
		err := runMint(append(tc.args, "--key", "/nonexistent", "--http", "http://127.0.0.1:1"), &out)
		switch code, ok := err.(exitCode); {
		case tc.want == "" && (!ok || code != 2):
			t.Errorf("aglx mint %q = %v, want exit 2", tc.args, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("aglx mint %q = %v, want an error naming %s", tc.args, err, tc.want)
		}
		if strings.Contains(out.String(), "minting") {
			t.Errorf("aglx mint %q announced a mint it did not send:\n%s", tc.args, out.String())
		}
	}
}

// nodeKeyFile makes a node key and writes it where aglx mint reads one.
func nodeKeyFile(t *testing.T) (crypto.Signer, string) {
	t.Helper()
	key, err := protocol.GenerateKey(protocol.KeyEd25519)
	if err != nil {
		t.Fatal(err)
	}
	pem, err := protocol.MarshalPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	keyPath := filepath.Join(t.TempDir(), "node.key")
	if err := os.WriteFile(keyPath, pem, 0o600); err != nil {
		t.Fatal(err)
	}
	return key, keyPath
}

// TestAuditHonoursRetryAfter: a node that answers 503 with Retry-After
// is asked again after it, not every second; one whose Retry-After is
// past --wait makes the audit stop at once and say so, instead of
// asking until --wait has passed for an answer it was told will not come.
func TestAuditHonoursRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		name       string
		retryAfter string        // the 503's header
		wait       time.Duration // --wait
		wantAsked  int           // requests the node saw, at most
		wantErr    string        // "" for success
	}{
		{"after its Retry-After", "2", time.Minute, 2, ""},
		{"past --wait", "600", time.Minute, 1, "asks to be asked again in 10m0s, past --wait 1m0s"},
		{"unreadable: once a second", "soon", time.Minute, 2, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var asked []time.Time
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				asked = append(asked, time.Now())
				n := len(asked)
				mu.Unlock()
				if n == 1 {
					w.Header().Set("Retry-After", tc.retryAfter)
					w.WriteHeader(http.StatusServiceUnavailable)
					io.WriteString(w, `{"error":"a digest was made a moment ago"}`)
					return
				}
				io.WriteString(w, `{"node":"registry://n.local"}`)
			}))
			defer srv.Close()
			var node bridge.NodeInfo
			err := getJSONUntil(context.Background(), srv.URL, "/v1/node", &node, httpTimeout, tc.wait)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("getJSONUntil: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("getJSONUntil = %v, want an error with %q", err, tc.wantErr)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(asked) != tc.wantAsked {
				t.Fatalf("the node was asked %d times, want %d", len(asked), tc.wantAsked)
			}
			if want, _ := strconv.Atoi(tc.retryAfter); len(asked) == 2 && want > 0 && asked[1].Sub(asked[0]) < time.Duration(want)*time.Second {
				t.Errorf("asked again after %s, before the Retry-After of %ss", asked[1].Sub(asked[0]), tc.retryAfter)
			}
		})
	}
}

// TestMintNamesTheFlagWhenTheNodeIsNotThere: a mint whose --addr has no
// node there said only "connection refused"; it names --addr now, as
// aglx send does (helper-106).
func TestMintNamesTheFlagWhenTheNodeIsNotThere(t *testing.T) {
	key, keyPath := nodeKeyFile(t)
	pub, _ := protocol.MarshalPublicKey(key.Public())
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(bridge.NodeInfo{Name: "registry://localhost", PublicKey: pub, KeyID: protocol.KeyID(key.Public())})
	}))
	defer api.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close() // nobody listens there now
	var out strings.Builder
	err = runMint([]string{"--to", "agent://a.local", "--amount", "5", "--key", keyPath, "--http", api.URL, "--addr", dead}, &out)
	if err == nil || !strings.Contains(err.Error(), "--addr names it") {
		t.Fatalf("aglx mint to %s where no node listens = %v; want an error naming --addr", dead, err)
	}
}
