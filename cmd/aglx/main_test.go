package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aglx/ledger/bridge"
	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/protocol"
)

// testNode is a bare node: embedded server, log and bridge on loopback.
type testNode struct {
	tcp, tls, udp, natsURL string
	cert                   string // the TLS port's self-signed certificate
	log                    *events.Log
}

// waitPublished waits until the event stream holds seq: an ack means the
// event is durable, and readers see it a moment later.
func (n testNode) waitPublished(t *testing.T, seq uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.log.WaitPublished(ctx, seq); err != nil {
		t.Fatal(err)
	}
}

func startTestNode(t *testing.T) testNode {
	t.Helper()
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
	srv := bridge.New(l, bridge.Config{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	certDir := t.TempDir()
	tcfg, _, err := bridge.TLSConfig("", "", certDir, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	tln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.ServeTCP(ln, events.TransportTCP)
	go srv.ServeTCP(tls.NewListener(tln, tcfg), events.TransportTLS)
	go srv.ServeUDP(pc)
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	return testNode{tcp: ln.Addr().String(), tls: tln.Addr().String(), udp: pc.LocalAddr().String(), natsURL: clientURL(s), log: l, cert: filepath.Join(certDir, "cert.pem")}
}

func clientURL(s *events.Server) string { return s.ClientURL() }

func referencePaths(t *testing.T) []string {
	t.Helper()
	paths, _ := filepath.Glob("../../testdata/reference/*.aglx")
	sort.Strings(paths)
	if len(paths) == 0 {
		t.Fatal("no reference frames")
	}
	return paths
}

func TestSendAndTail(t *testing.T) {
	n := startTestNode(t)
	// All but the zone.confirm, which the node refuses (403): it carries a
	// session token, which the node does not record.
	var paths []string
	for _, p := range referencePaths(t) {
		if !strings.Contains(p, "zone.confirm") {
			paths = append(paths, p)
		}
	}
	var out bytes.Buffer
	if err := runSend(append([]string{"--tls", "--ca", n.cert, "--addr", n.tls}, paths...), nil, &out); err != nil {
		t.Fatalf("aglx send = %v\n%s", err, out.String())
	}
	if got := strings.Count(out.String(), "TYPE: ack\n"); got != len(paths) {
		t.Fatalf("aglx send printed %d acks for %d frames:\n%s", got, len(paths), out.String())
	}
	n.waitPublished(t, uint64(len(paths)))

	tests := []struct {
		name string
		args []string
		want int
	}{
		{"everything", nil, len(paths)},
		{"one group", []string{"--type", "credit"}, 8},
		{"one type", []string{"--type", "task.assign"}, 3},
		{"two types", []string{"--type", "zone.join", "--type", "zone.leave"}, 2},
		{"from an agent", []string{"--from", "agent://worker05.local"}, 3},
		{"to an agent", []string{"--to", "agent://worker05.local"}, 7},
		{"from or to an agent", []string{"--agent", "agent://worker05.local"}, 9},
		{"from a sequence", []string{"--seq", "30"}, len(paths) - 29},
		{"since a time", []string{"--since", "1h"}, len(paths)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var tail bytes.Buffer
			args := append([]string{"--nats", n.natsURL, "--no-follow", "--json"}, tc.args...)
			if err := runTail(context.Background(), args, &tail); err != nil {
				t.Fatalf("aglx tail %v = %v", args, err)
			}
			lines := 0
			sc := bufio.NewScanner(&tail)
			for sc.Scan() {
				var l jsonLine
				if err := json.Unmarshal(sc.Bytes(), &l); err != nil || l.Seq == 0 || len(l.Body) == 0 {
					t.Fatalf("line %q: %v", sc.Text(), err)
				}
				lines++
			}
			if lines != tc.want {
				t.Fatalf("aglx tail %v printed %d events, want %d", tc.args, lines, tc.want)
			}
		})
	}
}

func TestSendTLSPinsTheCertificate(t *testing.T) {
	n := startTestNode(t)
	frame := referencePaths(t)[26] // auth.request: needs TLS
	var out bytes.Buffer
	if err := runSend([]string{"--addr", n.tcp, frame}, nil, &out); err == nil || !strings.Contains(out.String(), "403") {
		t.Fatalf("auth.request in the clear: %v\n%s", err, out.String())
	}
	b, _ := os.ReadFile(n.cert)
	blk, _ := pem.Decode(b)
	out.Reset()
	if err := runSend([]string{"--tls", "--pin", bridge.Fingerprint(blk.Bytes), "--addr", n.tls, frame}, nil, &out); err != nil {
		t.Fatalf("aglx send --tls --pin: %v\n%s", err, out.String())
	}
	if err := runSend([]string{"--tls", "--pin", "00:11", "--addr", n.tls, frame}, nil, io.Discard); err == nil {
		t.Fatal("aglx send accepted a certificate with another fingerprint")
	}
	if err := runSend([]string{"--tls", "--addr", n.tls, frame}, nil, io.Discard); err == nil || !strings.Contains(err.Error(), "--ca DATA/tls/cert.pem") {
		t.Fatalf("aglx send --tls without --ca or --pin: %v; want a hint at --ca and --pin", err)
	}
	// The TLS port in the clear: the node answers 400 in the clear, and
	// send must point at --tls (it exited 0 in silence once, when no
	// reply came).
	if err := runSend([]string{"--addr", n.tls, frame}, nil, io.Discard); err == nil || !strings.Contains(err.Error(), "use --tls") {
		t.Fatalf("aglx send in the clear to the TLS port: %v; want an error pointing at --tls", err)
	}
}

// TestSendSaysWhatIsWrongWithThePin: a mistyped --pin and a pin the node's
// certificate does not match both ended in "is a node serving AGLX at
// ADDR? --addr names it", which sent operators after the address. A pin
// that is no fingerprint is refused before anything is dialled, saying
// what is wrong with it; a wrong one names the fingerprint the node has.
// Neither sends a frame, and the forms aglxd's is written in, and the
// same without colons or in lower case, are all taken.
func TestSendSaysWhatIsWrongWithThePin(t *testing.T) {
	n := startTestNode(t)
	frame := referencePaths(t)[26] // auth.request: needs TLS
	b, _ := os.ReadFile(n.cert)
	blk, _ := pem.Decode(b)
	real := bridge.Fingerprint(blk.Bytes)
	other := strings.Repeat("AB:", 31) + "AB"
	tests := []struct {
		name string
		args []string
		says []string // what the error says; none: the frame is sent
	}{
		{"as aglxd logs it", []string{"--pin", real}, nil},
		{"lower case, no colons", []string{"--pin", strings.ToLower(strings.ReplaceAll(real, ":", ""))}, nil},
		{"too short", []string{"--pin", "00:11"}, []string{`pin "00:11" is not a SHA-256 fingerprint`, "4 hex digits, want 64"}},
		{"one digit short", []string{"--pin", real[:len(real)-1]}, []string{"63 hex digits, want 64"}},
		{"not hex", []string{"--pin", strings.Repeat("zz", 32)}, []string{`'z' is not a hex digit`}},
		{"openssl's line pasted whole", []string{"--pin", "SHA256 Fingerprint=" + real}, []string{`'S' is not a hex digit`}},
		{"another certificate's", []string{"--pin", other}, []string{"has fingerprint " + real, "not the pinned " + other, "tls_sha256"}},
		{"another, in lower case", []string{"--pin", strings.ToLower(other)}, []string{"has fingerprint " + real, "not the pinned " + other}},
		{"another, with --ca that vouches", []string{"--ca", n.cert, "--pin", other}, []string{"has fingerprint " + real}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := runSend(append(append([]string{"--tls", "--addr", n.tls}, tt.args...), frame), nil, &out)
			if tt.says == nil {
				if err != nil {
					t.Fatalf("aglx send --tls %v = %v\n%s", tt.args, err, out.String())
				}
				return
			}
			if err == nil {
				t.Fatalf("aglx send --tls %v trusted the node:\n%s", tt.args, out.String())
			}
			for _, want := range tt.says {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("aglx send --tls %v = %v; want it to say %q", tt.args, err, want)
				}
			}
			if strings.Contains(err.Error(), "--addr names it") {
				t.Errorf("aglx send --tls %v = %v; the address is not what is wrong", tt.args, err)
			}
			if out.Len() > 0 {
				t.Errorf("aglx send --tls %v printed replies: a frame went out\n%s", tt.args, out.String())
			}
		})
	}
}

