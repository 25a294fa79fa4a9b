package main

import (
	"context"
	"crypto"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aglx/ledger/protocol"
)

// TestAuditPinsTheNodeKey: an auditor needs no secret of the node's, only
// its public key, which the node names itself; --key-id makes the audit
// refuse a node that names another key than the one on record, with an
// exit status of its own (4), told apart from an outage (1) and a wrong
// ledger (3). A pinned key the node rotated from, by rotations its log
// holds, each signed with the key before, is no mismatch: the audit says
// so and asks for the new key id to be recorded.
func TestAuditPinsTheNodeKey(t *testing.T) {
	was, err := protocol.GenerateKey(protocol.KeyEd25519)
	if err != nil {
		t.Fatal(err)
	}
	elsewhere, err := protocol.GenerateKey(protocol.KeyEd25519)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		was, to crypto.Signer // the log's rotation, if any; to nil: to the node's key
		pin     func(n auditNode) string
		status  int // 0: OK
		says    string
	}{
		{"the node's key", nil, nil, func(n auditNode) string { return nodeKeyID(t, n) }, 0, "OK"},
		{"another key", nil, nil, func(auditNode) string { return "sha256:0000000000000000" }, auditKeyMismatch, "KEY MISMATCH"},
		{"a key the node rotated from", was, nil, func(auditNode) string { return protocol.KeyID(was.Public()) }, 0, "record the new key id"},
		{"another key, after a rotation", was, nil, func(auditNode) string { return "sha256:0000000000000000" }, auditKeyMismatch, "does not lead"},
		// helper-117: the pin is in the history, which leads elsewhere.
		{"a key the log rotated to another than the node's", was, elsewhere, func(auditNode) string { return protocol.KeyID(was.Public()) }, auditKeyMismatch, "does not lead"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := startAuditNodeRotated(t, tt.was, tt.to)
			n.startFolds()
			var out strings.Builder
			err := runAudit(context.Background(), []string{"--http", n.http, "--nats", n.natsURL, "--key-id", tt.pin(n)}, &out)
			code, _ := err.(exitCode)
			if (tt.status == 0 && err != nil) || (tt.status != 0 && int(code) != tt.status) || !strings.Contains(out.String(), tt.says) {
				t.Fatalf("audit: %v, said:\n%s\nwant exit status %d and %q", err, out.String(), tt.status, tt.says)
			}
		})
	}
}

// nodeKeyID is the key id of the node's key file.
func nodeKeyID(t *testing.T, n auditNode) string {
	t.Helper()
	k, err := loadNodeKey(n.keyPath)
	if err != nil {
		t.Fatal(err)
	}
	return protocol.KeyID(k.Public())
}

// TestQueriesPrintSequencesWhole: balance and history decode the node's
// answers into maps, and a seq decoded as float64 printed as 1.234567e+06
// once a log passed a million events.
func TestQueriesPrintSequencesWhole(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/entries") {
			io.WriteString(w, `{"entries":[{"amount":"5","from":"registry://localhost","from_balance":"-5","kind":"transfer","seq":1234567,"time":"2026-01-01T00:00:00Z","to":"agent://a.local","to_balance":"5","transaction_id":"t"}]}`)
			return
		}
		io.WriteString(w, `{"uri":"agent://a.local","balance":"5","available":"5","pending":"0","earned_total":"5","spent_total":"0","updated":"2026-01-01T00:00:00Z","seq":1234567}`)
	}))
	defer api.Close()
	for name, run := range map[string]func([]string, io.Writer) error{"balance": runBalance, "history": runHistory} {
		var out strings.Builder
		if err := run([]string{"--http", api.URL, "agent://a.local"}, &out); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), "1234567") {
			t.Errorf("aglx %s does not print seq 1234567 as such:\n%s", name, out.String())
		}
	}
}

