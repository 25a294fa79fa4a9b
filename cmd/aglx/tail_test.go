package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/protocol"
	"github.com/oklog/ulid/v2"
)

// TestTailPrintsFramesAsStored: tail printed protocol.Encode of each
// event, which writes a CONTENT-LENGTH of its own: a frame sent with a
// wrong CONTENT-LENGTH: 112 showed 133, and one sent without any showed
// one. It prints the stored headers now, in order, with their spelling,
// repeats and values as they came, and the stored body.
func TestTailPrintsFramesAsStored(t *testing.T) {
	n := startTestNode(t)
	const head = "FROM: agent://a.local\nTO: agent://b.local\nTYPE: task.reject\n"
	tests := []struct {
		name, headers, body string
	}{
		{"a wrong CONTENT-LENGTH", head + "CONTENT-TYPE: application/json\nCONTENT-LENGTH: 112\n", `{"task_id": "t1", "reason": "busy"}`},
		{"no CONTENT-LENGTH", head, `{"task_id": "t1", "reason": "busy"}`},
		{"a right CONTENT-LENGTH, spelt otherwise", head + "Content-Length: 35\n", `{"task_id": "t1", "reason": "busy"}`},
		{"repeated headers in the sender's spelling", "FROM: agent://a.local\nX-Trace: one\nTO: agent://b.local\nx-trace: two\nTYPE: task.reject\nX-TRACE: one\n", `{"task_id": "t1", "reason": "busy"}`},
		{"a body over several lines", head + "CONTENT-LENGTH: 7\n", "{\n    \"task_id\": \"t1\",\n    \"reason\": \"busy\"\n}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			frame := "AGLX/1.0 TCP\n" + tt.headers + "\n" + tt.body + "\n"
			var out bytes.Buffer
			if err := runSend([]string{"--addr", n.tcp}, strings.NewReader(frame), &out); err != nil {
				t.Fatalf("aglx send = %v\n%s", err, out.String())
			}
			// The ack names the event's place in the log.
			m := regexp.MustCompile(`"seq":(\d+)`).FindStringSubmatch(out.String())
			if m == nil {
				t.Fatalf("no seq in the reply:\n%s", out.String())
			}
			seq, _ := strconv.ParseUint(m[1], 10, 64)
			n.waitPublished(t, seq)
			var tail bytes.Buffer
			if err := runTail(context.Background(), []string{"--nats", n.natsURL, "--no-follow", "--seq", fmt.Sprint(seq)}, &tail); err != nil {
				t.Fatalf("aglx tail = %v", err)
			}
			// One event: its comment line, the frame, a blank line.
			comment, got, ok := strings.Cut(tail.String(), "\n")
			if !ok || !strings.HasPrefix(comment, fmt.Sprintf("# seq %d ", seq)) {
				t.Fatalf("aglx tail printed %q; want the event at seq %d first", tail.String(), seq)
			}
			if want := frame + "\n"; got != want {
				t.Fatalf("aglx tail printed the frame\n%q\nwant it as sent\n%q", got, want)
			}
		})
	}
}

