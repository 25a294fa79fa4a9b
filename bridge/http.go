package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/ledger"
	"github.com/aglx/ledger/projections"
	"github.com/aglx/ledger/protocol"
)

// Bounds of the HTTP API.
const (
	healthTimeout = 2 * time.Second // the health check's question to JetStream
)

// seqWaitMax is how long a read waits for ?seq=N; a variable only so that
// a test need not wait it out.
var seqWaitMax = SeqWaitMax

// SeqWaitMax is how long a read waits for the projections to reach its
// ?seq=N, or to end their replay after a start; a client should wait
// longer than this for an answer.
const SeqWaitMax = 10 * time.Second

// requestBodyWait is how long the HTTP API lets a request's body take to
// arrive, which it never reads.
const requestBodyWait = time.Second

// RequestReadMax bounds the reading of a whole request, headers and
// body, on every connection (http.Server.ReadTimeout).
const RequestReadMax = 10 * time.Second

// ResponseWriteMax is how long the HTTP API gives itself to write a
// response: the server's WriteTimeout, counted from the request, and
// counted again once a read of the state has its answer. The server's own
// deadline runs from the request's arrival, so a ledger digest that took
// longer than it (about 2.4 million postings here) was made and then cut,
// and the audit never got it.
const ResponseWriteMax = time.Minute

// replayWaitMax is how long a read without ?seq= waits for the replay after
// a start; a variable only so that a test need not wait it out.
var replayWaitMax = seqWaitMax

// Retry-After of the API's 503s whose wait the node cannot know (the
// ledger digest's wait between two digests it knows, and says). Each is a
// second: the refusals cost the node little, and a longer wait would keep
// a client that honours it from an answer it could have had sooner.
const (
	// replayRetryAfter answers a read that gave up waiting for the
	// projections to reach a position (?seq=, or the end of the replay
	// after a start), and /readyz while they replay. How long a replay or
	// a lag lasts depends on the log and the load, which the node does not
	// estimate; the read waited seqWaitMax already, and the next waits
	// again on the node's side, so a second between asks is only there to
	// keep a client from spinning.
	replayRetryAfter = time.Second
	// waitersRetryAfter answers a read refused because waitersMax reads
	// wait for a position already: a place is free as soon as one of them
	// is answered, when the fold moves on, usually within milliseconds,
	// at the latest after seqWaitMax.
	waitersRetryAfter = time.Second
	// digestBusyRetryAfter answers a ledger digest asked while another is
	// being made: the making takes from milliseconds to many seconds with
	// the ledger's size, unknown until it is done, and the digest being
	// made may be the one asked for, answered again once made (aglx audit
	// asks again once a second).
	digestBusyRetryAfter = time.Second
	// logDownRetryAfter answers /healthz and /readyz while the log takes no
	// appends: the cause may pass within a second (NATS back: the log asks
	// for the write-ahead stream's state once a second) or need an
	// operator (a full disk), and a health check costs one cached question
	// to the stream (probeFresh).
	logDownRetryAfter = time.Second
)

// waitersMax bounds the reads waiting for a log position (?seq=, or the
// replay after a start). A waiting read holds an HTTP slot that no idle
// rule frees, and 256 of them kept /healthz from being answered for as
// long as they were sent again (helper-69); past the bound a read gets 503
// at once, so most slots stay free for quick answers.
const waitersMax = 64 // reads

