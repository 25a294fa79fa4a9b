package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// registryNode is an auditNode, its folds running, with an agent
// registered for each status given (agent://a0.local with the first, and
// so on), applied before it returns.
func registryNode(t *testing.T, statuses ...string) auditNode {
	t.Helper()
	n := startAuditNode(t)
	n.startFolds()
	var in strings.Builder
	for i, s := range statuses {
		fmt.Fprintf(&in, "AGLX/1.0 TCP\nFROM: agent://a%d.local\nTO: registry://localhost\nTYPE: registry.update\n\n"+
			`{"agent_name": "A%d", "agent_type": "worker", "capabilities": ["data.analyze"], "status": %q, "ttl": 3600}`+"\n", i, i, s)
	}
	var out strings.Builder
	if err := runSend([]string{"--addr", n.tcp}, strings.NewReader(in.String()), &out); err != nil {
		t.Fatalf("registering %v: %v\n%s", statuses, err, out.String())
	}
	// The log starts empty: the last registration is at seq len(statuses).
	var v map[string]any
	if err := getJSON(n.http, fmt.Sprintf("/v1/agents?seq=%d", len(statuses)), &v); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestAgentsStatusMustBeInUse: aglx agents --status bogus printed an empty
// table and exited 0, as if the registry were empty. An agent's status is
// its own word, so the node cannot refuse one as unknown; when none of its
// agents has the status asked, /v1/agents lists the statuses they have,
// and aglx agents makes that an error naming them. A status matches
// ignoring case, and the registry's own (READY, EXPIRED) are never
// unknown.
func TestAgentsStatusMustBeInUse(t *testing.T) {
	n := registryNode(t, "READY", "BUSY", "Idle")
	tests := []struct {
		status string
		rows   []string // the agents listed
		err    string   // or the error, which names the statuses in use
	}{
		{status: "BUSY", rows: []string{"agent://a1.local"}},
		{status: "busy", rows: []string{"agent://a1.local"}},
		{status: "IDLE", rows: []string{"agent://a2.local"}},
		{status: "ready", rows: []string{"agent://a0.local"}},
		{status: "EXPIRED"}, // the registry's own: no agent has it, and that is no error
		{status: "bogus", err: `--status "bogus": no agent has that status; the agents' statuses are BUSY, Idle, READY`},
		{status: "BUSSY", err: "BUSY, Idle, READY"},
	}
	for _, tt := range tests {
		t.Run(tt.status, func(t *testing.T) {
			var out strings.Builder
			err := runAgents([]string{"--http", n.http, "--status", tt.status}, &out)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("aglx agents --status %s = %v, want an error with %q\n%s", tt.status, err, tt.err, out.String())
				}
				if out.Len() > 0 {
					t.Fatalf("aglx agents --status %s printed a table with its error:\n%s", tt.status, out.String())
				}
				return
			}
			if err != nil {
				t.Fatalf("aglx agents --status %s = %v", tt.status, err)
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")[1:] // after the header
			if len(lines) != len(tt.rows) {
				t.Fatalf("aglx agents --status %s listed %d agents, want %v:\n%s", tt.status, len(lines), tt.rows, out.String())
			}
			for i, uri := range tt.rows {
				if !strings.HasPrefix(lines[i], uri+" ") {
					t.Errorf("row %d = %q, want %s", i, lines[i], uri)
				}
			}
		})
	}
	// With --json the error is the same: a script must not take it for an
	// empty registry either.
	if err := runAgents([]string{"--http", n.http, "--status", "bogus", "--json"}, &strings.Builder{}); err == nil || !strings.Contains(err.Error(), "BUSY") {
		t.Fatalf("aglx agents --status bogus --json = %v, want the error", err)
	}
}