// TestTailPrintsReceivedAtAsStored: tail --json wrote received_at through
// time.Time's JSON, which drops trailing zeros (.46328735Z for the
// stream's .463287350Z), so that the strings no longer sorted as the
// times. It writes the stream's own text now: nine digits, UTC. The
// cases are in time order, and so must the printed texts be.
func TestTailPrintsReceivedAtAsStored(t *testing.T) {
	n := startTestNode(t)
	base := time.Date(2026, 11, 30, 4, 27, 14, 0, time.UTC)
	tests := []struct {
		name string
		at   time.Time
		want string
	}{
		{"a tenth of a second", base.Add(100 * time.Millisecond), "2026-11-30T04:27:14.100000000Z"},
		{"one trailing zero", base.Add(463287350), "2026-11-30T04:27:14.463287350Z"},
		{"the next nanosecond", base.Add(463287351), "2026-11-30T04:27:14.463287351Z"},
		{"a whole second", base.Add(time.Second), "2026-11-30T04:27:15.000000000Z"},
		{"kept in another zone", base.Add(2*time.Second + 5).In(time.FixedZone("CET", 3600)), "2026-11-30T04:27:16.000000005Z"},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tt := range tests {
		appendTaskReject(ctx, t, n, tt.at, []byte("{}"))
	}
	n.waitPublished(t, uint64(len(tests)))
	var tail bytes.Buffer
	if err := runTail(ctx, []string{"--nats", n.natsURL, "--no-follow", "--json"}, &tail); err != nil {
		t.Fatalf("aglx tail = %v", err)
	}
	st, err := n.log.JetStream().Stream(ctx, events.StreamNameDefault)
	if err != nil {
		t.Fatal(err)
	}
	var printed []string
	sc := bufio.NewScanner(&tail)
	for sc.Scan() {
		var l struct {
			Seq        uint64 `json:"seq"`
			ReceivedAt string `json:"received_at"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		printed = append(printed, l.ReceivedAt)
		if l.Seq < 1 || int(l.Seq) > len(tests) {
			t.Fatalf("line %q: no event of this test's", sc.Text())
		}
		tt := tests[l.Seq-1]
		// The stream's own text, from the stored envelope.
		m, err := st.GetMsg(ctx, l.Seq)
		if err != nil {
			t.Fatal(err)
		}
		var stored struct {
			ReceivedAt string `json:"received_at"`
		}
		if err := json.Unmarshal([]byte(m.Header.Get(events.HdrEnvelope)), &stored); err != nil {
			t.Fatal(err)
		}
		if l.ReceivedAt != stored.ReceivedAt || l.ReceivedAt != tt.want {
			t.Errorf("%s: aglx tail --json printed received_at %q; the stream holds %q, want %q", tt.name, l.ReceivedAt, stored.ReceivedAt, tt.want)
		}
	}
	if len(printed) != len(tests) {
		t.Fatalf("aglx tail printed %d events, want %d:\n%s", len(printed), len(tests), tail.String())
	}
	if !slices.IsSorted(printed) {
		t.Errorf("received_at as printed does not sort as the times: %q", printed)
	}
}

// TestTailJSONGivesEveryBody: tail --json printed a JSON body with "<",
// ">" and "&" escaped (\u003c), and left a body that is not JSON out
// altogether, so an analyst reading the lines lost those events' bodies
// (helper-103). Now a JSON body keeps its characters, and any other body
// comes byte for byte in body_base64.
func TestTailJSONGivesEveryBody(t *testing.T) {
	n := startTestNode(t)
	tests := []struct {
		name                 string
		body                 []byte // nil: no body
		wantBody, wantBase64 string
	}{
		{"JSON with markup", []byte(`{"note": "<b>a & b</b>"}`), `{"note":"<b>a & b</b>"}`, ""},
		{"not JSON", []byte("plain <text>\x00\xff"), "", "cGxhaW4gPHRleHQ+AP8="},
		{"JSON, not UTF-8 (stored before the edge refused it)", []byte(`{"reason":"caf` + "\xe9" + `"}`), "", "eyJyZWFzb24iOiJjYWbpIn0="},
		{"none", nil, "", ""},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tt := range tests {
		appendTaskReject(ctx, t, n, time.Now(), tt.body)
	}
	n.waitPublished(t, uint64(len(tests)))
	var tail bytes.Buffer
	if err := runTail(ctx, []string{"--nats", n.natsURL, "--no-follow", "--json"}, &tail); err != nil {
		t.Fatalf("aglx tail = %v", err)
	}
	lines := strings.Split(strings.TrimSpace(tail.String()), "\n")
	if len(lines) != len(tests) {
		t.Fatalf("aglx tail printed %d lines, want %d:\n%s", len(lines), len(tests), tail.String())
	}
	for i, tt := range tests {
		var l struct {
			Body       json.RawMessage `json:"body"`
			BodyBase64 string          `json:"body_base64"`
			NoBody     bool            `json:"no_body"`
		}
		if err := json.Unmarshal([]byte(lines[i]), &l); err != nil {
			t.Fatalf("%s: line %q: %v", tt.name, lines[i], err)
		}
		if string(l.Body) != tt.wantBody || l.BodyBase64 != tt.wantBase64 || l.NoBody != (tt.body == nil) {
			t.Errorf("%s: printed %s", tt.name, lines[i])
		}
		if tt.wantBody != "" && !strings.Contains(lines[i], tt.wantBody) {
			t.Errorf("%s: the line escapes the body: %s", tt.name, lines[i])
		}
	}
}

// appendTaskReject appends a task.reject from agent://a.local to
// agent://b.local, received at at, with body, straight to n's log.
func appendTaskReject(ctx context.Context, t *testing.T, n testNode, at time.Time, body []byte) {
	t.Helper()
	appendReject(ctx, t, n.log, at, body)
}

// appendReject appends a task.reject from agent://a.local to
// agent://b.local, received at at, with body, to l, and returns its seq.
func appendReject(ctx context.Context, t *testing.T, l *events.Log, at time.Time, body []byte) uint64 {
	t.Helper()
	id := ulid.Make().String()
	env := &events.Envelope{ID: id, MsgID: id, Type: "task.reject", From: "agent://a.local", To: "agent://b.local",
		Transport: events.TransportTCP, Declared: protocol.TransportTCP, Peer: "127.0.0.1:1", ReceivedAt: at,
		Headers: []protocol.Header{{Name: "FROM", Value: "agent://a.local"}, {Name: "TO", Value: "agent://b.local"}, {Name: "TYPE", Value: "task.reject"}},
		Body:    body}
	a, err := l.Append(ctx, env).Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return a.Seq
}
