package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aglx/ledger/bridge"
	"github.com/aglx/ledger/events"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestExternalNATS runs the node against a separate NATS server
// (--nats-url), as an operator with a NATS cluster would: the node creates
// its streams there, acknowledges frames, and folds them.
func TestExternalNATS(t *testing.T) {
	ns := startExternalNATS(t)

	m := startNodeWith(t, t.TempDir(), func(c *Config) { c.NATSURL = ns.ClientURL() })
	c := dial(t, m.TCPAddr())
	c.Write(referenceFiles(t)[3]) // task.result
	c.Flush()
	_, a := readAck(t, c)
	ev := getEvent(t, m, openLogAt(t, ns.ClientURL()), a.Seq)
	if ev.Type != "task.result" || ev.ID != a.EventID {
		t.Fatalf("stored %+v", ev)
	}
}

// operatorMaxPayload is the max_payload OPERATIONS.md asks of an
// operator's NATS server for full-size batches: 4 MiB + 129 KiB, rounded
// up. NATS's own default, 1 MiB, is below what the largest event needs,
// and the node refuses it.
const operatorMaxPayload = 5 << 20 // bytes

// startExternalNATS starts a NATS server with JetStream on a random
// loopback port, apart from any node, and stops it when the test ends
// (after the cleanups registered later, such as the node's).
func startExternalNATS(t *testing.T) *server.Server {
	t.Helper()
	ns, err := startNATSAt(t, t.TempDir(), server.RANDOM_PORT)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	return ns
}

// startNATSCluster starts n clustered NATS servers with JetStream on
// random loopback ports and waits until a stream can have a copy on each.
func startNATSCluster(t *testing.T, n int) []*server.Server {
	t.Helper()
	// Every server must be told the routes before it starts, so the cluster
	// ports are picked ahead; another process may take one in between, and
	// then the whole cluster is started again on new ports.
	var servers []*server.Server
	for attempt := 1; ; attempt++ {
		var err error
		if servers, err = startNATSServers(t, n); err == nil {
			break
		}
		if attempt == 3 {
			t.Fatal(err)
		}
		t.Logf("cluster start %d: %v; again on other ports", attempt, err)
	}
	// Ready when a stream with a copy on every server can be placed: a
	// leader alone is not enough, the others must be known to it too.
	js := jetStreamAt(t, servers[0].ClientURL())
	probe := jetstream.StreamConfig{Name: "CLUSTER_PROBE", Subjects: []string{"cluster.probe"}, Replicas: n}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := js.CreateStream(ctx, probe)
		if err == nil {
			err = js.DeleteStream(ctx, probe.Name)
		}
		cancel()
		if err == nil {
			return servers
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cluster's JetStream never got ready: %v", err)
		}
	}
}

// startNATSServers starts n servers routed to each other. If one does not
// come up, it stops them all and says why.
func startNATSServers(t *testing.T, n int) ([]*server.Server, error) {
	clusterAddrs := make([]string, n)
	routes := make([]*url.URL, n)
	for i := range clusterAddrs {
		clusterAddrs[i] = freeAddr(t)
		routes[i] = &url.URL{Scheme: "nats-route", Host: clusterAddrs[i]}
	}
	servers := make([]*server.Server, 0, n)
	stop := func() {
		for _, ns := range servers {
			ns.Shutdown()
			ns.WaitForShutdown()
		}
	}
	for i := range n {
		_, port, _ := net.SplitHostPort(clusterAddrs[i])
		p, _ := strconv.Atoi(port)
		ns, err := server.NewServer(&server.Options{
			ServerName: fmt.Sprintf("n%d", i), Host: "127.0.0.1", Port: server.RANDOM_PORT,
			JetStream: true, StoreDir: t.TempDir(), SyncAlways: true, NoSigs: true, MaxPayload: operatorMaxPayload,
			Cluster: server.ClusterOpts{Name: "aglx-test", Host: "127.0.0.1", Port: p},
			Routes:  routes,
		})
		if err != nil {
			stop()
			return nil, err
		}
		go ns.Start()
		servers = append(servers, ns)
	}
	for i, ns := range servers {
		if !ns.ReadyForConnections(10 * time.Second) { // a bound port: a second at most
			stop()
			return nil, fmt.Errorf("nats-server n%d (cluster port %s) did not start", i, clusterAddrs[i])
		}
	}
	t.Cleanup(stop)
	return servers, nil
}

