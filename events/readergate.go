package events

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/time/rate"
)

// NodeConsumerPrefix starts the name of every consumer the node makes on
// its event stream; a random suffix follows. Readers may not create,
// change, look at or delete a consumer whose name starts with it, and the
// gate leaves such names out of the lists readers get: one that rewrote
// the node's consumer's filter had the node replay a subset of the log and
// call it whole, and one that deleted it stalled the node's reads. Pulls
// and acknowledgements go to JetStream directly, and the name they need is
// one a reader cannot learn. NATS's own generated names never hold a '-'.
const NodeConsumerPrefix = "aglx-node-"

// LegacyRelayConsumer is the durable consumer through which the relay kept
// its place before its cursor moved to a key-value bucket; a relay's first
// start takes its position over. It is reserved like the node's own
// consumers: a reader that made one had a new relay start far past every
// event, or at the start of the log.
const LegacyRelayConsumer = "AGLX_RELAY"

// ReaderConsumersMax is the most consumers the event stream may have
// before the gate refuses readers another one. Every reader's durable
// consumer stays until it is deleted, and a stream full of them would
// leave the node none for its own reads; the node's own are a handful.
const ReaderConsumersMax = 128

// ReaderAckPendingMax bounds a reader consumer's max_ack_pending, in
// messages: the server keeps each unacknowledged one in memory, some 50
// bytes, so readers' consumers hold at most about 400 MB between them.
// It is the older client API's default for pull subscriptions.
// ReaderPullsWaitingMax bounds max_waiting, in pull requests, at the
// server's default.
const (
	ReaderAckPendingMax   = 65_536
	ReaderPullsWaitingMax = 512
)

// ReaderRequestsPerSecond and ReaderRequestsBurst bound the JetStream API
// requests all readers together may make, in requests a second and at
// once. JetStream serves its API from one queue: four readers' connections
// sending message gets as fast as they could kept the node's own requests
// waiting past its timeouts, and the node could neither start nor read.
// Reading events goes through pulls, which this does not count.
const (
	ReaderRequestsPerSecond = 1000
	ReaderRequestsBurst     = 1000
)

// readerGateTimeout bounds the gate's own requests to JetStream.
const readerGateTimeout = 5 * time.Second

// readerGateWorkers is how many readers' requests the gate has at
// JetStream at once, so that one slow request does not hold up the
// others. readerGateQueue is how many wait for a worker, in requests;
// past it they are refused as busy. readerGateBufferBytes bounds what
// the gate's connection holds before it looks at a request, in bytes;
// past it the client drops them and their readers time out (a queue
// bounded by count alone held 4 GB of 7 MB bodies).
const (
	readerGateWorkers     = 4
	readerGateQueue       = 4096
	readerGateBufferBytes = 64 << 20
)

// Bounds on a reader's request, each refused past it before anything else
// is done with it. ReaderRequestBytesMax is a request's body, in bytes;
// ReaderSubjectBytesMax its subject after "$JS.API.", in bytes (the gate
// repeats the subject with a reply of its own, and one over the server's
// 4 KiB line closed the gate's connection for good). It holds a consumer
// request for the longest event subject, which nats.go puts in the
// request's subject when a consumer has one filter: two URIs of 253-byte
// names, each byte escaped to three, make subjects of some 1,600 bytes,
// and at 256 (until 2026-12-02) a reader could not follow a long agent
// name by its subject (helper-102; TestReadersFollowTheLongestSubject).
// ReaderFilterSubjectsMax, ReaderBackoffMax and ReaderPriorityGroupsMax
// bound a consumer's lists, in entries: JetStream compares every pair of
// filters, so 40,000 of them kept all its API workers busy for minutes and
// again at every start, and 3.9 million backoff steps were 45 MB a
// consumer.
const (
	ReaderRequestBytesMax   = 64 << 10
	ReaderSubjectBytesMax   = 2048
	ReaderFilterSubjectsMax = 64
	ReaderBackoffMax        = 64
	ReaderPriorityGroupsMax = 16
)

