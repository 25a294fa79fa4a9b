package bridge

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aglx/ledger/projections"
)

// TestWithoutAFoldIs404: a node that keeps no handshake tracker or no
// reputation model answers every path of that fold 404, saying which,
// before it looks at the path's sequence or the query; an address that
// is none is still a 400 first.
func TestWithoutAFoldIs404(t *testing.T) {
	l, quiet := openBenchLog(t)
	stats := projections.NewStats()
	runner := projections.NewRunner(l, quiet, stats)
	runUntilReady(t, runner)
	base := serveHTTP(t, HTTPHandler(API{Log: l, Runner: runner, Stats: stats, Edge: New(l, Config{}, quiet)}))
	const (
		noHandshakes = "this node does not track handshakes"
		noReputation = "this node keeps no reputation model"
	)
	for _, tc := range []struct {
		name, path string
		code       int
		says       string
	}{
		{"handshakes", "/v1/handshakes", http.StatusNotFound, noHandshakes},
		{"handshakes with a bad limit", "/v1/handshakes?limit=ten", http.StatusNotFound, noHandshakes},
		{"handshake", "/v1/handshakes/7", http.StatusNotFound, noHandshakes},
		{"handshake at no seq", "/v1/handshakes/seven", http.StatusNotFound, noHandshakes},
		{"reputation", "/v1/reputation", http.StatusNotFound, noReputation},
		{"an agent's reputation", "/v1/reputation/agent/bob.local", http.StatusNotFound, noReputation},
		{"reputation of no address", "/v1/reputation/Agent/bob.local", http.StatusBadRequest, "Agent/bob.local is not an address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := getAnswer(t, base+tc.path)
			var body map[string]string
			if err := json.Unmarshal(a.body, &body); err != nil {
				t.Fatalf("GET %s: %d %s: %v; want JSON", tc.path, a.code, a.body, err)
			}
			if a.code != tc.code || len(body) != 1 || !strings.HasPrefix(body["error"], tc.says) {
				t.Errorf("GET %s = %d %s; want %d with only an error saying %q", tc.path, a.code, a.body, tc.code, tc.says)
			}
		})
	}
}

// answer is what a GET got back.
type answer struct {
	code   int
	header http.Header
	body   []byte
}

// getAnswer asks url once, over a connection of its own, and reads the
// whole answer; a client's deadline bounds it.
func getAnswer(t *testing.T, url string) answer {
	t.Helper()
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading the answer: %v", url, err)
	}
	return answer{resp.StatusCode, resp.Header, b}
}

// serveHTTP serves h on a loopback port of its own, as the node serves
// its API, until the test ends, and gives the base URL.
func serveHTTP(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: RequestReadMax, WriteTimeout: ResponseWriteMax}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}
