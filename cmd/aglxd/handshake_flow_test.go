package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/aglx/ledger/protocol"
)

// TestHandshakesOverTheWire: on a real node, requests sent over TCP open
// handshakes and their answers end them, /v1/handshakes shows who owes
// whom an answer, and a restart, which rebuilds the tracker from the log,
// shows the same, byte for byte.
func TestHandshakesOverTheWire(t *testing.T) {
	dir := t.TempDir()
	m := startNode(t, dir)
	c := dial(t, m.TCPAddr())
	const owner, worker, lead = "agent://owner.local", "agent://worker.local", "agent://lead.local"
	send := func(from, to, typ, body string) uint64 {
		t.Helper()
		a := lfSendAndRead(t, c, lfFrame(from, to, typ, body))
		if a.typ != "ack" {
			t.Fatalf("%s: %s", typ, a)
		}
		return a.seq()
	}
	assign := send(owner, worker, protocol.TypeTaskAssign, `{"task":"data.analyze","task_id":"t-1"}`)
	send(owner, worker, protocol.TypeTaskAssign, `{"task":"data.analyze","task_id":"t-2"}`)
	shutdown := send(lead, worker, protocol.TypeShutdownRequest, `{"request_id":"s-1","reason":"maintenance"}`)
	send(worker, owner, protocol.TypeTaskResult, `{"task_id":"t-1","status":"SUCCESS"}`)
	last := send(worker, lead, protocol.TypeShutdownResponse, `{"request_id":"s-1","approve":false,"reason":"busy with t-2"}`)

	var one struct {
		State, Answer, Detail, Requester, Responder string
	}
	if err := json.Unmarshal(lfGet(t, m, "/v1/handshakes/"+strconv.FormatUint(assign, 10), last), &one); err != nil {
		t.Fatal(err)
	}
	if one.State != "approved" || one.Answer != protocol.TypeTaskResult || one.Detail != "SUCCESS" || one.Requester != owner || one.Responder != worker {
		t.Fatalf("task t-1: %+v", one)
	}
	if err := json.Unmarshal(lfGet(t, m, "/v1/handshakes/"+strconv.FormatUint(shutdown, 10), last), &one); err != nil {
		t.Fatal(err)
	}
	if one.State != "rejected" || one.Detail != "busy with t-2" {
		t.Fatalf("the shutdown: %+v", one)
	}
	var list struct {
		Pending    int `json:"pending"`
		Handshakes []struct {
			Key, State string
		} `json:"handshakes"`
	}
	if err := json.Unmarshal(lfGet(t, m, "/v1/handshakes?agent=agent://worker.local&state=pending", last), &list); err != nil {
		t.Fatal(err)
	}
	if list.Pending != 1 || len(list.Handshakes) != 1 || list.Handshakes[0].Key != "t-2" {
		t.Fatalf("what the worker owes: %+v", list)
	}
	if metrics := string(lfGetMetrics(t, m)); !strings.Contains(metrics, "\naglx_handshakes_pending 1\n") {
		t.Errorf("/metrics does not say one handshake is pending:\n%s", metrics)
	}
	for _, bad := range []string{"/v1/handshakes?state=done", "/v1/handshakes?kind=task.result", "/v1/handshakes?agent=worker", "/v1/handshakes/x"} {
		resp, err := http.Get("http://" + m.HTTPAddr() + bad)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("GET %s: %d, want 400", bad, resp.StatusCode)
		}
	}

	before := lfGet(t, m, "/v1/handshakes", last)
	m.Close(context.Background())
	m = startNode(t, dir)
	if after := lfGet(t, m, "/v1/handshakes", last); !bytes.Equal(before, after) {
		t.Fatalf("after a restart:\n%s\nbefore:\n%s", after, before)
	}
}

// lfGetMetrics reads /metrics.
func lfGetMetrics(t *testing.T, m *Main) []byte {
	t.Helper()
	resp, err := http.Get("http://" + m.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