// API is what the HTTP handlers read. Every read of projection state goes
// through Runner.View, so it sees one log position, which it reports.
type API struct {
	Log      *events.Log
	Runner   *projections.Runner
	Stats    *projections.Stats
	Credits  *projections.Credits
	Registry *projections.Registry
	// Handshakes, if set, serves /v1/handshakes; Reputation,
	// /v1/reputation.
	Handshakes *projections.Handshakes
	Reputation *projections.Reputation
	Edge       *Server
	Relay      *Relay // nil when the relay is off
	Node       NodeInfo
	// Certs, when the node serves TLS, gives NodeInfo.TLSPin: the
	// certificate may be renewed while the node runs.
	Certs *Certs
	// StoreFree, if set, is the free space under the store, for
	// aglx_store_free_bytes; an error leaves the gauge out.
	StoreFree func() (uint64, error)
	// StoreUsage, if set, is what the embedded store's streams hold and
	// JetStream's limit on that, for aglx_store_used_bytes and
	// aglx_store_limit_bytes (a limit of 0 leaves both out).
	StoreUsage func() (used, limit int64)
	// Federations are the node's pushes to peer registries (--sync-to),
	// for aglx_federation_* on /metrics.
	Federations []*Federation
	// SavedState, if set, is where the folds' saved state stands (the
	// sequence it was saved at, as far as this run knows) and how many
	// background saves failed, for aglx_fold_state_*.
	SavedState func() (seq, failures uint64)

	waiters chan struct{} // reads waiting for a position (waitersMax); made by HTTPHandler
	probe   *probeCache   // /healthz's last question to the stream; made by HTTPHandler
}

// probeCache keeps /healthz's last answer from the event stream for
// probeFresh: every call asked JetStream for the stream's info, and one
// client asked 12,000 times a second, slowing every ack (helper-88). One
// question is in flight at a time; callers that come meanwhile wait for
// its answer.
type probeCache struct {
	mu   sync.Mutex
	at   time.Time
	last uint64
	err  error
}

// probeFresh is how long /healthz reuses the stream's last answer.
const probeFresh = 100 * time.Millisecond

// lastSeq is probe's answer (Log.ProbeLastSeq), asked at most once per
// probeFresh. An answer cut short by the caller's own context is not kept
// for the others.
func (c *probeCache) lastSeq(ctx context.Context, probe func(context.Context) (uint64, error)) (uint64, error) {
	if c == nil {
		return probe(ctx)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.at) < probeFresh {
		return c.last, c.err
	}
	last, err := probe(ctx)
	if err != nil && ctx.Err() != nil {
		return last, err
	}
	c.last, c.err, c.at = last, err, time.Now()
	return last, err
}

// NodeInfo is what GET /v1/node says about the node.
type NodeInfo struct {
	Name      string `json:"name"`
	PublicKey string `json:"public_key"`
	KeyID     string `json:"key_id"`
	TLS       string `json:"tls,omitempty"`
	TLSPin    string `json:"tls_sha256,omitempty"`
	// Version is the node's build (Version), so that an operator can
	// tell which one runs.
	Version string `json:"version"`
	// Fsync is what an ack promises: "always", every acked event is on
	// disk; the interval at which the store syncs (--fsync), within
	// which a power loss can lose acknowledged events; or "nats-server":
	// an operator's NATS, whose sync_interval decides. It was only in a
	// start line (helper-106).
	Fsync string `json:"fsync"`
}

