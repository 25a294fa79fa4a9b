package events

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aglx/ledger/protocol"
)

// startWithReader starts the embedded server on loopback, opens the node's
// log on an in-process connection, and connects a reader over TCP without
// credentials, as an analyst's client would.
func startWithReader(t *testing.T) (*Server, *Log, *nats.Conn, *nats.Conn) {
	t.Helper()
	return startWithReaderConfig(t, ServerConfig{})
}

// startWithReaderConfig is startWithReader on a server made from cfg, in
// a data dir of the test's own and listening on loopback.
func startWithReaderConfig(t *testing.T, cfg ServerConfig) (*Server, *Log, *nats.Conn, *nats.Conn) {
	t.Helper()
	cfg.DataDir, cfg.Listen = t.TempDir(), "127.0.0.1:0"
	s, err := StartServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	nc, err := s.Connect("node")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	l, err := Open(context.Background(), nc, Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(context.Background()) })
	rd, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rd.Close)
	return s, l, nc, rd
}

// reopenLog closes l and opens the log again on a new connection, as a
// restarted node would; both end with the test.
func reopenLog(ctx context.Context, t *testing.T, s *Server, l *Log) (*Log, error) {
	t.Helper()
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	nc, err := s.Connect("node-restarted")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	l2, err := Open(ctx, nc, Config{}, nil)
	if err == nil {
		t.Cleanup(func() { l2.Close(context.Background()) })
	}
	return l2, err
}

// readerRequest sends a raw JetStream API request as the reader and
// returns the answer's error description, "" for none.
func readerRequest(t *testing.T, rd *nats.Conn, subject string, body any) string {
	t.Helper()
	data, _ := json.Marshal(body)
	m, err := rd.Request(subject, data, 5*time.Second)
	if err != nil {
		return err.Error()
	}
	var r struct {
		Error *struct {
			Description string `json:"description"`
		} `json:"error"`
	}
	if json.Unmarshal(m.Data, &r) != nil {
		return "not JSON: " + string(m.Data)
	}
	if r.Error == nil {
		return ""
	}
	return r.Error.Description
}

