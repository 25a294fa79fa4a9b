package bridge

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/projections"
	"github.com/aglx/ledger/protocol"
)

// TestZonePagesOverHTTP: GET /v1/zones/{zone} on a node, over real
// sockets, after agents joined and left its zone: the members in URI
// order, a page at a time from any after=, and no one who left. A page
// walked every agent that had ever left the zone (helper-98); the
// projections' TestZonePages counts that walk, and this test holds the
// answers to what they were.
func TestZonePagesOverHTTP(t *testing.T) {
	const node, zone = "registry://node.local", "lab"
	secret := []byte("lab secret for the http test 0123456789")
	l, quiet := openBenchLog(t)
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ob := projections.NewOutbox()
	reg := projections.NewRegistry(projections.RegistryConfig{NodeURI: node, NodeKey: key, Outbox: ob,
		Zones: []projections.Zone{{ID: zone, Secret: secret, MinReputation: 0, Role: "analyst"}}, TokenKey: []byte("token key for the http test, 32 bytes")})
	runner := projections.NewRunner(l, quiet, reg)
	runUntilReady(t, runner)
	srv := New(l, Config{Name: node, AllowPlaintextSecurity: true,
		Answerer: projections.NewAnswers(runner, ob, projections.AnswersRegistry)}, quiet)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.ServeTCP(ln, events.TransportTCP)
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	base := serveHTTP(t, HTTPHandler(API{Log: l, Runner: runner, Registry: reg}))

	// Agents a000 to a299 join; all but five leave again. Those who left
	// sort between the members, so that a page from the start passes them.
	const agents = 300
	uri := func(i int) string { return fmt.Sprintf("agent://a%03d.local", i) }
	stay := []int{0, 7, 150, 151, 299}
	var members []string
	for _, i := range stay {
		members = append(members, uri(i))
	}
	var register, join, leave []*protocol.Frame
	now := time.Now().UTC().Format(time.RFC3339)
	for i := range agents {
		register = append(register, zoneTestFrame(uri(i), node, protocol.TypeRegistryUpdate,
			fmt.Sprintf(`{"agent_name":"A%d","agent_type":"worker","status":"READY","ttl":3600}`, i)))
		f := zoneTestFrame(uri(i), node, protocol.TypeZoneJoin, fmt.Sprintf(`{"zone_id":%q,"agent_id":"a%d","timestamp":%q}`, zone, i, now))
		sig, err := protocol.SignHMAC(secret, f.From(), f.To(), f.Type(), "", f.Body)
		if err != nil {
			t.Fatal(err)
		}
		if f.Body, err = protocol.SetSignature(f.Body, sig); err != nil {
			t.Fatal(err)
		}
		join = append(join, f)
		if !slices.Contains(stay, i) {
			leave = append(leave, zoneTestFrame(uri(i), node, protocol.TypeZoneLeave, fmt.Sprintf(`{"zone_id":%q,"timestamp":%q}`, zone, now)))
		}
	}
	c, err := Dial(context.Background(), ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Conn().SetDeadline(time.Now().Add(60 * time.Second))
	var seq uint64
	for _, phase := range []struct {
		frames []*protocol.Frame
		reply  string
	}{{register, protocol.TypeRegistryAck}, {join, protocol.TypeZoneConfirm}, {leave, protocol.TypeAck}} {
		seq = sendAll(t, c, phase.frames, phase.reply)
	}
	if seq == 0 {
		t.Fatal("no leave's ack named its seq")
	}

	get := func(query string) (int, projections.ZoneView) {
		t.Helper()
		a := getAnswer(t, base+"/v1/zones/"+zone+"?seq="+fmt.Sprint(seq)+query)
		var v projections.ZoneView
		if a.code == http.StatusOK {
			if err := json.Unmarshal(a.body, &v); err != nil {
				t.Fatalf("GET /v1/zones/%s?%s: %v in %s", zone, query, err, a.body)
			}
		}
		return a.code, v
	}
	tests := []struct {
		name  string
		after string
		limit int // 0: none given
		want  []string
	}{
		{"all", "", 0, members},
		{"the first two", "", 2, members[:2]},
		{"after a member", members[1], 2, members[2:4]},
		{"after one who left", uri(100), 0, members[2:]},
		{"after the last of them", uri(299), 0, nil},
		{"after every URI", "agent://zzz.local", 5, nil},
		{"a limit past the page's size", "", 5000, members},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := "&after=" + url.QueryEscape(tt.after)
			if tt.limit > 0 {
				q += fmt.Sprintf("&limit=%d", tt.limit)
			}
			code, v := get(q)
			var got []string
			for _, m := range v.Members {
				got = append(got, m.AgentURI)
				if m.Role != "analyst" || !m.Active {
					t.Errorf("member %+v: want role analyst, active", m)
				}
			}
			if code != http.StatusOK || v.ID != zone || v.Role != "analyst" || !slices.Equal(got, tt.want) {
				t.Errorf("GET /v1/zones/%s?%s = %d %s %v, want 200 %s %v", zone, q, code, v.ID, got, zone, tt.want)
			}
		})
	}
	t.Run("paged by two, each page after the last", func(t *testing.T) {
		var got []string
		for after := ""; ; {
			_, v := get("&limit=2&after=" + url.QueryEscape(after))
			if len(v.Members) == 0 {
				break
			}
			for _, m := range v.Members {
				got = append(got, m.AgentURI)
			}
			after = v.Members[len(v.Members)-1].AgentURI
		}
		if !slices.Equal(got, members) {
			t.Errorf("paged by two: %v, want %v", got, members)
		}
	})
	t.Run("an unknown zone", func(t *testing.T) {
		if a := getAnswer(t, base+"/v1/zones/nowhere"); a.code != http.StatusNotFound || !strings.Contains(string(a.body), "no zone nowhere") {
			t.Errorf("GET /v1/zones/nowhere = %d %s, want 404 naming it", a.code, a.body)
		}
	})
}

// zoneTestFrame is a TCP frame with an ID of its own.
func zoneTestFrame(from, to, typ, body string) *protocol.Frame {
	f := &protocol.Frame{Transport: protocol.TransportTCP, Body: []byte(body)}
	for _, h := range [][2]string{{"FROM", from}, {"TO", to}, {"TYPE", typ}, {"ID", typ + "-" + from}, {"CONTENT-TYPE", "application/json"}} {
		f.Headers = append(f.Headers, protocol.Header{Name: h[0], Value: h[1]})
	}
	return f
}

// sendAll writes frames on c while it reads their replies, each of TYPE
// reply and a 2xx STATUS, and returns the highest seq they name.
func sendAll(t *testing.T, c *Client, frames []*protocol.Frame, reply string) uint64 {
	t.Helper()
	written := make(chan error, 1)
	go func() {
		for _, f := range frames {
			if err := c.WriteFrame(f); err != nil {
				written <- err
				return
			}
		}
		written <- c.Flush()
	}()
	var last uint64
	for range frames {
		f, err := c.ReadReply()
		if err != nil {
			t.Fatalf("reading a reply: %v", err)
		}
		if f.Type() != reply || !strings.HasPrefix(f.Value(protocol.HeaderStatus), "2") {
			t.Fatalf("reply %s %s %s, want %s", f.Type(), f.Value(protocol.HeaderStatus), f.Body, reply)
		}
		var b struct {
			Seq uint64 `json:"seq"`
		}
		if json.Unmarshal(f.Body, &b) == nil {
			last = max(last, b.Seq)
		}
	}
	if err := <-written; err != nil {
		t.Fatalf("writing the frames: %v", err)
	}
	return last
}