// gateAPI starts the subjects, in the node's account, that readers'
// JetStream API requests arrive on; what follows "$JS.API." follows it.
const gateAPI = "aglx.readers.api."

// readerGate checks every JetStream API request a reader makes before
// passing it on to JetStream, and passes the answer back. JetStream cannot
// tell a reader's request from the node's, and a consumer's config can
// name any subject in the node's account to deliver to; the write-ahead
// stream took such deliveries as its own and the node stopped.
//
// The gate admits pull consumers only, on the event stream only, with
// bounded pending acknowledgements, waiting pulls and pull expiry
// (ReaderPullExpiresMax), never one of the
// node's (NodeConsumerPrefix, LegacyRelayConsumer), and no more requests
// than ReaderRequestsPerSecond. A consumer request is decoded into the
// server's own type, checked there, and passed on as that type encodes
// it, so JetStream reads exactly what was checked: a body with its
// "config" twice had the gate check one and JetStream take the other.
type readerGate struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	stream string
	limit  *rate.Limiter
	work   chan *nats.Msg
	done   chan struct{} // closed by stop
	once   sync.Once
	// creating is held from counting the stream's consumers to creating
	// one: four workers counting at once let readers past the cap.
	creating sync.Mutex
	passed   atomic.Int64 // requests passed on to JetStream
}

// openReaderGate subscribes the gate on nc, a connection of the node's,
// and starts its workers; stop ends them.
func openReaderGate(nc *nats.Conn, stream string) (*readerGate, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("events: readers' gate: %w", err)
	}
	g := &readerGate{nc: nc, js: js, stream: stream, limit: rate.NewLimiter(ReaderRequestsPerSecond, ReaderRequestsBurst),
		work: make(chan *nats.Msg, readerGateQueue), done: make(chan struct{})}
	sub, err := nc.Subscribe(gateAPI+">", g.admit)
	if err == nil {
		err = sub.SetPendingLimits(readerGateQueue, readerGateBufferBytes)
	}
	if err == nil {
		err = nc.Flush()
	}
	if err != nil {
		return nil, fmt.Errorf("events: readers' gate: %w", err)
	}
	for range readerGateWorkers {
		go func() {
			for {
				select {
				case m := <-g.work:
					g.handle(m)
				case <-g.done:
					return
				}
			}
		}()
	}
	return g, nil
}

// stop ends the gate's workers.
func (g *readerGate) stop() { g.once.Do(func() { close(g.done) }) }

// admit takes a request off the connection: what is too large or too many
// is refused at once, the rest queued for a worker.
func (g *readerGate) admit(m *nats.Msg) {
	rest := strings.TrimPrefix(m.Subject, gateAPI)
	switch {
	case len(rest) > ReaderSubjectBytesMax:
		g.refuse(m, rest, gateRefusalCode, fmt.Errorf("the subject is longer than %d bytes after $JS.API.", ReaderSubjectBytesMax))
	case len(m.Data) > ReaderRequestBytesMax:
		g.refuse(m, rest, gateRefusalCode, fmt.Errorf("the request is larger than %d bytes", ReaderRequestBytesMax))
	case !g.limit.Allow():
		g.refuse(m, rest, gateBusyCode, fmt.Errorf("readers make more than %d JetStream requests a second; try again", ReaderRequestsPerSecond))
	default:
		select {
		case g.work <- m:
		default:
			g.refuse(m, rest, gateBusyCode, fmt.Errorf("%d readers' requests are waiting; try again", readerGateQueue))
		}
	}
}