// HTTPHandler serves the node's HTTP API. In paths an AGLX URI
// scheme://name is written scheme/name. Money is a JSON string throughout.
// Any read takes ?seq=N to wait until the projections have applied the
// event at N (read-your-writes after an ack). Every 503 carries
// Retry-After, in whole seconds (retryAfter).
//
//	GET /healthz                                   200 when the log answers, else 503
//	GET /readyz                                    as /healthz, and 503 while the projections replay
//	GET /metrics                                   counters in the Prometheus text format
//	GET /v1/node                                   name, public key, TLS fingerprint, version
//	GET /v1/stats                                  counts by TYPE, sender, transport; edge and relay counters
//	GET /v1/accounts/{scheme}/{name}               balance, available, pending, totals
//	GET /v1/accounts/{scheme}/{name}/entries       postings with running balances (?after=SEQ&limit=N)
//	GET /v1/ledger/mismatches                      agents' claims that disagree with the ledger
//	GET /v1/ledger/digest                          sha256 of the ledger's snapshot, for aglx audit
//	GET /v1/agents                                 registry (?status=&capability=&zone=&after=&limit=); with a status no agent has, the statuses in use
//	GET /v1/agents/{scheme}/{name}                 entry, key ids, zones, status history
//	GET /v1/zones/{zone}                           a zone and its members (?after=URI&limit=N, at most 1,000)
//	GET /v1/mentors                                the mentor directory (?after=URI&limit=N, at most 1,000)
//	GET /v1/handshakes                             requests between agents and their answers (?agent=URI&state=S&kind=TYPE&after=SEQ&limit=N)
//	GET /v1/handshakes/{seq}                       the handshake the request at seq opened
//	GET /v1/reputation                             the reputation model's totals
//	GET /v1/reputation/{scheme}/{name}             an agent's score, ratings and last rating's seq
func HTTPHandler(api API) http.Handler {
	api.waiters = make(chan struct{}, waitersMax)
	api.probe = &probeCache{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", api.health)
	mux.HandleFunc("GET /readyz", api.ready)
	mux.HandleFunc("GET /metrics", api.metrics)
	mux.HandleFunc("GET /v1/node", func(w http.ResponseWriter, r *http.Request) {
		info := api.Node
		if api.Certs != nil {
			info.TLSPin = api.Certs.Fingerprint()
		}
		writeJSON(w, http.StatusOK, info)
	})
	mux.HandleFunc("GET /v1/stats", api.view(func(r *http.Request) (int, any) {
		snap, err := api.Stats.Snapshot()
		if err != nil {
			return http.StatusInternalServerError, errBody(err.Error())
		}
		out := map[string]any{"log": json.RawMessage(snap), "bridge": api.Edge.Counters()}
		if api.Relay != nil {
			out["relay"] = api.Relay.Counters()
		}
		return http.StatusOK, out
	}))
	mux.HandleFunc("GET /v1/accounts/{scheme}/{name}", api.view(func(r *http.Request) (int, any) {
		// Holds expire by event time in the fold; a reader asking now wants
		// the ones past their expiry shown as released already.
		v, ok := api.Credits.L.AccountAt(uriOf(r), time.Now())
		if !ok {
			return http.StatusNotFound, errBody("no account for " + uriOf(r))
		}
		return http.StatusOK, v
	}))
	mux.HandleFunc("GET /v1/accounts/{scheme}/{name}/entries", api.view(func(r *http.Request) (int, any) {
		if _, ok := api.Credits.L.Account(uriOf(r)); !ok {
			return http.StatusNotFound, errBody("no account for " + uriOf(r))
		}
		after, limit, err := pageOf(r, ledger.EntriesLimitMax)
		if err != nil {
			return http.StatusBadRequest, errBody(err.Error())
		}
		entries := api.Credits.L.Entries(uriOf(r), after, limit)
		if entries == nil {
			entries = []ledger.Entry{}
		}
		return http.StatusOK, map[string]any{"uri": uriOf(r), "entries": entries}
	}))
	mux.HandleFunc("GET /v1/ledger/mismatches", api.view(func(r *http.Request) (int, any) {
		after, limit, err := pageOf(r, ledger.EntriesLimitMax)
		if err != nil {
			return http.StatusBadRequest, errBody(err.Error())
		}
		ms := api.Credits.L.Mismatches(after, limit)
		if ms == nil {
			ms = []ledger.Mismatch{}
		}
		return http.StatusOK, map[string]any{"mismatches": ms}
	}))
	mux.HandleFunc("GET /v1/ledger/digest", api.viewAt(api.ledgerDigest(&ledgerDigests{})))
	mux.HandleFunc("GET /v1/agents", api.view(func(r *http.Request) (int, any) {
		q := r.URL.Query()
		limit, err := limitOf(q.Get("limit"))
		if err != nil {
			return http.StatusBadRequest, errBody(err.Error())
		}
		f := projections.AgentFilter{Status: q.Get("status"), Capability: q.Get("capability"), Zone: q.Get("zone"), After: q.Get("after"), Limit: limit}
		if n := len(f.Status); n > protocol.LabelSizeMax {
			return http.StatusBadRequest, errBody(fmt.Sprintf("status= is %d bytes; an agent's status is at most %d", n, protocol.LabelSizeMax))
		}
		agents, next := api.Registry.Agents(f)
		out := map[string]any{"agents": agents}
		if next != "" {
			out["next"] = next // the page looked at its bound of agents: go on with ?after=
		}
		// A status is the agent's own word, so one that matches nothing
		// cannot be refused as unknown: it may be a typo or a word no agent
		// uses at the moment. The answer lists the ones in use instead, so
		// that a client can tell (aglx agents makes it an error).
		if f.Status != "" && len(agents) == 0 && next == "" {
			if known, held := api.Registry.StatusKnown(f.Status); !known {
				out["statuses"] = held
			}
		}
		return http.StatusOK, out
	}))
	mux.HandleFunc("GET /v1/agents/{scheme}/{name}", api.view(func(r *http.Request) (int, any) {
		a, ok := api.Registry.Agent(uriOf(r))
		if !ok {
			return http.StatusNotFound, errBody("no agent " + uriOf(r))
		}
		return http.StatusOK, a
	}))
	mux.HandleFunc("GET /v1/zones/{zone}", api.view(func(r *http.Request) (int, any) {
		q := r.URL.Query()
		limit, err := limitOf(q.Get("limit"))
		if err != nil {
			return http.StatusBadRequest, errBody(err.Error())
		}
		z, ok := api.Registry.ZonePage(r.PathValue("zone"), q.Get("after"), limit)
		if !ok {
			return http.StatusNotFound, errBody("no zone " + r.PathValue("zone"))
		}
		return http.StatusOK, z
	}))
	mux.HandleFunc("GET /v1/mentors", api.view(func(r *http.Request) (int, any) {
		q := r.URL.Query()
		limit, err := limitOf(q.Get("limit"))
		if err != nil {
			return http.StatusBadRequest, errBody(err.Error())
		}
		if limit <= 0 || limit > projections.MentorsPageMax {
			limit = projections.MentorsPageMax
		}
		return http.StatusOK, map[string]any{"mentors": api.Registry.MentorsPage(q.Get("after"), limit)}
	}))
	api.handshakeRoutes(mux)
	api.reputationRoutes(mux)
	// Every other path: an answer in JSON, as the rest of the API's.
	mux.HandleFunc("GET /", notFound)
	return readOnly(mux)
}

// endpoints names the API's paths, for the answer to a path that is none.
const endpoints = "/healthz, /readyz, /metrics, /v1/node, /v1/stats, /v1/accounts/SCHEME/NAME, /v1/accounts/SCHEME/NAME/entries, " +
	"/v1/ledger/mismatches, /v1/ledger/digest, /v1/agents, /v1/agents/SCHEME/NAME, /v1/zones/ZONE, /v1/mentors, /v1/handshakes, /v1/handshakes/SEQ, /v1/reputation, /v1/reputation/SCHEME/NAME"

// addressHint is how an AGLX address goes into a path.
const addressHint = "an address such as agent://bob.local is written agent/bob.local"

// notFound answers a path that is no endpoint.
func notFound(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusNotFound, errBody(fmt.Sprintf("no such endpoint: %s %s; the endpoints are %s, and in them %s (docs/OPERATIONS.md)",
		r.Method, r.URL.Path, endpoints, addressHint)))
}

