package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aglx/ledger/events"
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

// TestRefusalsSayWhenToAskAgain: every 503 of the HTTP API carries
// Retry-After, in whole seconds and at least 1: the wait its body says,
// rounded up (the ledger digest's), or a fixed wait where the node cannot
// know it. Until 2026-12-01 only the refusal for too many waiting reads
// carried one.
func TestRefusalsSayWhenToAskAgain(t *testing.T) {
	defer func(r, s time.Duration) { replayWaitMax, seqWaitMax = r, s }(replayWaitMax, seqWaitMax)
	replayWaitMax, seqWaitMax = 100*time.Millisecond, 100*time.Millisecond
	fixed := func(d time.Duration) func(string) (time.Duration, time.Duration) {
		return func(string) (time.Duration, time.Duration) { return d, d }
	}
	for _, tc := range []struct {
		name string
		// serve makes the API's state that is refused, and says the path
		// to ask.
		serve func(t *testing.T) (http.Handler, string)
		says  string
		// wait gives the least and the most the wait may be, from the
		// body: Retry-After is it rounded up to seconds.
		wait func(body string) (lo, hi time.Duration)
	}{
		{"readyz while replaying", func(t *testing.T) (http.Handler, string) {
			return HTTPHandler(replayingAPI(t)), "/readyz"
		}, `"status": "replaying"`, fixed(replayRetryAfter)},
		{"healthz with the store down", func(t *testing.T) (http.Handler, string) {
			return HTTPHandler(storeDownAPI(t)), "/healthz"
		}, "the disk is full", fixed(logDownRetryAfter)},
		{"readyz with the store down", func(t *testing.T) (http.Handler, string) {
			return HTTPHandler(storeDownAPI(t)), "/readyz"
		}, "the disk is full", fixed(logDownRetryAfter)},
		{"a read while replaying", func(t *testing.T) (http.Handler, string) {
			return HTTPHandler(replayingAPI(t)), "/v1/stats"
		}, "replaying its log after a start", fixed(replayRetryAfter)},
		{"a read at a position not reached", func(t *testing.T) (http.Handler, string) {
			api := replayingAPI(t)
			appendEvents(t, api.Log, 3) // durable, never applied
			return HTTPHandler(api), "/v1/stats?seq=3"
		}, "has not reached seq 3", fixed(replayRetryAfter)},
		{"a read with every waiting place taken", func(t *testing.T) (http.Handler, string) {
			api := replayingAPI(t)
			api.waiters = make(chan struct{}, 1)
			api.waiters <- struct{}{}
			return api.view(func(*http.Request) (int, any) { return http.StatusOK, "read" }), "/"
		}, "reads are waiting for a log position", fixed(waitersRetryAfter)},
		{"a digest while one is made", func(t *testing.T) (http.Handler, string) {
			api := caughtUpAPI(t)
			making := &ledgerDigests{}
			making.Lock()
			return api.viewAt(api.ledgerDigest(making)), "/"
		}, "a ledger digest is being made", fixed(digestBusyRetryAfter)},
		{"a digest too soon after the last", func(t *testing.T) (http.Handler, string) {
			api := caughtUpAPI(t) // at seq 1
			last := &ledgerDigests{have: true, at: 0, done: time.Now(), cost: 250 * time.Millisecond}
			return api.viewAt(api.ledgerDigest(last)), "/"
		}, "took 250ms to make; a new one may be made in", func(body string) (time.Duration, time.Duration) {
			// The body's wait is rounded to the millisecond.
			_, in, _ := strings.Cut(body, "may be made in ")
			in, _, _ = strings.Cut(in, ":")
			d, err := time.ParseDuration(in)
			if err != nil {
				t.Fatalf("the digest's wait %q: %v", in, err)
			}
			return d - time.Millisecond/2, d + time.Millisecond/2
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, path := tc.serve(t)
			a := getAnswer(t, serveHTTP(t, h)+path)
			if a.code != http.StatusServiceUnavailable || !strings.Contains(string(a.body), tc.says) || !json.Valid(a.body) {
				t.Fatalf("GET %s = %d %s; want 503 in JSON saying %q", path, a.code, a.body, tc.says)
			}
			lo, hi := tc.wait(string(a.body))
			least, most := max(1, int64(math.Ceil(lo.Seconds()))), max(1, int64(math.Ceil(hi.Seconds())))
			got := a.header.Get("Retry-After")
			if n, err := strconv.ParseInt(got, 10, 64); err != nil || n < least || n > most {
				t.Errorf("GET %s: Retry-After %q; want %d to %d (seconds) for %s", path, got, least, most, a.body)
			}
		})
	}
}

// replayingAPI is the API of a node whose projections never catch up
// with the log: nothing is applied.
func replayingAPI(t *testing.T) API {
	t.Helper()
	l, quiet := openBenchLog(t)
	stats := projections.NewStats()
	runner := projections.NewRunner(l, quiet, stats) // never run
	return API{Log: l, Runner: runner, Stats: stats, Edge: New(l, Config{}, quiet)}
}

// caughtUpAPI is the API of a node with a ledger whose projections have
// applied its log, one event.
func caughtUpAPI(t *testing.T) API {
	t.Helper()
	l, quiet := openBenchLog(t)
	appendEvents(t, l, 1)
	reg, credits := ledgerFolds(t)
	runner := projections.NewRunner(l, quiet, reg, credits)
	ctx, cancel := context.WithTimeout(runUntilReady(t, runner), 20*time.Second)
	defer cancel()
	if err := runner.WaitFor(ctx, 1); err != nil {
		t.Fatalf("the projections never applied seq 1: %v", err)
	}
	return API{Log: l, Runner: runner, Credits: credits, Registry: reg}
}

// storeDownAPI is the API of a node whose store takes nothing more, as
// on the embedded server once a write met a full disk.
func storeDownAPI(t *testing.T) API {
	t.Helper()
	nc := benchServer(t, 0)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	down := func() error { return errors.New("the disk is full") }
	l, err := events.Open(context.Background(), nc, events.Config{ExclusiveWriter: true, StoreDown: down}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(context.Background()) })
	stats := projections.NewStats()
	runner := projections.NewRunner(l, quiet, stats)
	runUntilReady(t, runner)
	return API{Log: l, Runner: runner, Stats: stats, Edge: New(l, Config{}, quiet)}
}

// TestRetryAfterRoundsUp: Retry-After is a wait in whole seconds, rounded
// up so that a client does not ask before it is over, and never 0.
func TestRetryAfterRoundsUp(t *testing.T) {
	for _, tc := range []struct {
		wait time.Duration
		want string
	}{
		{-time.Second, "1"}, {0, "1"}, {time.Nanosecond, "1"}, {999 * time.Millisecond, "1"}, {time.Second, "1"},
		{time.Second + time.Nanosecond, "2"}, {2499 * time.Millisecond, "3"}, {time.Hour, "3600"},
	} {
		h := http.Header{}
		retryAfter(h, tc.wait)
		if got := h.Get("Retry-After"); got != tc.want {
			t.Errorf("retryAfter(%v) = %q, want %q", tc.wait, got, tc.want)
		}
	}
}