// handle passes m on to JetStream and its answer back, or answers it with
// the reason it may not pass.
func (g *readerGate) handle(m *nats.Msg) {
	rest := strings.TrimPrefix(m.Subject, gateAPI)
	op, _, _ := cutConsumerOp(rest)
	if op == "CREATE" || op == "DURABLE.CREATE" {
		g.creating.Lock()
		defer g.creating.Unlock()
	}
	body, err := g.check(rest, m.Data)
	if err != nil {
		g.refuse(m, rest, gateRefusalCode, err)
		return
	}
	g.passed.Add(1)
	resp, err := g.nc.Request("$JS.API."+rest, body, readerGateTimeout)
	if err != nil {
		g.refuse(m, rest, gateBusyCode, fmt.Errorf("JetStream did not answer in %s (%v); the request may still take effect", readerGateTimeout, err))
		return
	}
	data := resp.Data
	if op == "NAMES" || op == "LIST" {
		data = hideNodeConsumers(data)
	}
	if m.Reply != "" {
		g.nc.Publish(m.Reply, data)
	}
}

// check checks a request: rest is its subject after "$JS.API.", data its
// body. It returns the body to pass on.
func (g *readerGate) check(rest string, data []byte) ([]byte, error) {
	switch rest {
	case "INFO", "STREAM.NAMES", "STREAM.LIST", "STREAM.MSG.GET." + g.stream:
		return data, nil
	case "STREAM.INFO." + g.stream:
		// Without its options: a list of every subject in the stream was
		// a megabyte an answer. Asked for, they are refused rather than
		// dropped, which answered "no subjects".
		var opts map[string]json.RawMessage
		if len(bytes.TrimSpace(data)) > 0 && json.Unmarshal(data, &opts) != nil {
			return nil, fmt.Errorf("the request is not a JSON object")
		}
		for k, v := range opts {
			if s := string(v); s != "null" && s != "false" && s != `""` && s != "0" {
				return nil, fmt.Errorf("readers get a stream's info without %q (its lists of every subject or every deleted sequence are megabytes an answer); read the events through a consumer", k)
			}
		}
		return nil, nil
	}
	op, target, ok := cutConsumerOp(rest)
	if !ok {
		return nil, fmt.Errorf("readers may not call $JS.API.%s", rest)
	}
	stream, name, _ := strings.Cut(target, ".")
	name, _, _ = strings.Cut(name, ".") // CREATE.<stream>.<name>.<filter>
	if stream != g.stream {
		return nil, fmt.Errorf("readers may use consumers of stream %s only", g.stream)
	}
	if err := checkReaderConsumerName(name); err != nil {
		return nil, err
	}
	if op != "CREATE" && op != "DURABLE.CREATE" {
		return data, nil
	}
	body, err := readerConsumerRequest(data)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), readerGateTimeout)
	defer cancel()
	st, err := g.js.Stream(ctx, g.stream)
	if err != nil {
		return nil, fmt.Errorf("the node cannot count the stream's consumers now: %v", err)
	}
	if n := st.CachedInfo().State.Consumers; n >= ReaderConsumersMax {
		return nil, fmt.Errorf("stream %s has %d consumers, the most it may have (ReaderConsumersMax); delete one first", g.stream, n)
	}
	return body, nil
}

// cutConsumerOp splits "CONSUMER.<op>.<stream>[...]" into op and the rest.
func cutConsumerOp(rest string) (op, target string, ok bool) {
	for _, o := range []string{"DURABLE.CREATE", "CREATE", "INFO", "DELETE", "NAMES", "LIST"} {
		if t, found := strings.CutPrefix(rest, "CONSUMER."+o+"."); found {
			return o, t, true
		}
		if rest == "CONSUMER."+o {
			return o, "", true
		}
	}
	return "", "", false
}

// checkReaderConsumerName refuses the node's consumers' names.
func checkReaderConsumerName(name string) error {
	if strings.HasPrefix(name, NodeConsumerPrefix) || name == LegacyRelayConsumer {
		return fmt.Errorf("consumer %q is the node's own (names starting with %q, and %q, are reserved)", name, NodeConsumerPrefix, LegacyRelayConsumer)
	}
	return nil
}

