package events

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
)

// The readers' gate's check of a consumer request (readerConsumerRequest):
// what a reader's consumer may be, and what the gate changes in it.

// TestReaderConsumerRequests: the gate's check of a CREATE body, alone.
func TestReaderConsumerRequests(t *testing.T) {
	for _, tc := range []struct {
		body string
		ok   bool
	}{
		{`{"stream_name":"AGLX","config":{"durable_name":"d","ack_policy":"explicit","max_ack_pending":1000}}`, true},
		{`{"stream_name":"AGLX","config":{"name":"o_1","deliver_policy":"by_start_sequence","opt_start_seq":5,"ack_policy":"none","replay_policy":"instant","num_replicas":1,"mem_storage":true,"inactive_threshold":300000000000,"filter_subjects":["aglx.ev.task.>"]},"action":"create"}`, true},
		{`{"stream_name":"AGLX","config":{"deliver_subject":"x"}}`, false},
		{`{"stream_name":"AGLX","config":{"deliver_group":"x"}}`, false},
		{`{"stream_name":"AGLX","config":{"flow_control":true}}`, false},
		{`{"stream_name":"AGLX","config":{"sourcing":true}}`, false},
		{`{"stream_name":"AGLX","config":{"DELIVER_SUBJECT":"x"}}`, false},
		{`{"stream_name":"AGLX","config":{"max_waiting":513}}`, false},
		{`{"stream_name":"AGLX","config":{"max_ack_pending":1.5}}`, false},
		{`{"stream_name":"AGLX","config":{"name":"aglx-node-1"}}`, false},
		{`{"stream_name":"AGLX","config":{"name":7}}`, false},
		{`{"stream_name":"AGLX","Config":{"deliver_subject":"x"}}`, false},
		{`{"stream_name":"AGLX","config":null}`, false},
		{`{"stream_name":"AGLX"}`, false},
		{`[]`, false},
		{``, false},
		// JetStream's decoder fills one struct from both: the gate
		// checked the second and JetStream took the first's push config.
		{`{"stream_name":"AGLX","config":{"deliver_subject":"aglx.wal.AGLX"},"config":{"name":"x"}}`, false},
		{`{"stream_name":"AGLX","config":{"name":"aglx-node-x"},"config":{"max_waiting":1}}`, false},
		{`{"stream_name":"AGLX","config":{"max_ack_pending":-1},"config":{"max_waiting":1}}`, false},
		{`{"stream_name":"AGLX","config":{"durable_name":"AGLX_RELAY"}}`, false},
		// A pull that outlives the server's way back to it has its
		// later events sent into nothing (ReaderPullResponseThreshold).
		{fmt.Sprintf(`{"stream_name":"AGLX","config":{"name":"e","max_expires":%d}}`, ReaderPullExpiresMax), true},
		{fmt.Sprintf(`{"stream_name":"AGLX","config":{"name":"e","max_expires":%d}}`, ReaderPullExpiresMax+1), false},
		{`{"stream_name":"AGLX","config":{"name":"e","max_expires":-1}}`, false},
		// JetStream compares every pair of filters: 40,000 kept its API
		// busy for minutes, and again at every start.
		{`{"stream_name":"AGLX","config":{"name":"f","filter_subjects":[` + strings.TrimSuffix(strings.Repeat(`"aglx.ev.x",`, ReaderFilterSubjectsMax+1), ",") + `]}}`, false},
		{`{"stream_name":"AGLX","config":{"name":"f","filter_subjects":[` + strings.TrimSuffix(strings.Repeat(`"aglx.ev.x",`, ReaderFilterSubjectsMax), ",") + `]}}`, true},
		{`{"stream_name":"AGLX","config":{"name":"b","max_deliver":-1,"backoff":[` + strings.TrimSuffix(strings.Repeat(`1,`, ReaderBackoffMax+1), ",") + `]}}`, false},
		{`{"stream_name":"AGLX","config":{"name":"p","priority_groups":[` + strings.TrimSuffix(strings.Repeat(`"g",`, ReaderPriorityGroupsMax+1), ",") + `]}}`, false},
	} {
		if _, err := readerConsumerRequest([]byte(tc.body)); (err == nil) != tc.ok {
			t.Errorf("%s: %v; want ok=%v", tc.body, err, tc.ok)
		}
	}
}