// TestReplicatedStreams runs the node against a three-server NATS cluster
// with --replicas 3: every stream it keeps (the event stream, the
// write-ahead stream, the relay's cursor) has three copies, and a frame is
// acknowledged and stored as usual.
func TestReplicatedStreams(t *testing.T) {
	cluster := startNATSCluster(t, 3)
	m := startNodeWith(t, t.TempDir(), func(c *Config) {
		c.NATSURL = cluster[0].ClientURL()
		c.Replicas = 3
		c.Relay = true
	})
	c := dial(t, m.TCPAddr())
	c.Write(referenceFiles(t)[3]) // task.result
	c.Flush()
	_, a := readAck(t, c)
	if ev := getEvent(t, m, openLogAt(t, cluster[1].ClientURL()), a.Seq); ev.Type != "task.result" || ev.ID != a.EventID {
		t.Fatalf("stored %+v", ev)
	}

	js := jetStreamAt(t, cluster[2].ClientURL())
	ctx := context.Background()
	for _, name := range []string{events.StreamNameDefault, events.StreamNameDefault + "_WAL", "KV_" + bridge.RelayCursorBucket} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.Config.Replicas != 3 || info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
			t.Fatalf("stream %s: %d replicas configured, cluster %+v; want 3 copies", name, info.Config.Replicas, info.Cluster)
		}
	}
}