// uncleanPath reports whether p has an empty, "." or ".." segment, which
// the mux would answer with a redirect in HTML to another path.
func uncleanPath(p string) bool {
	if strings.Contains(p, "//") {
		return true
	}
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

// readOnly answers every method but GET and HEAD itself, in JSON: 405 on a
// path the API serves, 404 on one it does not (the mux said 405, in plain
// text, for both). A path with an empty, "." or ".." segment gets 400 in
// JSON too: the mux redirected it, in HTML, to a cleaned path, and
// /v1/accounts/agent://bob.local became /v1/accounts/agent:/bob.local and
// then "no account for agent:://bob.local", as if the account did not
// exist (helper-73).
func readOnly(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength != 0 || len(r.TransferEncoding) > 0 {
			// The API reads no body, but the server drains one it was
			// sent before it answers, for as long as the sender takes:
			// a few connections trickling bodies held every slot, and
			// /healthz went unanswered (helper-72). One second to send
			// it, then the connection closes.
			rc := http.NewResponseController(w)
			_ = rc.SetReadDeadline(time.Now().Add(requestBodyWait))
			w.Header().Set("Connection", "close")
		}
		if uncleanPath(r.URL.EscapedPath()) {
			writeJSON(w, http.StatusBadRequest, errBody(fmt.Sprintf("the path %s has an empty, \".\" or \"..\" part; %s", r.URL.Path, addressHint)))
			return
		}
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			mux.ServeHTTP(w, r)
			return
		}
		get := r.Clone(r.Context())
		get.Method = http.MethodGet
		if _, pattern := mux.Handler(get); pattern == "GET /" || pattern == "" {
			notFound(w, r)
			return
		}
		w.Header().Set("Allow", "GET, HEAD")
		writeJSON(w, http.StatusMethodNotAllowed, errBody(fmt.Sprintf("%s %s: the API only reads (GET)", r.Method, r.URL.Path)))
	})
}