// TestReadersConsumersDoNotOutliveThem: a consumer without a durable name
// that its reader left is gone within ReaderEphemeralInactiveMax, however
// long the reader asked it to stay: nats.go's ordered consumer asks for 5
// minutes, and the stream's consumers are shared by every reader
// (helper-102). A durable keeps what it asked for.
func TestReadersConsumersDoNotOutliveThem(t *testing.T) {
	for _, tc := range []struct {
		config string
		want   time.Duration
	}{
		{`{"name":"o","inactive_threshold":300000000000}`, ReaderEphemeralInactiveMax},
		{`{"name":"o"}`, 0}, // the server's own default, 5 s, shorter (helper-105)
		{`{"name":"o","inactive_threshold":5000000000}`, 5 * time.Second},
		{`{"durable_name":"d","inactive_threshold":300000000000}`, 5 * time.Minute},
		{`{"durable_name":"d"}`, 0},
	} {
		body, err := readerConsumerRequest([]byte(`{"stream_name":"AGLX","config":` + tc.config + `}`))
		if err != nil {
			t.Fatalf("%s: %v", tc.config, err)
		}
		var req server.CreateConsumerRequest
		if err := json.Unmarshal(body, &req); err != nil {
			t.Fatal(err)
		}
		if got := req.Config.InactiveThreshold; got != tc.want {
			t.Errorf("%s: passed on with inactive_threshold %s, want %s", tc.config, got, tc.want)
		}
	}
	// And through the gate, as nats.go asks for it.
	_, l, _, rd := startWithReader(t)
	appendAll(t, l, testEnvelope(1, "task.assign", "agent://a.local", "agent://b.local"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	js, err := jetstream.New(rd)
	if err != nil {
		t.Fatal(err)
	}
	oc, err := js.OrderedConsumer(ctx, StreamNameDefault, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := oc.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for range b.Messages() {
	}
	info, err := oc.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := info.Config.InactiveThreshold; got != ReaderEphemeralInactiveMax {
		t.Fatalf("an ordered consumer made through the gate stays %s after its reader; want %s", got, ReaderEphemeralInactiveMax)
	}
}

// FuzzReaderConsumerRequest: whatever the gate passes, JetStream reads as a
// pull consumer of bounded size that is not the node's. The server's own
// type and decoder stand in for JetStream.
func FuzzReaderConsumerRequest(f *testing.F) {
	f.Add([]byte(`{"stream_name":"AGLX","config":{"durable_name":"d","ack_policy":"explicit","max_ack_pending":1000}}`))
	f.Add([]byte(`{"stream_name":"AGLX","config":{"deliver_subject":"aglx.wal.AGLX"}}`))
	f.Add([]byte(`{"stream_name":"AGLX","config":{"name":"x","Deliver_Subject":"y","max_waiting":3}}`))
	f.Add([]byte(`{"stream_name":"AGLX","config":{"deliver_subject":"aglx.wal.AGLX"},"config":{"name":"x"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		body, err := readerConsumerRequest(data)
		if err != nil {
			return
		}
		// What JetStream reads from what the gate passes on.
		var req server.CreateConsumerRequest
		dec := json.NewDecoder(bytes.NewReader(body))
		for {
			if err := dec.Decode(&req); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("the gate passed on a body JetStream cannot read: %s: %v", body, err)
			}
		}
		c := req.Config
		if c.DeliverSubject != "" || c.DeliverGroup != "" || c.FlowControl || c.Heartbeat != 0 || c.Direct || c.Sourcing || c.RateLimit != 0 {
			t.Fatalf("the gate passed a push or internal consumer: %s", data)
		}
		if checkReaderConsumerName(c.Name) != nil || checkReaderConsumerName(c.Durable) != nil {
			t.Fatalf("the gate passed a node's name: %s", data)
		}
		if c.MaxAckPending < 0 || c.MaxAckPending > ReaderAckPendingMax || c.MaxWaiting < 0 || c.MaxWaiting > ReaderPullsWaitingMax {
			t.Fatalf("the gate passed unbounded limits: %s", data)
		}
		if c.MaxRequestExpires <= 0 || c.MaxRequestExpires > ReaderPullExpiresMax {
			t.Fatalf("the gate passed pulls of unbounded expiry (max_expires %s): %s", c.MaxRequestExpires, data)
		}
		if c.Durable == "" && c.InactiveThreshold > ReaderEphemeralInactiveMax {
			t.Fatalf("the gate passed a consumer that outlives its reader (inactive_threshold %s): %s", c.InactiveThreshold, data)
		}
	})
}

// FuzzReaderGateCheck: whatever subject and body a reader sends to the
// JetStream API, the gate passes on only the requests it lists: the
// account and stream info and names, a message of the event stream by
// sequence, the event stream's info without its options (the option body
// is the reader's, and was not fuzzed: helper-110), and the event
// stream's consumers other than the node's. Consumer creation, which asks
// JetStream how many consumers there are, is FuzzReaderConsumerRequest's.
func FuzzReaderGateCheck(f *testing.F) {
	const stream = "AGLX"
	f.Add("STREAM.INFO.AGLX", []byte(`{"subjects_filter":">"}`))
	f.Add("STREAM.INFO.AGLX", []byte(`{"deleted_details":false,"subjects_filter":""}`))
	f.Add("STREAM.INFO.AGLX", []byte(`null`))
	f.Add("STREAM.MSG.GET.AGLX", []byte(`{"seq":1}`))
	f.Add("CONSUMER.INFO.AGLX.mine", []byte(nil))
	f.Add("CONSUMER.DELETE.AGLX."+NodeConsumerPrefix+"relay", []byte(nil))
	f.Add("STREAM.DELETE.AGLX", []byte(nil))
	f.Add("CONSUMER.NAMES.AGLX_WAL", []byte(nil))
	g := &readerGate{stream: stream}
	f.Fuzz(func(t *testing.T, rest string, data []byte) {
		if op, _, ok := cutConsumerOp(rest); ok && (op == "CREATE" || op == "DURABLE.CREATE") {
			return
		}
		body, err := g.check(rest, data)
		if err != nil {
			return
		}
		switch rest {
		case "INFO", "STREAM.NAMES", "STREAM.LIST", "STREAM.MSG.GET." + stream:
			return
		case "STREAM.INFO." + stream:
			if body != nil {
				t.Fatalf("the stream's info passed with options %q", body)
			}
			return
		}
		_, target, ok := cutConsumerOp(rest)
		if !ok {
			t.Fatalf("the gate passed $JS.API.%s", rest)
		}
		s, name, _ := strings.Cut(target, ".")
		name, _, _ = strings.Cut(name, ".")
		if s != stream || checkReaderConsumerName(name) != nil {
			t.Fatalf("the gate passed %s: stream %q, consumer %q", rest, s, name)
		}
	})
}
