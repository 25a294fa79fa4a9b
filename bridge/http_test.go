package bridge

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/projections"
)

// TestLimitListener: past n open connections, Accept waits until one of
// them closes; Close ends a waiting Accept.
func TestLimitListener(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := LimitListener(inner, 2)
	accepted := make(chan net.Conn, 3)
	ended := make(chan error, 1)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				ended <- err
				return
			}
			accepted <- c
		}
	}()
	var clients []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients = append(clients, c)
	}
	var open []net.Conn
	for range 2 {
		select {
		case c := <-accepted:
			open = append(open, c)
		case <-time.After(10 * time.Second):
			t.Fatal("the first two connections were not accepted")
		}
	}
	select {
	case <-accepted:
		t.Fatal("a third connection was accepted with two open and a limit of two")
	case <-time.After(200 * time.Millisecond):
	}
	open[0].Close()
	select {
	case c := <-accepted:
		c.Close()
	case <-time.After(10 * time.Second):
		t.Fatal("the third connection was not accepted after one closed")
	}
	open[1].Close()
	ln.Close()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("Accept did not end when the listener closed")
	}
}

// TestIdleConnectionsMakeRoom: with every slot held by a kept-alive
// connection between requests, a new client waited for the server's idle
// timeout (two minutes in aglxd), so a few idle clients could fail the
// orchestrator's health checks. The longest-idle connection is closed to
// make room.
func TestIdleConnectionsMakeRoom(t *testing.T) {
	inner, _ := serveLimited(t, 2, halfReceivedGrace)

	for range 2 { // two clients, each with one answered request and its connection kept
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: node\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get("http://" + inner.Addr().String() + "/healthz")
	if err != nil {
		t.Fatalf("a third client with both slots idle: %v", err)
	}
	resp.Body.Close()
}

// TestHalfReceivedRequestIsNotClosedForRoom: the server calls a kept-alive
// connection active only once a request's headers are in, so a client
// whose next request was half sent when every slot was taken lost its
// connection, and its answer, to a newcomer. A connection that has read
// bytes since it went idle is left alone; the newcomer waits until a
// connection is idle without a request coming in, or one has sent nothing
// for halfReceivedGrace (a client trickling a byte at a time kept its
// slot for the whole idle timeout).
func TestHalfReceivedRequestIsNotClosedForRoom(t *testing.T) {
	// A grace long enough that a stalled machine does not end it while
	// the test looks.
	const grace = 3 * time.Second
	inner, ln := serveLimited(t, 1, grace)

	a, err := net.Dial("tcp", inner.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ar := bufio.NewReader(a)
	io.WriteString(a, "GET / HTTP/1.1\r\nHost: node\r\n\r\n")
	resp, err := http.ReadResponse(ar, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// Half of a's next request, and wait until the server has read it.
	io.WriteString(a, "GET /again HTTP/1.1\r\nHo")
	for deadline := time.Now().Add(10 * time.Second); ; {
		ln.mu.Lock()
		busy := 0
		for c := range ln.idle {
			if time.Now().UnixNano()-c.(*limitConn).lastRead.Load() < int64(grace)/2 {
				busy++
			}
		}
		ln.mu.Unlock()
		if busy == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the server never read the half-sent request")
		}
		time.Sleep(5 * time.Millisecond)
	}
	newcomer := make(chan error, 1)
	go func() {
		client := &http.Client{Timeout: 20 * time.Second}
		resp, err := client.Get("http://" + inner.Addr().String() + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		newcomer <- err
	}()
	select {
	case err := <-newcomer:
		t.Fatalf("the newcomer was served (%v) while the only slot was taking a request", err)
	case <-time.After(grace / 4):
	}
	io.WriteString(a, "st: node\r\n\r\n")
	resp, err = http.ReadResponse(ar, nil)
	if err != nil {
		t.Fatalf("the half-sent request lost its answer: %v", err)
	}
	resp.Body.Close()
	if err := <-newcomer; err != nil {
		t.Fatalf("the newcomer, once the connection was idle again: %v", err)
	}
}

// TestTricklingClientDoesNotHoldItsSlot: one byte after an answer kept a
// kept-alive connection from being closed for room for the whole idle
// timeout (net/http starts its header timeout only after four bytes).
func TestTricklingClientDoesNotHoldItsSlot(t *testing.T) {
	inner, _ := serveLimited(t, 1, halfReceivedGrace)
	a, err := net.Dial("tcp", inner.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	io.WriteString(a, "GET / HTTP/1.1\r\nHost: node\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(a), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	io.WriteString(a, "G") // and nothing more
	client := &http.Client{Timeout: 20 * halfReceivedGrace}
	resp, err = client.Get("http://" + inner.Addr().String() + "/healthz")
	if err != nil {
		t.Fatalf("a newcomer behind a client that sent one byte: %v", err)
	}
	resp.Body.Close()
}

// serveLimited serves "ok" to every request on a loopback listener limited
// to n connections, until the test ends.
// The connections' grace is grace.
func serveLimited(t *testing.T, n int, grace time.Duration) (net.Listener, *LimitedListener) {
	t.Helper()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := LimitListener(inner, n)
	ln.grace = grace
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }),
		IdleTimeout: time.Minute, ReadHeaderTimeout: time.Minute, ConnState: ln.ConnState}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return inner, ln
}

// TestSilentNewConnectionsMakeRoom: a connection that never sends a byte
// was not idle to the listener, so it held its slot until the server's
// ReadHeaderTimeout; a client reopening such connections made every health
// check wait seconds (helper-52). Once silent past the grace, a new
// connection is closed for a newcomer as an idle one is.
func TestSilentNewConnectionsMakeRoom(t *testing.T) {
	const grace = 200 * time.Millisecond
	inner, _ := serveLimited(t, 2, grace)
	for range 2 {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	client := &http.Client{Timeout: 20 * time.Second} // far below the server's minute of ReadHeaderTimeout
	resp, err := client.Get("http://" + inner.Addr().String() + "/healthz")
	if err != nil {
		t.Fatalf("a client with every slot held by a silent connection: %v", err)
	}
	resp.Body.Close()
}

// TestReadyzWhileReplaying: /healthz is 200 while the projections replay
// the log after a start, so that a supervisor does not restart a node for
// replaying; a load balancer that routed queries to it by /healthz sent
// them to a node that could not answer yet (helper-53). /readyz is 503
// then, 200 once they have caught up.
func TestReadyzWhileReplaying(t *testing.T) {
	l, quiet := openBenchLog(t)
	runner := projections.NewRunner(l, quiet)
	h := HTTPHandler(API{Log: l, Runner: runner})
	get := func(path string) int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code
	}
	if h, r := get("/healthz"), get("/readyz"); h != http.StatusOK || r != http.StatusServiceUnavailable {
		t.Fatalf("before the projections caught up: /healthz %d, /readyz %d; want 200 and 503", h, r)
	}
	runUntilReady(t, runner)
	if r := get("/readyz"); r != http.StatusOK {
		t.Fatalf("/readyz once caught up: %d, want 200", r)
	}
}

// TestReadsWaitForTheReplay: a read without ?seq= while the projections
// replay after a start waits for them, and says so (503) if they take too
// long; it used to answer at once from a part of the log, and a funded
// account read as "no account" (helper-61). Once caught up it is answered.
func TestReadsWaitForTheReplay(t *testing.T) {
	defer func(d time.Duration) { replayWaitMax = d }(replayWaitMax)
	replayWaitMax = 100 * time.Millisecond
	l, quiet := openBenchLog(t)
	stats := projections.NewStats()
	runner := projections.NewRunner(l, quiet, stats)
	h := HTTPHandler(API{Log: l, Runner: runner, Stats: stats, Edge: New(l, Config{}, quiet)})
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, rec.Body.String()
	}
	for _, path := range []string{"/v1/stats", "/v1/stats?seq=0"} { // seq 0 is no position (helper-88)
		if code, body := get(path); code != http.StatusServiceUnavailable || !strings.Contains(body, "replaying") {
			t.Fatalf("%s while replaying: %d %s; want 503 saying the node is replaying", path, code, body)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runFor(t, ctx, cancel, runner)
	if code, body := get("/v1/stats"); code != http.StatusOK {
		t.Fatalf("a read once the replay could end: %d %s; want 200", code, body)
	}
}

// TestReadsWaitingForAPositionAreBounded: at most waitersMax reads wait for
// a log position at once; the next is told 503 at once. Waiting reads hold
// HTTP slots no idle rule frees, and 256 of them kept /healthz from being
// answered (helper-69).
func TestReadsWaitingForAPositionAreBounded(t *testing.T) {
	l, quiet := openBenchLog(t)
	stats := projections.NewStats()
	runner := projections.NewRunner(l, quiet, stats) // never run: nothing is applied
	h := HTTPHandler(API{Log: l, Runner: runner, Stats: stats, Edge: New(l, Config{}, quiet)})
	appendEvents(t, l, 100) // durable, never applied
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type answer struct {
		code int
		body string
	}
	done := make(chan answer, waitersMax+1)
	// One more than may wait: that one is answered at once, the others
	// wait (for seqWaitMax, or until cancelled).
	for range waitersMax + 1 {
		go func() {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/stats?seq=100", nil).WithContext(ctx))
			done <- answer{rec.Code, rec.Body.String()}
		}()
	}
	select {
	case a := <-done:
		if a.code != http.StatusServiceUnavailable || !strings.Contains(a.body, "reads are waiting") {
			t.Fatalf("the first answer of %d reads for a position not reached: %d %s; want 503 for the one past the bound", waitersMax+1, a.code, a.body)
		}
	case <-time.After(seqWaitMax / 2):
		t.Fatalf("none of %d reads for a position not reached was answered at once", waitersMax+1)
	}
	// A read for a position no acknowledgement named is refused at once,
	// and holds no place (helper-88).
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/stats?seq=101", nil))
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "no acknowledgement has named seq 101") {
		t.Fatalf("a read past the log's end with the waiters full: %d %s; want 400 saying so", rec.Code, rec.Body.String())
	}
	cancel()
	for range waitersMax {
		<-done
	}
}

// TestSlowReadIsStillAnswered: a read of the state that takes longer than
// the HTTP server's WriteTimeout (a ledger digest of millions of postings)
// is still answered: the deadline is given again once the answer is made.
// The server's deadline runs from the request's arrival, and the digest
// was made and then cut, so that an audit of a large ledger never got it.
func TestSlowReadIsStillAnswered(t *testing.T) {
	l, quiet := openBenchLog(t)
	runner := projections.NewRunner(l, quiet)
	runUntilReady(t, runner) // nothing to apply
	api := API{Log: l, Runner: runner}
	const writeTimeout = 200 * time.Millisecond
	srv := httptest.NewUnstartedServer(api.viewAt(func(*http.Request, uint64) (int, any) {
		time.Sleep(3 * writeTimeout) // the slow digest
		return http.StatusOK, map[string]string{"digest": "made"}
	}))
	srv.Config.WriteTimeout = writeTimeout
	srv.Start()
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/")
	if err != nil {
		t.Fatalf("a read slower than the server's WriteTimeout: %v; want its answer", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "made") {
		t.Fatalf("a read slower than the server's WriteTimeout: %d %q %v; want 200 with its answer", resp.StatusCode, b, err)
	}
}

// TestPathsAnswerInJSON: a path with an AGLX address written as it is
// (agent://bob.local), or with any empty, "." or ".." part, gets a 400 in
// JSON that says how to write an address; the mux answered it with a
// redirect in HTML to a cleaned path, where the account was "not found"
// (helper-73). A path that is no endpoint gets a 404 that lists the
// endpoints.
func TestPathsAnswerInJSON(t *testing.T) {
	l, quiet := openBenchLog(t)
	stats := projections.NewStats()
	runner := projections.NewRunner(l, quiet, stats)
	h := HTTPHandler(API{Log: l, Runner: runner, Stats: stats, Edge: New(l, Config{}, quiet)})
	tests := []struct {
		path string
		code int
		says string
	}{
		{"/v1/accounts/agent://bob.local", http.StatusBadRequest, "agent/bob.local"},
		{"/v1//agents", http.StatusBadRequest, "agent/bob.local"},
		{"/v1/agents/./x", http.StatusBadRequest, `"."`},
		{"/v1/agents/../stats", http.StatusBadRequest, `".."`},
		{"/v1/", http.StatusNotFound, "/v1/accounts/SCHEME/NAME"},
		{"/v1/accounts/agent%3A%2F%2Fbob.local", http.StatusNotFound, "agent/bob.local"},
	}
	for _, tt := range tests {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tt.path, nil))
		var body struct{ Error string }
		err := json.Unmarshal(rec.Body.Bytes(), &body)
		if rec.Code != tt.code || err != nil || !strings.Contains(body.Error, tt.says) {
			t.Errorf("GET %s: %d %s; want %d in JSON saying %s", tt.path, rec.Code, rec.Body.String(), tt.code, tt.says)
		}
	}
}

// TestRefusedReadsSayWhereTheStateIs: a read refused because the state
// has not reached the position asked still says where it is, as every
// answer of the API does (Aglx-Applied-Seq).
func TestRefusedReadsSayWhereTheStateIs(t *testing.T) {
	l, quiet := openBenchLog(t)
	stats := projections.NewStats()
	runner := projections.NewRunner(l, quiet, stats) // never run: nothing is applied
	h := HTTPHandler(API{Log: l, Runner: runner, Stats: stats, Edge: New(l, Config{}, quiet)})
	appendEvents(t, l, 5)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the wait for seq 5 ends at once
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/stats?seq=5", nil).WithContext(ctx))
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Aglx-Applied-Seq") != "0" {
		t.Fatalf("a read at a position not reached: %d, Aglx-Applied-Seq %q; want 503 and 0", rec.Code, rec.Header().Get("Aglx-Applied-Seq"))
	}
}