// TestAgentsAPIStatus: GET /v1/agents?status= answers a status no agent
// has with the statuses they have, most held first, as the agents wrote
// them; one no agent could have (longer than an agent's status may be) is
// a 400 in JSON that says so.
func TestAgentsAPIStatus(t *testing.T) {
	n := registryNode(t, "BUSY", "READY", "BUSY")
	tests := []struct {
		query    string
		code     int
		agents   int
		statuses string // fmt of the list, "" for none in the answer
		err      string
	}{
		{query: "status=BUSY", code: http.StatusOK, agents: 2},
		{query: "status=bogus", code: http.StatusOK, statuses: "[BUSY READY]"},
		{query: "status=bogus&after=agent://a2.local", code: http.StatusOK, statuses: "[BUSY READY]"},
		// BUSY is held, only not after a2 in URI order: the page is empty
		// and the status is known.
		{query: "status=BUSY&after=agent://a2.local", code: http.StatusOK},
		{query: "status=EXPIRED", code: http.StatusOK},
		{query: "status=" + strings.Repeat("X", 129), code: http.StatusBadRequest, err: "an agent's status is at most 128"},
	}
	for _, tt := range tests {
		t.Run(tt.query[:min(len(tt.query), 40)], func(t *testing.T) {
			var v struct {
				Agents   []map[string]any `json:"agents"`
				Statuses *[]string        `json:"statuses"`
			}
			err := getJSON(n.http, "/v1/agents?"+tt.query, &v)
			if tt.code != http.StatusOK {
				se, ok := err.(*statusError)
				if !ok || se.code != tt.code || !strings.Contains(se.msg, tt.err) {
					t.Fatalf("GET /v1/agents?%s = %v, want %d saying %q", tt.query, err, tt.code, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if v.Statuses != nil {
				got = fmt.Sprint(*v.Statuses)
			}
			if len(v.Agents) != tt.agents || got != tt.statuses {
				t.Fatalf("GET /v1/agents?%s = %d agents, statuses %q; want %d, %q", tt.query, len(v.Agents), got, tt.agents, tt.statuses)
			}
		})
	}
}

// TestAgentTakesJSON: aglx agent printed JSON always and refused --json,
// which every other query takes. It now prints the entry as the others
// print theirs, fields and tables, and the node's answer with --json.
func TestAgentTakesJSON(t *testing.T) {
	n := registryNode(t, "BUSY")
	tests := []struct {
		name string
		args []string
		json bool     // the output is the node's answer
		says []string // lines the output holds, spaces between columns made one
		err  string
	}{
		{name: "--json", args: []string{"agent://a0.local", "--json"}, json: true},
		{name: "--json first, URI in another case", args: []string{"--json", "agent://A0.local"}, json: true},
		{name: "a table", args: []string{"agent://a0.local"}, says: []string{
			"agent_uri agent://a0.local", "registered true", "status BUSY", "capabilities data.analyze", "reputation 0.5",
			"", "history", "at status cause seq"}},
		{name: "no such agent", args: []string{"agent://nobody.local", "--json"}, err: "no agent agent://nobody.local"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out strings.Builder
			err := runAgent(append([]string{"--http", n.http}, tt.args...), &out)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("aglx agent %v = %v, want an error with %q", tt.args, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("aglx agent %v = %v\n%s", tt.args, err, out.String())
			}
			var v struct {
				AgentURI string `json:"agent_uri"`
				Status   string `json:"status"`
				History  []any  `json:"history"`
			}
			isJSON := json.Unmarshal([]byte(out.String()), &v) == nil
			if isJSON != tt.json || tt.json && (v.AgentURI != "agent://a0.local" || v.Status != "BUSY" || len(v.History) != 1) {
				t.Fatalf("aglx agent %v printed (JSON: %v, want %v):\n%s", tt.args, isJSON, tt.json, out.String())
			}
			lines := strings.Split(out.String(), "\n")
			for i, l := range lines {
				lines[i] = strings.Join(strings.Fields(l), " ")
			}
			for _, want := range tt.says {
				if !slices.Contains(lines, want) {
					t.Errorf("aglx agent %v does not print %q:\n%s", tt.args, want, out.String())
				}
			}
			if tt.says != nil && !strings.HasSuffix(out.String(), " BUSY    registry.update  1\n") {
				t.Errorf("aglx agent %v does not end with its history:\n%s", tt.args, out.String())
			}
		})
	}
}

// TestPrintFields: a list prints as its items, an object as its JSON, and
// a member the answer does not have not at all.
func TestPrintFields(t *testing.T) {
	v := map[string]any{"status": "BUSY", "port": json.Number("7001"), "zones": []any{"z1", "z2"},
		"hint": map[string]any{"status": "READY", "seq": json.Number("12")}}
	var out strings.Builder
	printFields(&out, v, "status", "port", "zones", "address", "hint")
	want := "status\tBUSY\nport\t7001\nzones\tz1, z2\nhint\t{\"seq\":12,\"status\":\"READY\"}\n"
	if out.String() != want {
		t.Fatalf("printFields = %q, want %q", out.String(), want)
	}
}

// TestAgentsTableHasNoNil: an agent with no capabilities (one a peer
// synced has none) shows "-" in aglx agents' table, not Go's "<nil>"
// (helper-93).
func TestAgentsTableHasNoNil(t *testing.T) {
	n := startAuditNode(t)
	n.startFolds()
	in := "AGLX/1.0 TCP\nFROM: agent://bare.local\nTO: registry://localhost\nTYPE: registry.update\n\n" +
		`{"agent_name": "B", "agent_type": "worker", "status": "READY", "ttl": 3600}` + "\n"
	var out strings.Builder
	if err := runSend([]string{"--addr", n.tcp}, strings.NewReader(in), &out); err != nil {
		t.Fatalf("registering: %v\n%s", err, out.String())
	}
	var v map[string]any
	if err := getJSON(n.http, "/v1/agents?seq=1", &v); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := runAgents([]string{"--http", n.http}, &out); err != nil {
		t.Fatal(err)
	}
	line := ""
	for l := range strings.Lines(out.String()) {
		if strings.HasPrefix(l, "agent://bare.local") {
			line = l
		}
	}
	if line == "" || strings.Contains(line, "<nil>") || !strings.HasSuffix(strings.TrimSpace(line), " -") {
		t.Fatalf("aglx agents:\n%s\nwant agent://bare.local's row ending in - for no capabilities", out.String())
	}
}
