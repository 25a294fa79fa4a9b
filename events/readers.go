package events

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ReadersAccount is the NATS account of every client that connects to the
// embedded server without credentials. The node and its streams live in
// the server's global account; readers reach them only through what that
// account exports to this one: a few read-only JetStream requests, the
// events' subjects, and the readers' gate (readerGate) for everything
// that makes or uses a consumer.
//
// Until 2026-11-30 readers shared the node's account, kept in check by a
// list of subjects they could not publish to. A list cannot close one door:
// any request may name any reply subject, and JetStream sends its answer
// there from inside the account, where the event stream took it as an
// event (a reader could make the node lose an acknowledged event that
// way, events.errForeign). Across accounts, a reply subject is mapped on
// its way back to the reader's account, so no answer can land in the
// node's streams, its key-value buckets or its inboxes.
const ReadersAccount = "AGLX_READERS"

// NodeConsumerPrefix starts the name of every consumer the node makes on
// its event stream; a random suffix follows. Readers may not create,
// change, look at or delete a consumer whose name starts with it, and the
// gate leaves such names out of the lists readers get: one that rewrote
// the node's consumer's filter had the node replay a subset of the log and
// call it whole, and one that deleted it stalled the node's reads. Pulls
// and acknowledgements go to JetStream directly, as they must (only the
// server may set the reply subjects they use), and the name they need is
// one a reader cannot learn. NATS's own generated names never hold a '-'.
const NodeConsumerPrefix = "aglx-node-"

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

// readerGateTimeout bounds the gate's own requests to JetStream.
const readerGateTimeout = 5 * time.Second

// gateAPI starts the subjects, in the node's account, that readers'
// consumer requests arrive on; what follows "$JS.API." follows it.
const gateAPI = "aglx.readers.api."

// readerImport maps a subject readers publish on, in their account, to one
// in the node's account.
type readerImport struct {
	from, to string
	streamed bool // the answer is many messages (a pull request's)
}

// readerImports are all the ways a reader reaches the node's account. The
// read-only requests, pulls and acknowledgements go straight to JetStream,
// and only for the event stream; the requests that make, change, show,
// list or delete a consumer go through the gate. Nothing here creates,
// changes, purges or deletes a stream, reads the write-ahead stream or
// touches a key-value bucket.
func readerImports(stream string) []readerImport {
	direct := func(s string) readerImport { return readerImport{from: s, to: s} }
	return []readerImport{
		direct("$JS.API.INFO"),
		direct("$JS.API.STREAM.NAMES"),
		direct("$JS.API.STREAM.LIST"),
		direct("$JS.API.STREAM.INFO." + stream),
		direct("$JS.API.STREAM.MSG.GET." + stream),
		direct("$JS.API.DIRECT.GET." + stream),
		direct("$JS.API.DIRECT.GET." + stream + ".>"),
		{from: "$JS.API.CONSUMER.MSG.NEXT." + stream + ".*", to: "$JS.API.CONSUMER.MSG.NEXT." + stream + ".*", streamed: true},
		direct("$JS.ACK." + stream + ".>"),
		{from: "$JS.API.CONSUMER.NAMES." + stream, to: gateAPI + "CONSUMER.NAMES." + stream},
		{from: "$JS.API.CONSUMER.LIST." + stream, to: gateAPI + "CONSUMER.LIST." + stream},
		{from: "$JS.API.CONSUMER.CREATE." + stream, to: gateAPI + "CONSUMER.CREATE." + stream},
		{from: "$JS.API.CONSUMER.CREATE." + stream + ".>", to: gateAPI + "CONSUMER.CREATE." + stream + ".>"},
		{from: "$JS.API.CONSUMER.DURABLE.CREATE." + stream + ".*", to: gateAPI + "CONSUMER.DURABLE.CREATE." + stream + ".*"},
		{from: "$JS.API.CONSUMER.INFO." + stream + ".*", to: gateAPI + "CONSUMER.INFO." + stream + ".*"},
		{from: "$JS.API.CONSUMER.DELETE." + stream + ".*", to: gateAPI + "CONSUMER.DELETE." + stream + ".*"},
	}
}