// TestTrickledBodiesDoNotHoldTheSlots: the API reads no request body, but
// the server drains one before it answers, for as long as the sender
// takes; connections trickling bodies held every slot, and a new client
// (a health check) was never answered (helper-72). A body now has a second
// to arrive, then its connection closes and makes room.
func TestTrickledBodiesDoNotHoldTheSlots(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := LimitListener(inner, 2)
	// As the node's server, but without its ReadTimeout, which would end
	// the trickles too, later: this holds the API's own answer to them.
	srv := &http.Server{Handler: HTTPHandler(API{}), ReadHeaderTimeout: 10 * time.Second,
		WriteTimeout: ResponseWriteMax, IdleTimeout: 2 * time.Minute, ConnState: ln.ConnState}
	go srv.Serve(ln)
	defer srv.Close()
	for _, req := range []string{
		"POST /v1/agents HTTP/1.1\r\nHost: x\r\nContent-Length: 200000\r\n\r\n",
		"GET /v1/node HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
	} {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, req)
		go func() { // a byte every 100 ms, until the node closes the connection
			for {
				time.Sleep(100 * time.Millisecond)
				if _, err := c.Write([]byte("1")); err != nil {
					return
				}
			}
		}()
	}
	client := &http.Client{Timeout: 2 * time.Second}
	for deadline := time.Now().Add(30 * time.Second); ; {
		resp, err := client.Get("http://" + inner.Addr().String() + "/healthz-not-here")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound {
				t.Fatalf("a new client beside the trickles: %d, want the API's 404", resp.StatusCode)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a new client was never answered beside two connections trickling bodies: %v", err)
		}
	}
}