func (api API) health(w http.ResponseWriter, r *http.Request) {
	status, body := api.healthOf(r.Context())
	if status != http.StatusOK {
		retryAfter(w.Header(), logDownRetryAfter)
	}
	writeJSON(w, status, body)
}

// ready is /healthz for a load balancer: 503 also while the projections
// replay the log after a start. A replaying node stores and acknowledges
// frames, but its answers to queries, and the folds' replies to frames,
// wait until it has caught up; /healthz says 200 then, so that a
// supervisor does not restart a node for replaying a long log.
func (api API) ready(w http.ResponseWriter, r *http.Request) {
	status, body := api.healthOf(r.Context())
	switch {
	case status != http.StatusOK:
		retryAfter(w.Header(), logDownRetryAfter)
	case body["projections"] != "ready":
		status, body["status"] = http.StatusServiceUnavailable, "replaying"
		retryAfter(w.Header(), replayRetryAfter)
	}
	writeJSON(w, status, body)
}

// caughtUp reports whether the projections have caught up with the log as
// it stood at start.
func (api API) caughtUp() bool {
	select {
	case <-api.Runner.Ready():
		return true
	default:
		return false
	}
}

// healthOf is /healthz's status and body.
func (api API) healthOf(rctx context.Context) (int, map[string]any) {
	ctx, cancel := context.WithTimeout(rctx, healthTimeout)
	defer cancel()
	var last uint64
	err := api.Log.StoreDown() // first: a store that is down does not answer the next question either
	if err == nil {
		// So is a lost connection: the question would wait out
		// healthTimeout and say only "context deadline exceeded".
		err = api.Log.ConnLost()
	}
	if err == nil {
		last, err = api.probe.lastSeq(ctx, api.Log.ProbeLastSeq) // healthTimeout bounds it
	}
	body := map[string]any{"status": "ok", "applied_seq": api.Runner.Applied(), "projections": "replaying"}
	if err == nil {
		// Only a position the log gave: with the store down, a 0 here
		// drew the log as dropping to nothing on a graph (helper-81).
		body["log_last_seq"] = last
	}
	if api.caughtUp() {
		body["projections"] = "ready"
	}
	status := http.StatusOK
	if err == nil {
		err = api.Log.Healthy()
	}
	if err != nil {
		status = http.StatusServiceUnavailable
		body["status"] = "log unavailable"
		body["error"] = err.Error()
	}
	return status, body
}

// view runs fn under Runner.View, after waiting for ?seq=N if given, and
// writes its answer with the log position it was read at.
func (api API) view(fn func(r *http.Request) (int, any)) http.HandlerFunc {
	return api.viewAt(func(r *http.Request, _ uint64) (int, any) { return fn(r) })
}

// afterView is an answer a read finishes after its View, off the fold's
// lock, from what it took under it.
type afterView func() (int, any)