// eventSubjects are the subjects the node's account exports to readers as a
// stream, for clients that subscribe to events as they are published.
const eventSubjects = "aglx.ev.>"

// shareWithReaders sets up the exports and imports between the node's
// account and ReadersAccount on a server made but not started.
func shareWithReaders(ns *server.Server, stream string) error {
	readers, err := ns.LookupAccount(ReadersAccount)
	if err != nil {
		return fmt.Errorf("events: server: the readers' account: %w", err)
	}
	node := ns.GlobalAccount()
	to := []*server.Account{readers}
	for _, im := range readerImports(stream) {
		rt := server.Singleton
		if im.streamed {
			rt = server.Streamed
		}
		if err := node.AddServiceExportWithResponse(im.to, rt, to); err != nil {
			return fmt.Errorf("events: server: export %s: %w", im.to, err)
		}
		if err := readers.AddServiceImport(node, im.from, im.to); err != nil {
			return fmt.Errorf("events: server: import %s: %w", im.from, err)
		}
	}
	if err := node.AddStreamExport(eventSubjects, to); err != nil {
		return fmt.Errorf("events: server: export %s: %w", eventSubjects, err)
	}
	if err := readers.AddStreamImport(node, eventSubjects, ""); err != nil {
		return fmt.Errorf("events: server: import %s: %w", eventSubjects, err)
	}
	return nil
}

// readerGate checks every request a reader makes to create, change, show,
// list or delete a consumer before passing it on to JetStream, unchanged,
// and passes the answer back. JetStream cannot tell a reader's request
// from the node's, and a consumer's config can name any subject in the
// node's account to deliver to; the write-ahead stream took such
// deliveries as its own and the node stopped.
//
// The gate admits pull consumers only, on the event stream only, with
// bounded pending acknowledgements and waiting pulls, and never one of
// the node's (NodeConsumerPrefix). A config field the gate does not know is
// refused rather than passed on: a newer server may give it a meaning.
type readerGate struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	stream string
}

// openReaderGate subscribes the gate on nc, a connection of the node's.
func openReaderGate(nc *nats.Conn, stream string) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("events: readers' gate: %w", err)
	}
	g := &readerGate{nc: nc, js: js, stream: stream}
	if _, err := nc.Subscribe(gateAPI+">", g.handle); err != nil {
		return fmt.Errorf("events: readers' gate: %w", err)
	}
	if err := nc.Flush(); err != nil {
		return fmt.Errorf("events: readers' gate: %w", err)
	}
	return nil
}

// handle passes m on to JetStream and its answer back, or answers it with
// the reason it may not pass.
func (g *readerGate) handle(m *nats.Msg) {
	rest := strings.TrimPrefix(m.Subject, gateAPI)
	if err := g.checkAPI(rest, m.Data); err != nil {
		g.refuse(m, rest, err)
		return
	}
	resp, err := g.nc.Request("$JS.API."+rest, m.Data, readerGateTimeout)
	if err != nil {
		g.refuse(m, rest, fmt.Errorf("JetStream did not answer: %v", err))
		return
	}
	data := resp.Data
	if op, _, _ := cutConsumerOp(rest); op == "NAMES" || op == "LIST" {
		data = hideNodeConsumers(data)
	}
	if m.Reply != "" {
		g.nc.Publish(m.Reply, data)
	}
}

// checkReaderConsumerName refuses the node's consumers' names.
func checkReaderConsumerName(name string) error {
	if strings.HasPrefix(name, NodeConsumerPrefix) {
		return fmt.Errorf("consumer %q is the node's own (names starting with %q are reserved)", name, NodeConsumerPrefix)
	}
	return nil
}