// readerConsumerFields are the consumer config fields a reader may set:
// everything a pull consumer has. deliver_subject (and the push-only
// fields with it) is what the gate is for, and "direct" and "sourcing" are
// the server's own. The names are matched exactly, so that a reader is
// told of a field the gate would drop.
var readerConsumerFields = map[string]bool{
	"name": true, "durable_name": true, "description": true,
	"deliver_policy": true, "opt_start_seq": true, "opt_start_time": true,
	"ack_policy": true, "ack_wait": true, "max_deliver": true, "backoff": true,
	"filter_subject": true, "filter_subjects": true, "replay_policy": true,
	"sample_freq": true, "max_waiting": true, "max_ack_pending": true,
	"headers_only": true, "max_batch": true, "max_expires": true, "max_bytes": true,
	"inactive_threshold": true, "num_replicas": true, "mem_storage": true,
	"metadata": true, "pause_until": true,
	"priority_policy": true, "priority_timeout": true, "priority_groups": true,
}

// readerConsumerRequest checks a CREATE request's body and returns the
// body to pass on: the request decoded into the server's own type, as
// that type encodes it. The checks that keep the node safe are on the
// decoded values; the checks on the JSON's field names before them only
// name a mistake.
func readerConsumerRequest(data []byte) ([]byte, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, fmt.Errorf("the request is not a JSON object: %v", err)
	}
	for k := range top {
		switch k {
		case "stream_name", "config", "action", "pedantic":
		default:
			return nil, fmt.Errorf("the request has a field %q the node does not pass on", k)
		}
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(top["config"], &fields); err != nil || fields == nil {
		return nil, fmt.Errorf("the request has no consumer config object")
	}
	if _, push := fields["deliver_subject"]; push {
		return nil, fmt.Errorf("readers may make pull consumers only (deliver_subject)")
	}
	for k := range fields {
		if !readerConsumerFields[k] {
			return nil, fmt.Errorf("the consumer config has a field %q the node does not pass on", k)
		}
	}
	var req server.CreateConsumerRequest
	if err := json.Unmarshal(data, &req); err != nil {
		return nil, fmt.Errorf("the request does not decode: %v", err)
	}
	c := &req.Config
	if c.DeliverSubject != "" || c.DeliverGroup != "" || c.FlowControl || c.Heartbeat != 0 || c.RateLimit != 0 {
		return nil, fmt.Errorf("readers may make pull consumers only (deliver_subject)")
	}
	if c.Direct || c.Sourcing {
		return nil, fmt.Errorf("readers may not make the server's own consumers (direct, sourcing)")
	}
	for _, name := range []string{c.Name, c.Durable} {
		if err := checkReaderConsumerName(name); err != nil {
			return nil, err
		}
	}
	if c.MaxAckPending < 0 || c.MaxAckPending > ReaderAckPendingMax {
		return nil, fmt.Errorf("max_ack_pending must be from 0 (the server's default) to %d, not %d", ReaderAckPendingMax, c.MaxAckPending)
	}
	if c.MaxWaiting < 0 || c.MaxWaiting > ReaderPullsWaitingMax {
		return nil, fmt.Errorf("max_waiting must be from 0 (the server's default) to %d, not %d", ReaderPullsWaitingMax, c.MaxWaiting)
	}
	if c.MaxRequestExpires < 0 || c.MaxRequestExpires > ReaderPullExpiresMax {
		return nil, fmt.Errorf("max_expires must be at most %s (0 gives that), not %s: the server keeps the way back to a pull for %s", ReaderPullExpiresMax, c.MaxRequestExpires, ReaderPullResponseThreshold)
	}
	if c.MaxRequestExpires == 0 {
		c.MaxRequestExpires = ReaderPullExpiresMax
	}
	if c.Durable == "" && c.InactiveThreshold > ReaderEphemeralInactiveMax {
		c.InactiveThreshold = ReaderEphemeralInactiveMax // 0 is the server's 5 s, shorter
	}
	lists := []struct {
		field    string
		n, limit int
	}{
		{"filter_subjects", len(c.FilterSubjects), ReaderFilterSubjectsMax},
		{"backoff", len(c.BackOff), ReaderBackoffMax},
		{"priority_groups", len(c.PriorityGroups), ReaderPriorityGroupsMax},
	}
	for _, l := range lists {
		if l.n > l.limit {
			return nil, fmt.Errorf("%s has %d entries; at most %d", l.field, l.n, l.limit)
		}
	}
	body, err := json.Marshal(&req)
	if err != nil {
		return nil, fmt.Errorf("the request does not encode: %v", err)
	}
	return body, nil
}