// viewAt is view for handlers that report the log position themselves.
// (They must not ask the runner for it: View holds its read lock.) An
// answer of type afterView is finished after the View.
func (api API) viewAt(fn func(r *http.Request, applied uint64) (int, any)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		// Every answer says where the state stood, a refusal to wait too.
		w.Header().Set("Aglx-Applied-Seq", strconv.FormatUint(api.Runner.Applied(), 10))
		if scheme := r.PathValue("scheme"); scheme != "" {
			// An address that is none is the client's mistake: looked up
			// as written, /v1/reputation/foo/bar gave a score of 0.5 and
			// an account's path in capitals "no account" (helper-88).
			if _, err := protocol.ParseURI(scheme + "://" + r.PathValue("name")); err != nil {
				writeJSON(w, http.StatusBadRequest, errBody(fmt.Sprintf("%s/%s is not an address: %v (write agent://bob.local as agent/bob.local)", scheme, r.PathValue("name"), err)))
				return
			}
		}
		var seq uint64 // the position asked for; 0: none
		if s := r.URL.Query().Get("seq"); s != "" {
			var err error
			if seq, err = strconv.ParseUint(s, 10, 64); err != nil {
				writeJSON(w, http.StatusBadRequest, errBody("seq must be a sequence number"))
				return
			}
			if durable := api.Log.Durable(); seq > durable {
				// No acknowledgement named it: waiting would hold one of
				// the waiters' places for nothing (helper-88).
				writeJSON(w, http.StatusBadRequest, errBody(fmt.Sprintf("no acknowledgement has named seq %d: the log's last durable event is %d", seq, durable)))
				return
			}
			if seq == 0 {
				// Every state is at or past 0: read as without a position,
				// which waits for the replay after a start. A client that
				// sends its last ack's seq, 0 before its first, read a
				// funded account as missing (helper-88).
				r = stripSeq(r)
			}
		}
		if seq > 0 {
			if api.Runner.Applied() < seq {
				if !api.takeWaiter(w) {
					return
				}
				defer api.giveWaiter()
			}
			ctx, cancel := context.WithTimeout(r.Context(), seqWaitMax)
			defer cancel()
			if err := api.Runner.WaitFor(ctx, seq); err != nil {
				writeUnavailable(w, replayRetryAfter, fmt.Sprintf("the state has not reached seq %d within %s (it is at %d); ask again, or without ?seq=",
					seq, seqWaitMax, api.Runner.Applied()))
				return
			}
		} else if !api.caughtUp() {
			// A read without a position during the replay after a start
			// waits for it: answered at once, it showed a part of the
			// log's state, and "no account" for a funded one looked like
			// data lost (helper-61).
			if !api.takeWaiter(w) {
				return
			}
			defer api.giveWaiter()
			t := time.NewTimer(replayWaitMax)
			defer t.Stop()
			select {
			case <-api.Runner.Ready():
			case <-r.Context().Done():
				return
			case <-t.C:
				writeUnavailable(w, replayRetryAfter, fmt.Sprintf("the node is replaying its log after a start (applied seq %d); ask again once /readyz says ready, or read at a position with ?seq=",
					api.Runner.Applied()))
				return
			}
		}
		var status int
		var body any
		var at uint64
		api.Runner.View(func(applied uint64) { at = applied; status, body = fn(r, applied) })
		if finish, ok := body.(afterView); ok {
			status, body = finish()
		}
		if u, ok := body.(unavailable); ok {
			retryAfter(w.Header(), u.wait)
			body = errBody(u.msg)
		}
		if d, ok := body.(projections.Digest); ok {
			// A digest made earlier, answered again, is of its own
			// position, not the state's now (helper-88).
			at = d.AppliedSeq
		}
		// Not supported by every ResponseWriter (a test's recorder); the
		// server's deadline then stands.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(ResponseWriteMax))
		w.Header().Set("Aglx-Applied-Seq", strconv.FormatUint(at, 10))
		writeJSON(w, status, body)
	}
}