// checkAPI checks a consumer API request: rest is its subject after
// "$JS.API.", data its body.
func (g *readerGate) checkAPI(rest string, data []byte) error {
	op, target, ok := cutConsumerOp(rest)
	if !ok {
		return fmt.Errorf("readers may not call $JS.API.%s", rest)
	}
	stream, name, _ := strings.Cut(target, ".")
	name, _, _ = strings.Cut(name, ".") // CREATE.<stream>.<name>.<filter>
	if stream != g.stream {
		return fmt.Errorf("readers may use consumers of stream %s only", g.stream)
	}
	if err := checkReaderConsumerName(name); err != nil {
		return err
	}
	if op != "CREATE" && op != "DURABLE.CREATE" {
		return nil
	}
	if err := checkReaderConsumerRequest(data); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), readerGateTimeout)
	defer cancel()
	st, err := g.js.Stream(ctx, g.stream)
	if err != nil {
		return fmt.Errorf("the node cannot count the stream's consumers now: %v", err)
	}
	if n := st.CachedInfo().State.Consumers; n >= ReaderConsumersMax {
		return fmt.Errorf("stream %s has %d consumers, the most it may have (ReaderConsumersMax); delete one first", g.stream, n)
	}
	return nil
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

// readerConsumerFields are the consumer config fields a reader may set:
// everything a pull consumer has. deliver_subject (and the push-only
// fields with it) is what the gate is for, and "direct" is the server's
// own. The names are matched exactly: JetStream's decoder would take
// "Deliver_Subject" for deliver_subject.
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

// checkReaderConsumerRequest checks a CREATE request's body.
func checkReaderConsumerRequest(data []byte) error {
	var req map[string]json.RawMessage
	if err := json.Unmarshal(data, &req); err != nil {
		return fmt.Errorf("the request is not a JSON object: %v", err)
	}
	for k := range req {
		switch k {
		case "stream_name", "config", "action", "pedantic":
		default:
			return fmt.Errorf("the request has a field %q the node does not pass on", k)
		}
	}
	var cfg map[string]json.RawMessage
	if err := json.Unmarshal(req["config"], &cfg); err != nil || cfg == nil {
		return fmt.Errorf("the request has no consumer config object")
	}
	if _, push := cfg["deliver_subject"]; push {
		return fmt.Errorf("readers may make pull consumers only (deliver_subject)")
	}
	for k := range cfg {
		if !readerConsumerFields[k] {
			return fmt.Errorf("the consumer config has a field %q the node does not pass on", k)
		}
	}
	for _, k := range []string{"name", "durable_name"} {
		if raw, ok := cfg[k]; ok {
			var name string
			if err := json.Unmarshal(raw, &name); err != nil {
				return fmt.Errorf("%s is not a string", k)
			}
			if err := checkReaderConsumerName(name); err != nil {
				return err
			}
		}
	}
	bounds := []struct {
		field string
		max   int64
	}{{"max_ack_pending", ReaderAckPendingMax}, {"max_waiting", ReaderPullsWaitingMax}}
	for _, b := range bounds {
		raw, ok := cfg[b.field]
		if !ok {
			continue
		}
		var n int64
		if err := json.Unmarshal(raw, &n); err != nil || n < 0 || n > b.max {
			return fmt.Errorf("%s must be from 0 (the server's default) to %d, not %s", b.field, b.max, raw)
		}
	}
	return nil
}

// gateRefusalCode is the status a refused request gets: forbidden.
const gateRefusalCode = 403

// refuse answers a request the way JetStream answers one it refuses, so
// that clients show the reason.
func (g *readerGate) refuse(m *nats.Msg, rest string, why error) {
	if m.Reply == "" {
		return
	}
	op, _, _ := cutConsumerOp(rest)
	typ := map[string]string{
		"INFO":   "io.nats.jetstream.api.v1.consumer_info_response",
		"DELETE": "io.nats.jetstream.api.v1.consumer_delete_response",
		"NAMES":  "io.nats.jetstream.api.v1.consumer_names_response",
		"LIST":   "io.nats.jetstream.api.v1.consumer_list_response",
	}[op]
	if typ == "" {
		typ = "io.nats.jetstream.api.v1.consumer_create_response"
	}
	body, _ := json.Marshal(map[string]any{
		"type":  typ,
		"error": map[string]any{"code": gateRefusalCode, "description": "aglx: " + why.Error()},
	})
	g.nc.Publish(m.Reply, body)
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
		if !strings.HasPrefix(name, NodeConsumerPrefix) {
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