// nodeConsumerName waits for the node's consumer on the event stream and
// returns its name, looked up on the node's own connection.
func nodeConsumerName(t *testing.T, nc *nats.Conn) string {
	t.Helper()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		st, err := js.Stream(ctx, StreamNameDefault)
		if err != nil {
			t.Fatal(err)
		}
		names := st.ConsumerNames(ctx)
		for n := range names.Name() {
			if strings.HasPrefix(n, NodeConsumerPrefix) {
				return n
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the node made no consumer")
	return ""
}

// TestReadersMayNotMakeConsumersThatDeliverIntoTheNode: a consumer's config
// names the subject it delivers to, and JetStream delivers there from
// inside the node's account. Delivered to the write-ahead subject, the
// events corrupted the write-ahead stream: the node refused every frame
// and would not start again. The gate refuses every such request, and
// every request that could smuggle one past it; the log goes on.
func TestReadersMayNotMakeConsumersThatDeliverIntoTheNode(t *testing.T) {
	_, l, nc, rd := startWithReader(t)
	appendAll(t, l, testEnvelope(1, "task.assign", "agent://a.local", "agent://b.local"))
	before := walLastSeq(t, testJetStream(t, nc), l)
	create := "$JS.API.CONSUMER.CREATE." + StreamNameDefault
	for _, tc := range []struct {
		name, subject string
		config        map[string]any
		want          string // in the refusal
	}{
		{"push into the write-ahead stream", create + ".evil", map[string]any{"name": "evil", "deliver_subject": "aglx.wal.AGLX"}, "pull consumers only"},
		{"push into the event stream", create + ".evil", map[string]any{"name": "evil", "deliver_subject": "aglx.ev.task.assign.x.y"}, "pull consumers only"},
		{"push, the field's name in capitals", create + ".evil", map[string]any{"name": "evil", "Deliver_Subject": "aglx.wal.AGLX"}, "Deliver_Subject"},
		{"push through the old durable API", "$JS.API.CONSUMER.DURABLE.CREATE." + StreamNameDefault + ".evil", map[string]any{"durable_name": "evil", "deliver_subject": "aglx.wal.AGLX"}, "pull consumers only"},
		{"push without a name", create, map[string]any{"deliver_subject": "aglx.wal.AGLX"}, "pull consumers only"},
		{"a field the gate does not know", create + ".evil", map[string]any{"name": "evil", "direct": true}, `"direct"`},
		{"unbounded pending acks", create + ".evil", map[string]any{"name": "evil", "ack_policy": "explicit", "max_ack_pending": -1}, "max_ack_pending"},
		{"too many pending acks", create + ".evil", map[string]any{"name": "evil", "ack_policy": "explicit", "max_ack_pending": ReaderAckPendingMax + 1}, "max_ack_pending"},
		{"too many waiting pulls", create + ".evil", map[string]any{"name": "evil", "max_waiting": ReaderPullsWaitingMax + 1}, "max_waiting"},
		{"a name of the node's", create + "." + NodeConsumerPrefix + "x", map[string]any{"name": NodeConsumerPrefix + "x"}, "reserved"},
		{"a durable name of the node's", create, map[string]any{"durable_name": NodeConsumerPrefix + "x"}, "reserved"},
		{"the relay's former consumer", "$JS.API.CONSUMER.DURABLE.CREATE." + StreamNameDefault + "." + LegacyRelayConsumer, map[string]any{"durable_name": LegacyRelayConsumer}, "reserved"},
		{"the write-ahead stream's consumers", "$JS.API.CONSUMER.CREATE." + StreamNameDefault + "_WAL.evil", map[string]any{"name": "evil"}, "no responders"},
		{"a key-value bucket's consumers", "$JS.API.CONSUMER.CREATE.KV_AGLX_RELAY.evil", map[string]any{"name": "evil", "deliver_subject": "aglx.ev.x.y.z"}, "no responders"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := readerRequest(t, rd, tc.subject, map[string]any{"stream_name": StreamNameDefault, "config": tc.config})
			if !strings.Contains(got, tc.want) {
				t.Fatalf("the request was answered %q; want a refusal with %q", got, tc.want)
			}
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if a, err := l.Append(ctx, testEnvelope(2, "task.assign", "agent://a.local", "agent://b.local")).Wait(ctx); err != nil || a.Seq != 2 {
		t.Fatalf("the next append: %+v, %v; want seq 2", a, err)
	}
	if got := walLastSeq(t, testJetStream(t, nc), l); got != before+1 || l.Healthy() != nil {
		t.Fatalf("the write-ahead stream went from %d to %d (health %v); want one commit more", before, got, l.Healthy())
	}
}

// TestReaderRequestWithTwoConfigs: encoding/json fills one struct from a
// key given twice, keeping what the first set and the second did not. The
// gate checked the second "config" and passed the bytes on; JetStream
// made the first's push consumer onto the write-ahead subject, and the
// node corrupted its write-ahead stream and could not start again. The
// gate now passes on what it checked, encoded anew.
func TestReaderRequestWithTwoConfigs(t *testing.T) {
	_, l, nc, rd := startWithReader(t)
	envs := make([]*Envelope, 10)
	for i := range envs {
		envs[i] = testEnvelope(i+1, "task.assign", "agent://a.local", "agent://b.local")
	}
	appendAll(t, l, envs...)
	before := walLastSeq(t, testJetStream(t, nc), l)
	m, err := rd.Request("$JS.API.CONSUMER.CREATE."+StreamNameDefault+".evil",
		[]byte(`{"stream_name":"AGLX","config":{"deliver_subject":"aglx.wal.AGLX"},"config":{"name":"evil"}}`), 5*time.Second)
	if err != nil || !strings.Contains(string(m.Data), `"error"`) {
		t.Fatalf("a request with two configs was answered %v %s; want refused", err, m.Data)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := l.Append(ctx, testEnvelope(11, "task.assign", "agent://a.local", "agent://b.local")).Wait(ctx); err != nil {
		t.Fatalf("the next append: %v", err)
	}
	if got := walLastSeq(t, testJetStream(t, nc), l); got != before+1 || l.Healthy() != nil {
		t.Fatalf("the write-ahead stream went from %d to %d (health %v); want one commit more", before, got, l.Healthy())
	}
}

// TestReadersRequestsAreBounded: four readers sending message gets as fast
// as they could held JetStream's API queue so long that the node could not
// start (its own requests timed out) or read. The gate passes at most
// ReaderRequestsPerSecond and answers the rest at once; the node's own
// requests go on.
func TestReadersRequestsAreBounded(t *testing.T) {
	s, l, _, _ := startWithReader(t)
	appendAll(t, l, testEnvelope(1, "task.assign", "agent://a.local", "agent://b.local"))
	stop := make(chan struct{})
	var busy, sent, answers atomic.Int64
	start := time.Now()
	done := make(chan int, 4)
	for i := range 4 {
		rd, err := nats.Connect(s.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		defer rd.Close()
		inbox := nats.NewInbox()
		sub, err := rd.Subscribe(inbox+".*", func(m *nats.Msg) {
			answers.Add(1)
			if strings.Contains(string(m.Data), "requests a second") {
				busy.Add(1)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
		go func() {
			defer func() { done <- i }()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				rd.PublishRequest("$JS.API.STREAM.MSG.GET."+StreamNameDefault, fmt.Sprintf("%s.%d", inbox, n), []byte(`{"seq":1}`))
				sent.Add(1)
				if n%1000 == 999 {
					rd.Flush()
				}
			}
		}()
	}
	// The flood is on once the gate refuses requests as too many; a sleep
	// stood here, which a busy machine could outlast before the flood
	// began (helper-110).
	for deadline := time.Now().Add(30 * time.Second); busy.Load() < 100; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the flood did not begin: %d sent, %d answered, %d refused as too many", sent.Load(), answers.Load(), busy.Load())
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l2, err := reopenLog(ctx, t, s, l)
	if err != nil {
		t.Fatalf("the node could not start under the readers' flood: %v", err)
	}
	n := 0
	if err := l2.Read(ctx, ReadOptions{}, func(*Envelope) error { n++; return nil }); err != nil || n != 1 {
		t.Fatalf("the node's read under the flood: %d events, %v", n, err)
	}
	close(stop)
	for range 4 {
		<-done
	}
	elapsed := time.Since(start)
	if passed, most := s.readers.passed.Load(), int64(ReaderRequestsBurst+ReaderRequestsPerSecond*elapsed.Seconds()+1); passed > most {
		t.Fatalf("the gate passed %d requests to JetStream in %s; at most %d may pass", passed, elapsed, most)
	}
	t.Logf("sent %d requests in %s, %d answered (%d of them refused as too many); %d passed on", sent.Load(), elapsed, answers.Load(), busy.Load(), s.readers.passed.Load())
}

// TestReadersOversizedRequests: a subject the gate repeated with its own,
// longer reply went past the server's 4 KiB protocol line, which closed
// the gate's connection for good: every reader got "no responders" until
// the node restarted. Bodies of 7 MB queued by the thousand took the
// node's memory. Both are refused at once now, and the gate answers the
// next reader.
func TestReadersOversizedRequests(t *testing.T) {
	_, l, _, rd := startWithReader(t)
	appendAll(t, l, testEnvelope(1, "task.assign", "agent://a.local", "agent://b.local"))
	for _, r := range []struct{ subject, body, want string }{
		// Within the reader's own line limit, past the gate's.
		{"$JS.API.CONSUMER.INFO." + StreamNameDefault + "." + strings.Repeat("a", 3990), "", "longer than"},
		{"$JS.API.CONSUMER.CREATE." + StreamNameDefault + ".big", `{"stream_name":"AGLX","config":{"name":"big","description":"` + strings.Repeat("a", ReaderRequestBytesMax) + `"}}`, "larger than"},
	} {
		m, err := rd.Request(r.subject, []byte(r.body), 5*time.Second)
		if err != nil {
			t.Fatalf("%.60s...: %v", r.subject, err)
		}
		if !strings.Contains(string(m.Data), r.want) {
			t.Fatalf("%.60s...: answered %.200s; want a refusal with %q", r.subject, m.Data, r.want)
		}
	}
	if got := readerRequest(t, rd, "$JS.API.STREAM.INFO."+StreamNameDefault, nil); got != "" {
		t.Fatalf("the gate after the oversized requests: %s", got)
	}
	// The stream's subject list is refused, not answered empty.
	if got := readerRequest(t, rd, "$JS.API.STREAM.INFO."+StreamNameDefault, map[string]any{"subjects_filter": ">"}); !strings.Contains(got, "subjects_filter") {
		t.Fatalf("STREAM.INFO with a subjects filter: %q; want it refused", got)
	}
}

// TestReadersGateOpensAgain: should the gate's connection close, for
// whatever reason, readers lost every gated request until the node
// restarted. The gate opens again on a new connection.
func TestReadersGateOpensAgain(t *testing.T) {
	s, _, _, rd := startWithReader(t)
	s.gateMu.Lock()
	gate := s.gate
	s.gateMu.Unlock()
	gate.Close()
	for deadline := time.Now().Add(20 * time.Second); ; {
		if readerRequest(t, rd, "$JS.API.STREAM.INFO."+StreamNameDefault, nil) == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the readers' gate did not open again after its connection closed")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestReadersConsumerCapHoldsUnderConcurrency: the gate counted the
// stream's consumers in four workers at once, and readers creating
// consumers together went past the cap.
func TestReadersConsumerCapHoldsUnderConcurrency(t *testing.T) {
	if testing.Short() {
		t.Skip("makes ReaderConsumersMax consumers")
	}
	s, l, nc, _ := startWithReader(t)
	appendAll(t, l, testEnvelope(1, "task.assign", "agent://a.local", "agent://b.local"))
	done := make(chan struct{})
	for c := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			rd, err := nats.Connect(s.ClientURL())
			if err != nil {
				return
			}
			defer rd.Close()
			for i := range ReaderConsumersMax/4 + 8 {
				name := fmt.Sprintf("c%d-%d", c, i)
				body, _ := json.Marshal(map[string]any{"stream_name": StreamNameDefault, "config": map[string]any{"durable_name": name, "ack_policy": "none"}})
				rd.Request("$JS.API.CONSUMER.CREATE."+StreamNameDefault+"."+name, body, 10*time.Second)
			}
		}()
	}
	for range 4 {
		<-done
	}
	js, _ := jetstream.New(nc)
	st, err := js.Stream(context.Background(), StreamNameDefault)
	if err != nil {
		t.Fatal(err)
	}
	if n := st.CachedInfo().State.Consumers; n > ReaderConsumersMax {
		t.Fatalf("readers creating consumers at once made %d; the cap is %d", n, ReaderConsumersMax)
	}
}

// TestReadersCannotForgeEventsForOtherReaders: readers share an account,
// and one that published on an event subject reached every other reader's
// plain subscription as if the node had published it.
func TestReadersCannotForgeEventsForOtherReaders(t *testing.T) {
	s, l, _, victim := startWithReader(t)
	sub, err := victim.SubscribeSync("aglx.ev.>")
	if err != nil {
		t.Fatal(err)
	}
	victim.Flush()
	forger, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer forger.Close()
	forger.Publish("aglx.ev.credit.transfer.agent~x_local.agent~y_local", []byte(`{"amount":"1000000"}`))
	forger.Flush()
	appendAll(t, l, testEnvelope(1, "task.assign", "agent://a.local", "agent://b.local"))
	m, err := sub.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if m.Header.Get(HdrEventID) == "" {
		t.Fatalf("a reader's plain subscription got a forged event first: %s %s", m.Subject, m.Data)
	}
}

// TestReadersCannotTouchTheNodesConsumers: a reader that rewrote the node's
// consumer's filter had the node replay a subset of the log and call it
// whole (and rebuild its duplicate index from it); one that deleted it
// stalled the node's reads. The node's consumers are hidden from readers'
// lists, and every request naming one is refused.
func TestReadersCannotTouchTheNodesConsumers(t *testing.T) {
	_, l, nc, rd := startWithReader(t)
	appendAll(t, l, testEnvelope(1, "task.assign", "agent://a.local", "agent://b.local"))
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	got := make(chan *Envelope, 100)
	go l.Read(ctx, ReadOptions{Follow: true}, func(e *Envelope) error { got <- e; return nil })
	<-got
	name := nodeConsumerName(t, nc)

	var names struct{ Consumers []string }
	m, err := rd.Request("$JS.API.CONSUMER.NAMES."+StreamNameDefault, []byte(`{}`), 5*time.Second)
	if err != nil || json.Unmarshal(m.Data, &names) != nil {
		t.Fatalf("CONSUMER.NAMES: %v", err)
	}
	var list struct {
		Total     int
		Consumers []struct{ Name string }
	}
	m, err = rd.Request("$JS.API.CONSUMER.LIST."+StreamNameDefault, []byte(`{}`), 5*time.Second)
	if err != nil || json.Unmarshal(m.Data, &list) != nil {
		t.Fatalf("CONSUMER.LIST: %v", err)
	}
	if len(names.Consumers) != 0 || len(list.Consumers) != 0 || list.Total != 0 {
		t.Fatalf("readers see the node's consumers: names %v, list %+v", names.Consumers, list)
	}

	sub := "." + StreamNameDefault + "." + name
	for _, r := range []struct{ subject, body string }{
		{"$JS.API.CONSUMER.CREATE" + sub + ".aglx.ev.task.cancel.>", `{"stream_name":"AGLX","config":{"name":"` + name + `","filter_subject":"aglx.ev.task.cancel.>"}}`},
		{"$JS.API.CONSUMER.CREATE" + sub, `{"stream_name":"AGLX","config":{"name":"` + name + `","headers_only":true}}`},
		{"$JS.API.CONSUMER.INFO" + sub, ``},
		{"$JS.API.CONSUMER.DELETE" + sub, ``},
	} {
		m, err := rd.Request(r.subject, []byte(r.body), 5*time.Second)
		if err != nil || !strings.Contains(string(m.Data), "reserved") {
			t.Fatalf("%s: answered %v %s; want refused", r.subject, err, m.Data)
		}
	}

	appendAll(t, l, testEnvelope(2, "task.assign", "agent://a.local", "agent://b.local"),
		testEnvelope(3, "task.cancel", "agent://a.local", "agent://b.local"))
	for want := uint64(2); want <= 3; want++ {
		select {
		case e := <-got:
			if e.Seq != want || len(e.Body) == 0 || e.Foreign != nil {
				t.Fatalf("the node's read got seq %d (body %d bytes, foreign %v); want %d whole", e.Seq, len(e.Body), e.Foreign, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the node's read stalled before seq %d", want)
		}
	}
}

// TestReadersConsumersAreCapped: durable consumers stay until deleted; a
// reader that made a thousand filled the server's room for consumers and
// the node could not read or start. The gate stops readers at
// ReaderConsumersMax, and the node still reads and opens.
func TestReadersConsumersAreCapped(t *testing.T) {
	if testing.Short() {
		t.Skip("makes ReaderConsumersMax consumers")
	}
	s, l, _, rd := startWithReader(t)
	appendAll(t, l, testEnvelope(1, "task.assign", "agent://a.local", "agent://b.local"))
	create := "$JS.API.CONSUMER.CREATE." + StreamNameDefault
	for i := 0; i < ReaderConsumersMax; i++ {
		name := fmt.Sprintf("d%d", i)
		if got := readerRequest(t, rd, create+"."+name, map[string]any{"stream_name": StreamNameDefault, "config": map[string]any{"durable_name": name, "ack_policy": "none"}}); got != "" {
			t.Fatalf("consumer %d of %d refused: %s", i+1, ReaderConsumersMax, got)
		}
	}
	if got := readerRequest(t, rd, create+".one-more", map[string]any{"stream_name": StreamNameDefault, "config": map[string]any{"durable_name": "one-more"}}); !strings.Contains(got, "ReaderConsumersMax") {
		t.Fatalf("a consumer past the cap was answered %q", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n := 0
	if err := l.Read(ctx, ReadOptions{}, func(*Envelope) error { n++; return nil }); err != nil || n != 1 {
		t.Fatalf("the node's read: %d events, %v", n, err)
	}
	if _, err := reopenLog(ctx, t, s, l); err != nil {
		t.Fatalf("the node's next Open: %v", err)
	}
}

// TestReadersCannotReadTheNodesOwnStreams: readers see the event stream;
// the write-ahead stream and the relay's cursor are the node's.
func TestReadersCannotReadTheNodesOwnStreams(t *testing.T) {
	_, l, _, rd := startWithReader(t)
	appendAll(t, l, testEnvelope(1, "task.assign", "agent://a.local", "agent://b.local"))
	for _, r := range []struct{ subject, body string }{
		{"$JS.API.STREAM.MSG.GET." + StreamNameDefault + "_WAL", `{"seq":1}`},
		{"$JS.API.DIRECT.GET.KV_AGLX_RELAY.$KV.AGLX_RELAY.cursor", ``},
		{"$JS.API.STREAM.INFO." + StreamNameDefault + "_WAL", ``},
		{"$JS.API.CONSUMER.MSG.NEXT." + StreamNameDefault + "_WAL.x", `{"batch":1}`},
	} {
		if m, err := rd.Request(r.subject, []byte(r.body), 2*time.Second); err == nil {
			t.Fatalf("a reader's %s was answered: %.200s", r.subject, m.Data)
		}
	}
	if m, err := rd.Request("$JS.API.STREAM.MSG.GET."+StreamNameDefault, []byte(`{"seq":1}`), 2*time.Second); err != nil || strings.Contains(string(m.Data), `"error"`) {
		t.Fatalf("a reader cannot get an event: %v", err)
	}
}

// TestReadersStillRead: what analysts do with the event stream passes the
// gate: ordered consumers, durable pull consumers with acknowledgements
// (double acks answer through the account boundary), the older client
// API's pull subscriptions, and the node's own reader, `aglx tail`.
func TestReadersStillRead(t *testing.T) {
	_, l, _, rd := startWithReader(t)
	appendAll(t, l, testEnvelope(1, "task.assign", "agent://a.local", "agent://b.local"),
		testEnvelope(2, "task.cancel", "agent://a.local", "agent://b.local"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	js, err := jetstream.New(rd)
	if err != nil {
		t.Fatal(err)
	}
	fetch := func(c jetstream.Consumer, ack bool) int {
		t.Helper()
		b, err := c.Fetch(2, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range b.Messages() {
			if ack {
				if err := m.DoubleAck(ctx); err != nil {
					t.Fatalf("double ack: %v", err)
				}
			}
			n++
		}
		return n
	}
	oc, err := js.OrderedConsumer(ctx, StreamNameDefault, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if n := fetch(oc, false); n != 2 {
		t.Fatalf("an ordered consumer fetched %d events; want 2", n)
	}
	dc, err := js.CreateOrUpdateConsumer(ctx, StreamNameDefault, jetstream.ConsumerConfig{Durable: "mine", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	if n := fetch(dc, true); n != 2 {
		t.Fatalf("a durable consumer fetched %d events; want 2", n)
	}
	if info, err := dc.Info(ctx); err != nil || info.AckFloor.Stream != 2 {
		t.Fatalf("the durable's ack floor: %+v, %v; want 2", info, err)
	}
	st, err := js.Stream(ctx, StreamNameDefault)
	if err != nil {
		t.Fatal(err)
	}
	names := st.ConsumerNames(ctx)
	seen := map[string]bool{}
	for n := range names.Name() {
		seen[n] = true
	}
	if !seen["mine"] || names.Err() != nil {
		t.Fatalf("the reader's consumers %v (%v) lack its durable", seen, names.Err())
	}
	if err := js.DeleteConsumer(ctx, StreamNameDefault, "mine"); err != nil {
		t.Fatalf("a reader cannot delete its own consumer: %v", err)
	}

	legacy, err := rd.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	psub, err := legacy.PullSubscribe("aglx.ev.>", "legacy", nats.BindStream(StreamNameDefault))
	if err != nil {
		t.Fatal(err)
	}
	if ms, err := psub.Fetch(2, nats.MaxWait(5*time.Second)); err != nil || len(ms) != 2 {
		t.Fatalf("an old-API pull subscription fetched %d, %v; want 2", len(ms), err)
	}

	tail, err := Attach(ctx, rd, StreamNameDefault)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := tail.Read(ctx, ReadOptions{}, func(*Envelope) error { n++; return nil }); err != nil || n != 2 {
		t.Fatalf("a reader's Read (aglx tail) got %d events, %v; want 2", n, err)
	}
}

// FuzzHideNodeConsumers: a consumer list, whatever JetStream answers, never
// shows the node's consumers and never makes the gate panic.
func FuzzHideNodeConsumers(f *testing.F) {
	f.Add([]byte(`{"total":2,"offset":0,"limit":1024,"consumers":["mine","aglx-node-abc_1"]}`))
	f.Add([]byte(`{"total":1,"consumers":[{"name":"aglx-node-abc_1","config":{}}]}`))
	f.Add([]byte(`{"error":{"code":404}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		out := hideNodeConsumers(data)
		var resp map[string]json.RawMessage
		var list []json.RawMessage
		if json.Unmarshal(out, &resp) != nil || json.Unmarshal(resp["consumers"], &list) != nil {
			return
		}
		for _, c := range list {
			var name string
			if json.Unmarshal(c, &name) != nil {
				var info struct{ Name string }
				json.Unmarshal(c, &info)
				name = info.Name
			}
			if strings.HasPrefix(name, NodeConsumerPrefix) {
				t.Fatalf("a node's consumer is left in %s", out)
			}
		}
	})
}

// TestReadRefusesAHeadersOnlyDelivery: a consumer changed to deliver
// headers only (which readers can no longer do to the node's, but an
// operator's own NATS lets anyone with the API) made every event look
// like a stranger's, and the runner skipped them all without a word. The
// read fails instead.
func TestReadRefusesAHeadersOnlyDelivery(t *testing.T) {
	_, l, nc, _ := startWithReader(t)
	appendAll(t, l, testEnvelope(1, "task.assign", "agent://a.local", "agent://b.local"))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got, done := make(chan *Envelope, 10), make(chan error, 1)
	go func() {
		done <- l.Read(ctx, ReadOptions{Follow: true}, func(e *Envelope) error { got <- e; return nil })
	}()
	<-got
	js, _ := jetstream.New(nc)
	name := nodeConsumerName(t, nc)
	c, err := js.Consumer(ctx, StreamNameDefault, name)
	if err != nil {
		t.Fatal(err)
	}
	cfg := c.CachedInfo().Config
	cfg.HeadersOnly = true
	if _, err := js.UpdateConsumer(ctx, StreamNameDefault, cfg); err != nil {
		t.Fatal(err)
	}
	appendAll(t, l, testEnvelope(2, "task.assign", "agent://a.local", "agent://b.local"))
	select {
	case e := <-got:
		t.Fatalf("the read went on with seq %d (foreign %v)", e.Seq, e.Foreign)
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "headers only") {
			t.Fatalf("Read: %v; want the headers-only delivery named", err)
		}
	}
}

// TestReadersFollowTheLongestSubject: a reader follows one subject with
// the longest URIs an address may have (253-byte names, every byte of
// them escaped to three in a subject token) through a consumer with that
// one filter, which nats.go puts in the request's subject. The gate
// refused any request subject past 256 bytes, so `aglx tail --from` of a
// long agent name failed with 403 (helper-102).
func TestReadersFollowTheLongestSubject(t *testing.T) {
	label := func(n int) string { return "a" + strings.Repeat("_", n-2) + "b" }
	host := strings.Join([]string{label(63), label(63), label(63), label(61)}, ".")
	from, to := "registry://"+host+":65535", "registry://"+host+":65534"
	for _, u := range []string{from, to} {
		if _, err := protocol.ParseURI(u); err != nil || len(host) != protocol.URINameSizeMax {
			t.Fatalf("%s (%d bytes): %v; want the longest address there is", u, len(host), err)
		}
	}
	typ := protocol.TypePlanApprovalResponse
	for _, info := range protocol.Types() {
		if len(TypeTokens(info.Name)) > len(TypeTokens(typ)) {
			typ = info.Name
		}
	}
	subject := Subject(typ, from, to)
	_, l, _, rd := startWithReader(t)
	appendAll(t, l, testEnvelope(1, typ, from, to))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	js, err := jetstream.New(rd)
	if err != nil {
		t.Fatal(err)
	}
	oc, err := js.OrderedConsumer(ctx, StreamNameDefault, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		t.Fatalf("a consumer of %d-byte subject: %v", len(subject), err)
	}
	b, err := oc.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for m := range b.Messages() {
		if m.Subject() != subject {
			t.Fatalf("got %s", m.Subject())
		}
		n++
	}
	if n != 1 {
		t.Fatalf("read %d events on the %d-byte subject; want 1 (%v)", n, len(subject), b.Error())
	}
}

// TestReaderCannotPullTheFormerRelayConsumer: on a store from before the
// relay's cursor bucket, the relay's old durable consumer still exists,
// and the relay takes over its acknowledgement floor at its first start.
// Its name is public, and pulls and acknowledgements reach JetStream past
// the readers' gate: a reader could fetch and acknowledge from it, and
// the messages it moved the floor past were never delivered (helper-142).
// A reader's pull there is refused now, and the consumer delivers nothing.
func TestReaderCannotPullTheFormerRelayConsumer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, l, nc, rd := startWithReader(t)
	for i := range 3 {
		if _, err := l.Append(ctx, testEnvelope(i, "task.reject", "agent://a.local", "agent://b.local")).Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.WaitPublished(ctx, 3); err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, StreamNameDefault, jetstream.ConsumerConfig{Durable: LegacyRelayConsumer, AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	for _, subj := range []string{
		"$JS.API.CONSUMER.MSG.NEXT." + StreamNameDefault + "." + LegacyRelayConsumer,
		"$JS.ACK." + StreamNameDefault + "." + LegacyRelayConsumer + ".1.1.1.0.0",
	} {
		body := []byte(`{"batch":3,"expires":500000000}`)
		if strings.HasPrefix(subj, "$JS.ACK.") {
			body = []byte(`+NXT {"batch":3}`)
		}
		if m, err := rd.Request(subj, body, time.Second); err == nil && len(m.Data) > 0 {
			t.Errorf("a reader's request on %s got %q", subj, m.Data)
		}
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Delivered.Consumer != 0 || info.AckFloor.Stream != 0 {
		t.Fatalf("the former relay consumer delivered %d messages to a reader and stands acknowledged at %d", info.Delivered.Consumer, info.AckFloor.Stream)
	}
}