// ifKept is fn on a node that keeps the fold a path reads (kept), and on
// one that does not, 404 with without, the same at each of the fold's
// paths. It runs inside view, as fn would: an address that is none and
// a ?seq= not reached are answered first, as for every read.
func ifKept(kept bool, without string, fn func(r *http.Request) (int, any)) func(r *http.Request) (int, any) {
	if !kept {
		return func(*http.Request) (int, any) { return http.StatusNotFound, errBody(without) }
	}
	return fn
}

// stripSeq is r without its ?seq=.
func stripSeq(r *http.Request) *http.Request {
	q := r.URL.Query()
	q.Del("seq")
	r2 := r.Clone(r.Context())
	r2.URL.RawQuery = q.Encode()
	return r2
}

// takeWaiter takes one of the waitersMax places of reads that wait for a
// log position, or answers 503 and reports false when none is free.
func (api API) takeWaiter(w http.ResponseWriter) bool {
	if api.waiters == nil {
		return true
	}
	select {
	case api.waiters <- struct{}{}:
		return true
	default:
		writeUnavailable(w, waitersRetryAfter, fmt.Sprintf("%d reads are waiting for a log position already; ask again", waitersMax))
		return false
	}
}

// giveWaiter gives back the place takeWaiter took.
func (api API) giveWaiter() {
	if api.waiters != nil {
		<-api.waiters
	}
}

// uriOf rebuilds scheme://name from a path, written canonically as the
// node keys its state (agent/Worker05.local is agent://worker05.local);
// viewAt has refused a path whose address does not parse.
func uriOf(r *http.Request) string {
	raw := r.PathValue("scheme") + "://" + r.PathValue("name")
	if u, err := protocol.ParseURI(raw); err == nil {
		return u.String()
	}
	return raw
}

// pageOf reads ?after=SEQ&limit=N. A limit out of range is the largest
// page; a value that is not a number is the client's mistake, and is
// said so rather than read as nothing.
func pageOf(r *http.Request, max int) (uint64, int, error) {
	q := r.URL.Query()
	var after uint64
	if s := q.Get("after"); s != "" {
		var err error
		after, err = strconv.ParseUint(s, 10, 64)
		switch {
		case errors.Is(err, strconv.ErrRange):
			after = math.MaxUint64 // after every sequence there is
		case err != nil:
			return 0, 0, fmt.Errorf("after=%q: want a sequence number", s)
		}
	}
	limit, err := limitOf(q.Get("limit"))
	if err != nil {
		return 0, 0, err
	}
	if limit <= 0 || limit > max {
		limit = max
	}
	return after, limit, nil
}

// limitOf reads ?limit=N; absent is 0, for the default. Zero or less is
// refused: limit=0 and limit=-1 answered the largest page, the opposite
// of what they ask.
func limitOf(s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if errors.Is(err, strconv.ErrRange) && !strings.HasPrefix(s, "-") {
		// A number, only too large for an int: the largest page, as any
		// limit beyond a page's size is.
		return math.MaxInt, nil
	}
	if err != nil {
		return 0, fmt.Errorf("limit=%q: want a number", s)
	}
	if n <= 0 {
		return 0, fmt.Errorf("limit=%q: want at least 1", s)
	}
	return n, nil
}

func errBody(msg string) map[string]string { return map[string]string{"error": msg} }

// unavailable is the body of a 503 that a handler under viewAt gives:
// viewAt writes wait as Retry-After, and msg as the error.
type unavailable struct {
	wait time.Duration
	msg  string
}

// writeUnavailable answers 503 with msg as the error, and wait as
// Retry-After.
func writeUnavailable(w http.ResponseWriter, wait time.Duration, msg string) {
	retryAfter(w.Header(), wait)
	writeJSON(w, http.StatusServiceUnavailable, errBody(msg))
}

// retryAfter sets Retry-After to wait in whole seconds, rounded up, so
// that a client that honours it does not ask before the wait is over, and
// at least 1: the header counts whole seconds, and 0 asks again at once.
func retryAfter(h http.Header, wait time.Duration) {
	secs := max(1, int64((wait+time.Second-1)/time.Second))
	h.Set("Retry-After", strconv.FormatInt(secs, 10))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}