// TestRepliesOwed: the node answers every frame but ack and error, and
// input that does not decode with one error.
func TestRepliesOwed(t *testing.T) {
	frame := func(typ string) []byte {
		return []byte("AGLX/1.0 TCP\nFROM: agent://a.local\nTO: agent://b.local\nTYPE: " + typ + "\n\n{}\n")
	}
	tests := []struct {
		name   string
		inputs [][]byte
		want   int
	}{
		{"one task", [][]byte{frame("task.cancel")}, 1},
		{"an ack", [][]byte{frame("ack")}, 0},
		{"two frames in one input", [][]byte{append(frame("task.cancel"), frame("error")...)}, 1},
		{"garbage", [][]byte{[]byte("hello\n\n")}, 1},
		{"garbage, then frames: the node reads no further", [][]byte{[]byte("hello\n\n"), frame("task.cancel")}, 1},
		{"an ack with a bad body: refused, not answered", [][]byte{[]byte("AGLX/1.0 TCP\nFROM: agent://a.local\nTO: agent://b.local\nTYPE: ack\n\n{\"a\": tru}\n")}, 0},
		{"unknown type", [][]byte{frame("task.explode")}, 1},
	}
	for _, tc := range tests {
		if got := repliesOwed(tc.inputs); got != tc.want {
			t.Errorf("%s: repliesOwed = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestSendReportsErrors(t *testing.T) {
	n := startTestNode(t)
	var out bytes.Buffer
	in := strings.NewReader("AGLX/1.0 TCP\nFROM: agent://a.local\nTO: agent://b.local\nTYPE: task.explode\n\n{}\n")
	err := runSend([]string{"--addr", n.tcp}, in, &out)
	if code, ok := err.(exitCode); !ok || code != 1 {
		t.Fatalf("aglx send of a bad frame = %v, want exit 1", err)
	}
	if !strings.Contains(out.String(), "TYPE: error") || !strings.Contains(out.String(), "task.explode") {
		t.Fatalf("output does not show the error:\n%s", out.String())
	}
}

func TestTailFollows(t *testing.T) {
	n := startTestNode(t)
	ctx, cancel := context.WithCancel(context.Background())
	ctxDone := make(chan error, 1)
	pr, pw := io.Pipe()
	go func() {
		ctxDone <- runTail(ctx, []string{"--nats", n.natsURL, "--type", "agent.announce"}, pw)
		pw.Close()
	}()
	defer func() {
		cancel()
		go io.Copy(io.Discard, pr)
		if err := <-ctxDone; err != nil {
			t.Errorf("tail after cancel: %v", err)
		}
	}()
	if err := runSend([]string{"--udp", "--addr", n.udp, referencePaths(t)[13]}, nil, io.Discard); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "TYPE: agent.announce") {
				lines <- sc.Text()
				return
			}
		}
	}()
	select {
	case <-lines:
	case err := <-ctxDone:
		t.Fatalf("tail ended: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("tail did not print the announce")
	}
}

func TestKeygenSignVerify(t *testing.T) {
	dir := t.TempDir()
	keyPath := filepath.Join(dir, "agent.key")
	var out bytes.Buffer
	if err := runKeygen([]string{"--out", keyPath}, &out); err != nil {
		t.Fatal(err)
	}
	if err := runKeygen([]string{"--out", keyPath}, io.Discard); err == nil {
		t.Fatal("keygen overwrote an existing key")
	}
	if fi, err := os.Stat(keyPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode = %v, %v; want 0600", fi.Mode(), err)
	}
	var signed bytes.Buffer
	if err := runSign([]string{"--key", keyPath, referencePaths(t)[14]}, nil, &signed); err != nil {
		t.Fatal(err)
	}
	f, err := protocol.NewDecoder(&signed, protocol.DecoderOptions{}).Decode()
	if err != nil {
		t.Fatal(err)
	}
	key, err := loadKey(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := protocol.Verify(key.Public(), f.From(), f.To(), f.Type(), f.Value(protocol.HeaderCredits), f.Body); err != nil {
		t.Fatalf("aglx sign output does not verify: %v\n%s", err, f.Body)
	}
}

// TestMintBodyIsValidJSON: whatever the reason holds, the mint's body is a
// valid credit.transfer body that can be signed, with its amount written
// as a JSON string, as every money value the project writes.
func TestMintBodyIsValidJSON(t *testing.T) {
	for _, reason := range []string{"issuance", "a\x01b", "a\x7fb", "bad \xff utf-8", `quote " and \ backslash`, "ünïcode"} {
		body := mintBody("100.50", reason, "2026-11-30T12:00:00Z", "mint-1")
		if !strings.Contains(string(body), `"amount": "100.50"`) {
			t.Errorf("mint body: the amount is not a JSON string: %s", body)
		}
		if !utf8.Valid(body) { // the node refuses a body that is not
			t.Errorf("mint body with reason %q is not UTF-8: %q", reason, body)
		}
		f := &protocol.Frame{Transport: protocol.TransportTCP, Body: body, Headers: []protocol.Header{
			{Name: protocol.HeaderFrom, Value: "registry://localhost"},
			{Name: protocol.HeaderTo, Value: "agent://a.local"},
			{Name: protocol.HeaderType, Value: protocol.TypeCreditTransfer},
		}}
		if _, err := protocol.Parse(f); err != nil {
			t.Errorf("mint body with reason %q: %v\n%s", reason, err, body)
		}
		key, _ := protocol.GenerateKey(protocol.KeyEd25519)
		if err := protocol.SignFrame(key, f); err != nil {
			t.Errorf("mint body with reason %q cannot be signed: %v", reason, err)
		}
	}
}

// TestTailFilters: the flags become the subject filters they say, with
// URIs written canonically, as the subjects hold them.
func TestTailFilters(t *testing.T) {
	a, b := events.URIToken("agent://a.local"), events.URIToken("agent://b.local")
	p := events.SubjectPrefix
	tests := []struct {
		name            string
		types           []string
		from, to, agent string
		want            string // fmt of the filters, or "error"
	}{
		{"nothing", nil, "", "", "", "[]"},
		{"from, any case", nil, "agent://A.Local", "", "", "[" + p + ".*.*." + a + ".*]"},
		{"agent both ways", nil, "", "", "agent://a.local", "[" + p + ".*.*." + a + ".* " + p + ".*.*.*." + a + "]"},
		{"agent to another", nil, "", "agent://b.local", "agent://a.local", "[" + p + ".*.*." + a + "." + b + "]"},
		{"agent from another", nil, "agent://b.local", "", "agent://a.local", "[" + p + ".*.*." + b + "." + a + "]"},
		{"all three", nil, "agent://b.local", "agent://b.local", "agent://a.local", "error"},
		{"not a URI", nil, "worker05", "", "", "error"},
		{"a group", []string{"credit"}, "", "", "", "[" + p + ".credit.*.*.*]"},
		{"a typo in a TYPE", []string{"credt"}, "", "", "", "error"},
		// Overlapping filters made JetStream refuse the consumer.
		{"a group and one of its TYPEs", []string{"credit.transfer", "credit"}, "", "", "", "[" + p + ".credit.*.*.*]"},
		{"a TYPE twice", []string{"task.assign", "task.assign"}, "", "", "", "[" + p + ".task.assign.*.*]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := filters(tc.types, tc.from, tc.to, tc.agent)
			if tc.want == "error" {
				if err == nil {
					t.Fatalf("filters = %v, want an error", got)
				}
				return
			}
			if err != nil || fmt.Sprint(got) != tc.want {
				t.Fatalf("filters = %v, %v; want %s", got, err, tc.want)
			}
		})
	}
}

// TestQueryFlagsAfterTheArgument: flags may come after the URI, as people
// type them; a wrong count says what is wanted.
func TestQueryFlagsAfterTheArgument(t *testing.T) {
	fs, api, asJSON := queryFlags("balance")
	fs.SetOutput(io.Discard)
	pos, err := parseQuery(fs, []string{"agent://a.local", "--json", "--http", "127.0.0.1:1"}, 1)
	if err != nil || fmt.Sprint(pos) != "[agent://a.local]" || !*asJSON || *api != "127.0.0.1:1" {
		t.Fatalf("parseQuery = %v, %v (json %v, http %q)", pos, err, *asJSON, *api)
	}
	fs, _, _ = queryFlags("balance")
	fs.SetOutput(io.Discard)
	if _, err := parseQuery(fs, []string{"agent://a.local", "agent://b.local"}, 1); err == nil {
		t.Fatal("two URIs where one is wanted were taken")
	}
}