// TestDigestWaitingForAPositionHoldsNoOther: a digest asked at a position
// the state has not reached waits for it (up to seqWaitMax) without
// keeping any other digest from being made. The digest's lock was taken
// before that wait, and every other request was told "a digest is being
// made" for as long: anyone could keep the endpoint at 503, and the
// audit failed (helper-76).
func TestDigestWaitingForAPositionHoldsNoOther(t *testing.T) {
	l, quiet := openBenchLog(t)
	reg, credits := ledgerFolds(t)
	runner := projections.NewRunner(l, quiet, reg, credits)
	// Caught up, then stopped: the events appended next are durable, and
	// never applied, so a digest at the last of them waits.
	stop, stopRunner := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { runner.Run(stop); close(stopped) }()
	<-runner.Ready()
	stopRunner()
	<-stopped
	appendEvents(t, l, 1000)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := HTTPHandler(API{Log: l, Runner: runner, Credits: credits, Registry: reg})
	waiting := make(chan int, 1)
	go func() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/ledger/digest?seq=1000", nil).WithContext(ctx))
		waiting <- rec.Code
	}()
	// Other digests, for a second while the first waits (until it is
	// cancelled, or seqWaitMax): each is answered at once.
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/ledger/digest", nil))
		if rec.Code != http.StatusOK {
			t.Fatalf("a digest beside one waiting for seq 1000: %d %s; want 200", rec.Code, rec.Body.String())
		}
	}
	select {
	case code := <-waiting:
		t.Fatalf("the digest at seq 1000 was answered %d before the state got there", code)
	default:
	}
}