// ReaderEphemeralInactiveMax bounds how long a reader's consumer without a
// durable name outlives its last pull: the gate lowers a longer
// inactive_threshold to it, and leaves none (the server's 5 s) as it is
// (a pull waiting counts as activity, so a reader that follows keeps its
// consumer). nats.go's ordered consumer, which EVENTS.md
// recommends, asks for 5 minutes, and every reader's consumers share the
// stream's ReaderConsumersMax: scripts that started one every 2.4 s and
// went away locked every reader out, `aglx audit` included (helper-102).
// Durable consumers are the reader's to delete.
const ReaderEphemeralInactiveMax = 2 * ReaderPullExpiresMax

// The statuses of the gate's refusals: forbidden, and busy (too many
// requests, or JetStream did not answer in time).
const (
	gateRefusalCode = 403
	gateBusyCode    = 503
)

// refuse answers a request the way JetStream answers one it refuses, so
// that clients show the reason.
func (g *readerGate) refuse(m *nats.Msg, rest string, code int, why error) {
	if m.Reply == "" {
		return
	}
	body, _ := json.Marshal(map[string]any{
		"type":  responseType(rest),
		"error": map[string]any{"code": code, "description": "aglx: " + why.Error()},
	})
	g.nc.Publish(m.Reply, body)
}

// responseType is the type JetStream gives its answer to a request on
// "$JS.API." + rest.
func responseType(rest string) string {
	t := "io.nats.jetstream.api.v1."
	switch op, _, _ := cutConsumerOp(rest); {
	case op == "INFO":
		return t + "consumer_info_response"
	case op == "DELETE":
		return t + "consumer_delete_response"
	case op == "NAMES":
		return t + "consumer_names_response"
	case op == "LIST":
		return t + "consumer_list_response"
	case op != "":
		return t + "consumer_create_response"
	case rest == "INFO":
		return t + "account_info_response"
	case rest == "STREAM.NAMES":
		return t + "stream_names_response"
	case rest == "STREAM.LIST":
		return t + "stream_list_response"
	case strings.HasPrefix(rest, "STREAM.MSG.GET."):
		return t + "stream_msg_get_response"
	}
	return t + "stream_info_response"
}

// hideNodeConsumers takes the node's consumers out of a CONSUMER.NAMES or
// CONSUMER.LIST answer. An answer it cannot read is passed on as it is:
// an error's.
func hideNodeConsumers(data []byte) []byte {
	var resp map[string]json.RawMessage
	if json.Unmarshal(data, &resp) != nil || resp["consumers"] == nil {
		return data
	}
	var list []json.RawMessage
	if json.Unmarshal(resp["consumers"], &list) != nil {
		return data
	}
	kept := list[:0]
	for _, c := range list {
		var name string
		if json.Unmarshal(c, &name) != nil { // LIST: an info object
			var info struct {
				Name string `json:"name"`
			}
			json.Unmarshal(c, &info)
			name = info.Name
		}
		if checkReaderConsumerName(name) == nil {
			kept = append(kept, c)
		}
	}
	if len(kept) == len(list) {
		return data
	}
	var total int
	if json.Unmarshal(resp["total"], &total) == nil {
		resp["total"], _ = json.Marshal(max(0, total-(len(list)-len(kept))))
	}
	resp["consumers"], _ = json.Marshal(kept)
	out, err := json.Marshal(resp)
	if err != nil {
		return data
	}
	return out
}