// TestConfigValidate: settings that cannot work fail at start, with the
// flag's name in the error.
func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string // "" for valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"replicas on a cluster", func(c *Config) { c.NATSURL, c.Replicas = "nats://127.0.0.1:4222", 3 }, ""},
		{"replicas on the embedded server", func(c *Config) { c.Replicas = 3 }, "--replicas 3: the embedded server is one server"},
		{"no replicas", func(c *Config) { c.Replicas = 0 }, "--replicas 0: must be 1, 3 or 5"},
		{"too many replicas", func(c *Config) { c.NATSURL, c.Replicas = "nats://127.0.0.1:4222", 7 }, "--replicas 7: must be 1, 3 or 5"},
		{"even replicas", func(c *Config) { c.NATSURL, c.Replicas = "nats://127.0.0.1:4222", 2 }, "--replicas 2: must be 1, 3 or 5"},
		{"body too small", func(c *Config) { c.BodySizeMax = 10 }, "--body-max 10"},
		{"bad fsync", func(c *Config) { c.Fsync = "sometimes" }, "--fsync"},
		// Both were ignored without a word (helper-139).
		{"fsync with a cluster", func(c *Config) { c.NATSURL, c.Fsync = "nats://127.0.0.1:4222", "1s" }, "--fsync 1s with --nats-url"},
		{"tls files without a tls port", func(c *Config) { c.TLSCert, c.TLSKey, c.TLSListen = "c.pem", "k.pem", "" }, "no TLS port serves them"},
		{"idle timeout too short", func(c *Config) { c.IdleTimeout = time.Millisecond }, "--idle-timeout 1ms: must be between 1s and 24h"},
		{"log level", func(c *Config) { c.LogLevel = "verbose" }, `--log-level "verbose"`},
		{"log format", func(c *Config) { c.LogFormat = "xml" }, `--log-format "xml"`},
		{"name not canonical", func(c *Config) { c.Name = "registry://Node.Local" }, `canonical form, "registry://node.local"`},
		{"name not a URI", func(c *Config) { c.Name = "node" }, `--name "node": `},
		// Taken, it stamped the store, and later starts under the right
		// name needed --take-over-store (helper-81).
		{"name an agent's", func(c *Config) { c.Name = "agent://x.local" }, `the node's name is a registry:// URI, such as registry://x.local`},
		{"port out of range", func(c *Config) { c.Listen = "127.0.0.1:99999" }, `--listen "127.0.0.1:99999": port 99999 is out of range`},
		// The second bind failed after the store's repair, naming the
		// flag as if another process held the port.
		{"listen on the http port", func(c *Config) { c.Listen = bridge.DefaultHTTPAddr }, `--http "127.0.0.1:2595" and --listen "127.0.0.1:2595": one port cannot take both`},
		{"tls on every address of the nats port", func(c *Config) { c.TLSListen = ":4222" }, `--tls-listen ":4222" and --nats-listen "127.0.0.1:4222"`},
		{"nats port unused with a cluster", func(c *Config) { c.NATSURL, c.Listen = "nats://127.0.0.1:4222", "127.0.0.1:4222" }, ""},
		{"udp beside tcp", func(c *Config) { c.UDP = c.Listen }, ""},
		{"no data dir", func(c *Config) { c.DataDir = "" }, "--data: must not be empty"},
		// It put the node key, the TLS files and the saved state in the
		// working directory, unlocked (helper-139).
		{"no data dir with a cluster", func(c *Config) { c.NATSURL, c.DataDir = "nats://127.0.0.1:4222", "" }, "--data: must not be empty"},
		{"relay networks without a prefix length", func(c *Config) { c.RelayNetworks = "10.0.0.0" }, "is not a CIDR such as 10.0.0.0/8"},
		{"sync interval too short", func(c *Config) { c.SyncInterval = time.Nanosecond }, "--sync-interval 1ns: must be between 100ms and 24h"},
		{"sync interval negative", func(c *Config) { c.SyncInterval = -time.Second }, "--sync-interval -1s"},
		{"sync interval at its bound", func(c *Config) { c.SyncInterval = 100 * time.Millisecond }, ""},
		{"sync from a peer", func(c *Config) { c.SyncFrom = []string{"registry://backup.local", "registry://eu.example"} }, ""},
		{"sync from an agent", func(c *Config) { c.SyncFrom = []string{"agent://x.local"} }, `--sync-from: sync peer "agent://x.local": a peer is a registry`},
		{"sync from a name not canonical", func(c *Config) { c.SyncFrom = []string{"registry://Backup.Local"} }, `canonical form, "registry://backup.local"`},
		{"sync from itself", func(c *Config) { c.SyncFrom = []string{c.Name} }, "this node's own name"},
		{"sync from no URI", func(c *Config) { c.SyncFrom = []string{"backup"} }, `--sync-from: sync peer "backup": `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.edit(&c)
			err := c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "Bad Request")):
				t.Fatalf("Validate() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// jetStreamAt connects to the NATS server at url for the rest of the test
// and returns a JetStream handle on it.
func jetStreamAt(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// TestNATSCredentialsStayOutOfLogs: --nats-url may carry a password or a
// token, and the node logs the URL it uses and names it in errors. Logs
// are read by more people than may connect to NATS.
func TestNATSCredentialsStayOutOfLogs(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"nats://127.0.0.1:4222", "nats://127.0.0.1:4222"},
		{"nats://aglxd:s3cret@127.0.0.1:4222", "nats://redacted@127.0.0.1:4222"},
		{"nats://s3cret@a:4222, tls://u:s3cret@b:4222", "nats://redacted@a:4222,tls://redacted@b:4222"},
		{"nats://u:s3cret@[::1", "(a URL that does not parse)"},
	} {
		if got := redactURLs(tt.in); got != tt.want {
			t.Errorf("redactURLs(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	// The error of a start against a server that is not there.
	startKeepsPasswordOut(t, "nats://aglxd:s3cret@"+freeAddr(t))
}

// startKeepsPasswordOut starts a node against natsURL, whose password is
// s3cret and where no server listens, and fails the test unless the start
// fails and neither its error nor its log holds the password.
func startKeepsPasswordOut(t *testing.T, natsURL string) {
	t.Helper()
	var logs strings.Builder
	cfg := DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Listen, cfg.UDP, cfg.HTTP, cfg.NATSListen, cfg.TLSListen = "127.0.0.1:0", "", "", "", ""
	cfg.NATSURL = natsURL
	m := NewMain(cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	err := m.Run(context.Background())
	m.Close(context.Background())
	if err == nil {
		t.Fatal("the node started against a NATS server that is not there")
	}
	if strings.Contains(err.Error(), "s3cret") || strings.Contains(logs.String(), "s3cret") {
		t.Errorf("the password is in the error or the log: %v\n%s", err, logs.String())
	}
}

// TestSchemelessNATSURLCredentialsStayOutOfLogs: the NATS client takes a
// URL without a scheme as nats:// (user:pass@host:4222, token@host), so
// --nats-url may carry its password that way too; url.Parse reads the
// user as a scheme and the password as the rest, and the redaction let
// the URL through whole.
func TestSchemelessNATSURLCredentialsStayOutOfLogs(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"aglxd:s3cret@127.0.0.1:4222", "nats://redacted@127.0.0.1:4222"},
		{"s3cret@127.0.0.1", "nats://redacted@127.0.0.1"},
		{"127.0.0.1:4222", "127.0.0.1:4222"},
		{"nats://a:4222,u:s3cret@b:4222", "nats://a:4222,nats://redacted@b:4222"},
	} {
		if got := redactURLs(tt.in); got != tt.want {
			t.Errorf("redactURLs(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	startKeepsPasswordOut(t, "aglxd:s3cret@"+freeAddr(t))
}