// TestTailRefusesTwoStarts: --seq and --since both say where the log
// starts; tail took --seq and ignored --since without a word.
func TestTailRefusesTwoStarts(t *testing.T) {
	err := runTail(context.Background(), []string{"--seq", "5", "--since", "10m", "--nats", "nats://127.0.0.1:1"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "give one") {
		t.Fatalf("aglx tail --seq 5 --since 10m = %v, want a refusal", err)
	}
}

// TestHistorySaysWhenThePageIsFull: history stopped at its limit without a
// word, and an operator took the page for the whole account.
func TestHistorySaysWhenThePageIsFull(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"entries":[{"amount":"5","from":"registry://localhost","from_balance":"-5","kind":"transfer","seq":77,"time":"2026-01-01T00:00:00Z","to":"agent://a.local","to_balance":"5","transaction_id":"t"}]}`)
	}))
	defer api.Close()
	for _, tt := range []struct {
		limit string
		hint  bool
	}{{"1", true}, {"2", false}} {
		var out strings.Builder
		if err := runHistory([]string{"--http", api.URL, "--limit", tt.limit, "agent://a.local"}, &out); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out.String(), "--after 77") != tt.hint {
			t.Errorf("--limit %s: hint shown = %v, want %v:\n%s", tt.limit, !tt.hint, tt.hint, out.String())
		}
	}
}

// TestSignAddsATimestamp: a frame written by hand without a "timestamp"
// was signed as it was, and the node refused it (400, field "timestamp"
// is required). aglx sign puts the current time in first, moving no other
// byte; a body that has one, or is not an object, is left alone. A frame
// with no body at all was signed as "{}", without one.
func TestSignAddsATimestamp(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 7_000_000, time.UTC) // milliseconds: two sends within a second differ
	tests := []struct{ in, want string }{
		{`{"amount": 1.50, "currency": "AGLX"}`, `{"timestamp": "2026-11-30T12:00:00.007Z", "amount": 1.50, "currency": "AGLX"}`},
		{` {}`, ` {"timestamp": "2026-11-30T12:00:00.007Z"}`},
		{`{"timestamp": "2025-01-01T00:00:00Z"}`, `{"timestamp": "2025-01-01T00:00:00Z"}`},
		{`[1, 2]`, `[1, 2]`},
		{`not json`, `not json`},
		{``, `{"timestamp": "2026-11-30T12:00:00.007Z"}`},
		{" \n", `{"timestamp": "2026-11-30T12:00:00.007Z"}`},
	}
	for _, tc := range tests {
		if got := string(withTimestamp([]byte(tc.in), now)); got != tc.want {
			t.Errorf("withTimestamp(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestQueryWithoutANodeNamesTheFlag: with no node at --http, the commands
// said only "connection refused" (helper-53); they now say which flag
// names the node.
func TestQueryWithoutANodeNamesTheFlag(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nobody listens there now
	err = runBalance([]string{"--http", addr, "agent://a.local"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--http") || !strings.Contains(err.Error(), addr) {
		t.Fatalf("aglx balance with no node: %v; want the address and --http named", err)
	}
	// And send and tail name theirs (helper-59).
	frame := strings.NewReader("AGLX/1.0 TCP\nFROM: agent://a.local\nTO: agent://b.local\nTYPE: ack\n\n{}\n")
	if err := runSend([]string{"--addr", addr}, frame, io.Discard); err == nil || !strings.Contains(err.Error(), "--addr") {
		t.Fatalf("aglx send with no node: %v; want --addr named", err)
	}
	if err := runTail(context.Background(), []string{"--nats", "nats://" + addr, "--no-follow"}, io.Discard); err == nil || !strings.Contains(err.Error(), "--nats") {
		t.Fatalf("aglx tail with no node: %v; want --nats named", err)
	}
}

// TestHandshakesAsksWhatItIsTold: aglx handshakes passes its filters to
// /v1/handshakes, prints each handshake with its seq whole, the number
// pending, and where the next page starts when the node says there is one.
func TestHandshakesAsksWhatItIsTold(t *testing.T) {
	var asked string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked = r.URL.RawQuery
		io.WriteString(w, `{"pending":3,"counts":{"opened":9},"next":1234568,"handshakes":[{"seq":1234567,"kind":"task.assign","key":"t-1",`+
			`"requester":"agent://owner.local","responder":"agent://worker.local","state":"pending","opened":"2026-01-01T00:00:00Z","deadline":"2026-01-02T00:00:00Z"}]}`)
	}))
	defer api.Close()
	var out strings.Builder
	if err := runHandshakes([]string{"--http", api.URL, "--agent", "agent://worker.local", "--state", "pending"}, &out); err != nil {
		t.Fatal(err)
	}
	q, _ := url.ParseQuery(asked)
	if q.Get("agent") != "agent://worker.local" || q.Get("state") != "pending" {
		t.Errorf("asked %q", asked)
	}
	for _, want := range []string{"1234567", "t-1", "agent://owner.local", "3 pending", "--after 1234568"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestKeygenRefusesAnArgument: "aglx keygen bob.key" wrote agent.key and
// exited 0 (helper-81); it is refused, naming --out, and writes nothing.
func TestKeygenRefusesAnArgument(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	err := runKeygen([]string{"bob.key"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--out bob.key") {
		t.Fatalf("aglx keygen bob.key = %v, want a refusal naming --out", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("it wrote %v", entries)
	}
}

// TestFlagsAfterFiles: send and sign take their flags after the files as
// well as before (helper-81: "aglx send FILE --timeout 5s" opened a file
// named --timeout), and sign refuses an input with no frame, as send does,
// instead of printing nothing and exiting 0.
func TestFlagsAfterFiles(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.aglx")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	keyPath := filepath.Join(dir, "k.key")
	if err := runKeygen([]string{"--out", keyPath}, io.Discard); err != nil {
		t.Fatal(err)
	}
	err := runSend([]string{empty, "--timeout", "5s"}, strings.NewReader(""), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "nothing to send") {
		t.Fatalf("aglx send FILE --timeout 5s = %v, want the file read and found empty", err)
	}
	err = runSign([]string{empty, "--key", keyPath}, strings.NewReader(""), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "nothing to sign") {
		t.Fatalf("aglx sign FILE --key K = %v, want the file read and found empty", err)
	}
	// After "--" every argument is a file, even one that looks like a flag
	// (helper-83: only the first was).
	t.Chdir(dir)
	for _, name := range []string{"-a.aglx", "-b.aglx"} {
		if err := os.WriteFile(name, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	err = runSend([]string{"--", "-a.aglx", "-b.aglx"}, strings.NewReader(""), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "nothing to send") {
		t.Fatalf("aglx send -- -a.aglx -b.aglx = %v, want both read as files", err)
	}
}