// appendEvents appends n events to l and waits until they are durable,
// so that reads may ask for their positions (the API refuses positions no
// acknowledgement named).
func appendEvents(t *testing.T, l *events.Log, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ps := make([]*events.Pending, n)
	for i := range ps {
		id := fmt.Sprintf("01HTTPTEST%016d", i)
		ps[i] = l.Append(ctx, &events.Envelope{ID: id, MsgID: id, Type: "agent.announce", From: "agent://x.local",
			Transport: events.TransportUDP, ReceivedAt: time.Now().UTC(), Body: []byte(`{}`)})
	}
	for _, p := range ps {
		if _, err := p.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// runFor runs r in the background until the test ends: at its cleanup the
// run is cancelled and waited for, before the cleanups registered earlier
// stop the server under it (helper-110: runners outlived their tests).
func runFor(t *testing.T, ctx context.Context, cancel context.CancelFunc, r *projections.Runner) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// runUntilReady runs runner until the test ends and waits until it has
// caught up with its log; the context returned ends with the test.
func runUntilReady(t *testing.T, runner *projections.Runner) context.Context {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	runFor(t, ctx, cancel, runner)
	select {
	case <-runner.Ready():
	case <-time.After(20 * time.Second):
		t.Fatal("the runner never caught up with its log")
	}
	return ctx
}

// TestScoreNumber: scores are written as the exact decimal of their
// millionths.
func TestScoreNumber(t *testing.T) {
	for _, tc := range []struct {
		in   int64
		want string
	}{{0, "0"}, {500_000, "0.5"}, {850_000, "0.85"}, {37_500, "0.0375"}, {1, "0.000001"}, {1_000_000, "1"}} {
		if got := string(scoreNumber(tc.in)); got != tc.want {
			t.Errorf("scoreNumber(%d) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// TestAddressesThatAreNoneAre400: a path whose SCHEME/NAME is no AGLX
// address is refused, not looked up as written (helper-88: a score of 0.5
// for foo/bar, "no account" for an address in capitals).
func TestAddressesThatAreNoneAre400(t *testing.T) {
	l, quiet := openBenchLog(t)
	stats := projections.NewStats()
	reg, credits := ledgerFolds(t)
	runner := projections.NewRunner(l, quiet, stats, reg, credits)
	runUntilReady(t, runner)
	h := HTTPHandler(API{Log: l, Runner: runner, Stats: stats, Credits: credits, Registry: reg, Edge: New(l, Config{}, quiet)})
	for _, tc := range []struct {
		path string
		code int
	}{
		{"/v1/agents/foo/bar", http.StatusBadRequest},
		{"/v1/accounts/agent/bob%20local", http.StatusBadRequest},
		{"/v1/accounts/agent/bob.local", http.StatusNotFound},     // an address, with no account
		{"/v1/accounts/agent/Bob.local", http.StatusNotFound},     // the same address in other letters
		{"/v1/reputation/Agent/bob.local", http.StatusBadRequest}, // a scheme is lower case, as in FROM
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.path, nil))
		if rec.Code != tc.code {
			t.Errorf("GET %s: %d %s; want %d", tc.path, rec.Code, rec.Body.String(), tc.code)
		}
	}
}

// TestACachedDigestSaysItsOwnPosition: a digest made earlier and answered
// again says, in Aglx-Applied-Seq as in its body, the position it was
// made at, not where the state is now (helper-88).
func TestACachedDigestSaysItsOwnPosition(t *testing.T) {
	l, quiet := openBenchLog(t)
	reg, credits := ledgerFolds(t)
	runner := projections.NewRunner(l, quiet, reg, credits)
	ctx := runUntilReady(t, runner)
	h := HTTPHandler(API{Log: l, Runner: runner, Credits: credits, Registry: reg})
	get := func(path string) (string, projections.Digest) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		var d projections.Digest
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &d) != nil {
			t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body.String())
		}
		return rec.Header().Get("Aglx-Applied-Seq"), d
	}
	appendEvents(t, l, 1)
	if err := runner.WaitFor(ctx, 1); err != nil {
		t.Fatal(err)
	}
	get("/v1/ledger/digest?seq=1")
	appendEvents(t, l, 1)
	if err := runner.WaitFor(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if hdr, d := get("/v1/ledger/digest?seq=1"); d.AppliedSeq != 1 || hdr != "1" {
		t.Fatalf("the digest made at seq 1, answered again at 2: body at %d, Aglx-Applied-Seq %q; want 1 and 1", d.AppliedSeq, hdr)
	}
}

// TestHealthAsksTheStreamAtMostSoOften: /healthz reuses the stream's
// answer for probeFresh, so that a client asking thousands of times a
// second does not put as many questions to JetStream (helper-88); an
// answer cut short by the caller's own context is not reused.
func TestHealthAsksTheStreamAtMostSoOften(t *testing.T) {
	c := &probeCache{}
	asked := 0
	probe := func(ctx context.Context) (uint64, error) {
		asked++
		return uint64(asked), ctx.Err()
	}
	ctx := context.Background()
	for range 1000 {
		if last, err := c.lastSeq(ctx, probe); err != nil || last != 1 {
			t.Fatalf("a reused answer: %d %v", last, err)
		}
	}
	if asked != 1 {
		t.Fatalf("1,000 health checks at once asked the stream %d times; want 1", asked)
	}
	c = &probeCache{}
	cut, cancel := context.WithCancel(ctx)
	cancel()
	c.lastSeq(cut, probe)
	if last, err := c.lastSeq(ctx, probe); err != nil || last != 3 {
		t.Fatalf("after an answer cut short by its caller: %d %v; want a fresh one", last, err)
	}
}

// ledgerFolds is a registry and a ledger for a node with a key of its own.
func ledgerFolds(t *testing.T) (*projections.Registry, *projections.Credits) {
	t.Helper()
	_, nodeKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	reg := projections.NewRegistry(projections.RegistryConfig{NodeURI: "registry://localhost", NodeKey: nodeKey})
	return reg, projections.NewCredits("registry://localhost", reg, nil)
}
