package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/aglx/ledger/bridge"
	"github.com/aglx/ledger/projections"
	"github.com/aglx/ledger/protocol"
)

// Config is everything aglxd can be told on its command line.
type Config struct {
	Name      string // the node's own URI
	Listen    string // AGLX over TCP
	TLSListen string // AGLX over TLS; "" disables
	TLSCert   string // certificate file; "" = self-signed in the data dir
	TLSKey    string
	// AllowPlaintextSecurity accepts security messages without TLS (tests).
	AllowPlaintextSecurity bool
	UDP                    string // AGLX over UDP; "" disables
	HTTP                   string // HTTP API; "" disables
	NATSListen             string // embedded server's client port; "" = in-process only
	NATSURL                string // use this NATS server instead of the embedded one
	// Replicas is how many servers of a NATS cluster (--nats-url) keep
	// each of the node's streams; the embedded server is one server.
	Replicas int
	DataDir  string
	// NodeKey is the node's signing key file; "" = DATA/keys/node.key.
	NodeKey string
	// Zones is the zone file (JSON); "" = no zones.
	Zones string
	// SyncTo are peer registries to push registry.sync to, each
	// "registry://NAME@HOST:PORT"; SyncInterval is how often.
	SyncTo       []string
	SyncInterval time.Duration
	// SyncFrom are the peer registries whose registry.sync this node
	// takes (projections.RegistryConfig.SyncFrom), in canonical form;
	// none: it takes none.
	SyncFrom []string
	// TakeOverStore lets the node start on a store written under another
	// name or key (events.Config.TakeOver).
	TakeOverStore bool
	// RotateNodeKey makes aglxd rotate the node's key and exit instead of
	// serving (rotate.go).
	RotateNodeKey bool
	// FullReplay has the start fold the whole log and not read the state
	// a clean stop saved (foldstate.go).
	FullReplay bool
	// PrepareStateFrom makes aglxd fold the log of the node whose NATS
	// is at this URL into the prepared state file and exit, for this
	// build's start after an upgrade (prepare.go).
	PrepareStateFrom string
	// SaveStateEvery is how often the folds' state is saved while the
	// node runs (checkpoint.go), so that a start after a crash folds
	// only what came after; 0: only at a clean stop.
	SaveStateEvery time.Duration
	// Relay delivers agent-to-agent messages to the addressees' registered
	// addresses, if those lie in RelayNetworks (CIDRs).
	Relay         bool
	RelayNetworks string
	// Fsync is "always" (every ack is on disk) or an interval such as "1s".
	Fsync          string
	BodySizeMax    int
	ConnectionsMax int
	// ConnectionsPerHostMax bounds one IP address's connections; 0 means a
	// quarter of ConnectionsMax.
	ConnectionsPerHostMax int
	PipelineMax           int
	IdleTimeout           time.Duration
	LogLevel              string
	LogFormat             string

	// tcpLn, set only by tests, is a listener already bound to Listen: a
	// test that must know a port before the node starts holds it open, so
	// no other process can take it in between.
	tcpLn net.Listener
	// ackTimeout, set only by tests, replaces events.AckTimeout.
	ackTimeout time.Duration
	// leaseTTL, set only by tests, replaces events.LeaseTTLDefault.
	leaseTTL time.Duration
	// build, set only by tests, stands in for the running binary's
	// SHA-256 and its version in a saved state's identity and the last
	// stop's record: one test binary plays an old build and a new one.
	build string
	// relayTimeout, set only by tests, replaces the relay's bound on one
	// delivery (bridge.Relay.Timeout), so that a test of slow addressees
	// need not wait out ten seconds at each attempt.
	relayTimeout time.Duration
	// afterRoundLoad, set only by tests, runs in each background save
	// once it has loaded the saved state (checkpointer.afterLoad).
	afterRoundLoad func()
}

// DefaultConfig is what `go run ./cmd/aglxd` runs with.
func DefaultConfig() Config {
	return Config{
		Name:           "registry://localhost",
		Listen:         bridge.DefaultTCPAddr,
		TLSListen:      bridge.DefaultTLSAddr,
		UDP:            bridge.DefaultTCPAddr,
		HTTP:           bridge.DefaultHTTPAddr,
		NATSListen:     bridge.DefaultNATSAddr,
		DataDir:        "./aglx-data",
		Fsync:          "always",
		BodySizeMax:    protocol.BodySizeMaxDefault,
		ConnectionsMax: bridge.ConnectionsMaxDefault,
		PipelineMax:    bridge.PipelineMaxDefault,
		IdleTimeout:    bridge.IdleTimeoutDefault,
		Relay:          true,
		RelayNetworks:  "127.0.0.0/8,::1/128",
		LogLevel:       "info",
		LogFormat:      "text",
		Replicas:       1,
		SaveStateEvery: saveStateEveryDefault,
	}
}

// saveStateEveryDefault is how often a running node saves its folds'
// state: a crash costs a start the folding of at most about this long of
// traffic (and the round in progress), and each round costs a fold of
// the traffic since the last, at most a quarter of one core
// (checkpointDuty), and a write of the whole state.
const saveStateEveryDefault = 10 * time.Minute

// saveStateEveryMin is the shortest --save-state-every but 0.
const saveStateEveryMin = 100 * time.Millisecond

// syncIntervalMin is the shortest --sync-interval.
const syncIntervalMin = 100 * time.Millisecond

// Bounds of the flags that have no bound of their own elsewhere: past
// them a value is a typo, not a setting.
const (
	connectionsMaxLimit = 1 << 20        // connections, --max-connections
	pipelineMaxLimit    = 1 << 16        // frames, --max-pipeline
	durationFlagMax     = 24 * time.Hour // --idle-timeout, --sync-interval, --save-state-every
)

// replicasMax is the most copies JetStream keeps of a stream.
const replicasMax = 5 // servers

// errVersion is parseFlags' answer to --version, as flag.ErrHelp is to
// -h: print the version and exit 0, before any other flag is checked and
// anything is made (no data dir, no lock, no port).
var errVersion = errors.New("--version")

func parseFlags(args []string) (Config, error) {
	c := DefaultConfig()
	fs := flag.NewFlagSet("aglxd", flag.ContinueOnError)
	version := fs.Bool("version", false, "print the build's version (module version or commit, its time, Go version) and exit")
	fs.StringVar(&c.Name, "name", c.Name, "the node's own AGLX URI")
	fs.StringVar(&c.Listen, "listen", c.Listen, "AGLX over TCP: address to listen on")
	fs.StringVar(&c.TLSListen, "tls-listen", c.TLSListen, "AGLX over TLS: address to listen on (empty: off); security messages are accepted only here")
	fs.StringVar(&c.TLSCert, "tls-cert", c.TLSCert, "TLS certificate (PEM); without it a self-signed one is made in the data dir")
	fs.StringVar(&c.TLSKey, "tls-key", c.TLSKey, "TLS private key (PEM) for --tls-cert")
	fs.BoolVar(&c.AllowPlaintextSecurity, "allow-plaintext-security", false, "accept auth.*, key.rotate and zone.* over plain TCP (for tests only)")
	fs.StringVar(&c.UDP, "udp", c.UDP, "AGLX over UDP: address to listen on (empty: off)")
	fs.StringVar(&c.HTTP, "http", c.HTTP, "HTTP API and /healthz: address to listen on (empty: off)")
	fs.StringVar(&c.NATSListen, "nats-listen", c.NATSListen, "embedded NATS server: client address for other NATS clients (empty: in-process only)")
	fs.StringVar(&c.NATSURL, "nats-url", c.NATSURL, "use this NATS server (with JetStream) instead of the embedded one")
	fs.IntVar(&c.Replicas, "replicas", c.Replicas, "servers of the --nats-url cluster that keep a copy of each stream (1, 3 or 5; the embedded server: 1)")
	fs.StringVar(&c.DataDir, "data", c.DataDir, "data directory (JetStream store, keys)")
	fs.Func("sync-to", "push registry changes to this peer registry: registry://NAME@HOST:TLSPORT?ca=FILE or ?pin=FINGERPRINT, or registry://NAME@HOST:PORT?plain over plain TCP (repeatable)", func(v string) error {
		c.SyncTo = append(c.SyncTo, v)
		return nil
	})
	fs.DurationVar(&c.SyncInterval, "sync-interval", bridge.SyncIntervalDefault, "how often to push registry changes to --sync-to peers")
	fs.Func("sync-from", "take registry.sync from this peer registry, registry://NAME, once its key is bound here (repeatable; none: no peer's sync is taken)", func(v string) error {
		c.SyncFrom = append(c.SyncFrom, v)
		return nil
	})
	fs.BoolVar(&c.Relay, "relay", c.Relay, "deliver messages agents address to each other to the address each addressee registered")
	fs.BoolVar(&c.TakeOverStore, "take-over-store", false, "start on a store another --name or node key wrote (a lost key, a renamed node): that node's own mints and registry entries are void on replay")
	fs.BoolVar(&c.RotateNodeKey, "rotate-node-key", false, "rotate the node's key and exit: record a key.rotate signed with the current key, then replace --node-key with a new Ed25519 key (or with the key put in NODE-KEY.next beforehand); run it with the node stopped and the flags it runs with")
	fs.BoolVar(&c.FullReplay, "full-replay", false, "fold the whole log at start instead of taking up the saved state (DATA/keys/folds.state, from the last clean stop or background save); the next save, in the background or at the stop, writes a new one")
	fs.StringVar(&c.PrepareStateFrom, "prepare-state-from", "", "before an upgrade, with the new build: fold the log of the node running at this NATS URL (its --nats-listen, or the --nats-url it uses) into DATA/keys/folds.next.state and exit, so that this build's first start folds only what came after; give the flags the node runs with")
	fs.DurationVar(&c.SaveStateEvery, "save-state-every", c.SaveStateEvery, "save the folds' state (DATA/keys/folds.state) this often while running, in the background, so that a start after a crash folds only what came after (0: only at a clean stop)")
	fs.StringVar(&c.RelayNetworks, "relay-networks", c.RelayNetworks, "comma-separated CIDRs the relay may connect to (agents choose the addresses: widen with care)")
	fs.StringVar(&c.Zones, "zones", c.Zones, "zone file (JSON): each zone's id, HMAC secret, minimum reputation and role")
	fs.StringVar(&c.NodeKey, "node-key", c.NodeKey, "the node's signing key (PKCS #8 PEM); made on first start (default DATA/keys/node.key)")
	fs.StringVar(&c.Fsync, "fsync", c.Fsync, `"always": an ack means the event is on disk; or an interval such as 1s, which is faster but can lose acknowledged events on power loss`)
	fs.IntVar(&c.BodySizeMax, "body-max", c.BodySizeMax, "largest accepted frame body, bytes")
	fs.IntVar(&c.ConnectionsMax, "max-connections", c.ConnectionsMax, "most concurrent AGLX connections, TCP and TLS together")
	fs.IntVar(&c.ConnectionsPerHostMax, "max-connections-per-host", c.ConnectionsPerHostMax, "most concurrent AGLX connections (TCP and TLS) from one IP address, or IPv6 /64 (0: a quarter of --max-connections); behind a proxy every agent has its address")
	fs.IntVar(&c.PipelineMax, "max-pipeline", c.PipelineMax, "most unanswered frames per connection before the node stops reading it")
	fs.DurationVar(&c.IdleTimeout, "idle-timeout", c.IdleTimeout, "close a TCP or TLS connection that completes no frame for this long")
	fs.StringVar(&c.LogLevel, "log-level", c.LogLevel, "debug, info, warn or error")
	fs.StringVar(&c.LogFormat, "log-format", c.LogFormat, "text or json")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if *version {
		return c, errVersion
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	return c, c.Validate()
}

// Validate bounds every setting, so a typo fails at start, not under load.
func (c Config) Validate() error {
	u, err := protocol.ParseURI(c.Name)
	if err != nil {
		return fmt.Errorf("--name %q: %s", c.Name, protocol.ReasonOf(err))
	}
	if u.String() != c.Name {
		// The node's URI is compared with FROM and TO as they are written
		// in canonical form; a name in another spelling would match no one.
		return fmt.Errorf("--name %q: write it in canonical form, %q", c.Name, u.String())
	}
	if u.Scheme != protocol.SchemeRegistry {
		// The node is a registry; an agent:// name was taken, stamped on
		// the store, and every later start under the right one needed
		// --take-over-store (helper-81).
		return fmt.Errorf("--name %q: the node's name is a registry:// URI, such as registry://%s (a store an earlier version let start as %s takes the new name only with --take-over-store, which voids that name's own mints on replay: OPERATIONS.md)", c.Name, u.Name, c.Name)
	}
	for flagName, addr := range map[string]string{"--listen": c.Listen, "--tls-listen": c.TLSListen, "--udp": c.UDP, "--http": c.HTTP, "--nats-listen": c.NATSListen} {
		if addr == "" && flagName != "--listen" {
			continue
		}
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			return fmt.Errorf("%s %q: %w", flagName, addr, err)
		}
		if port != "" && strings.Trim(port, "0123456789") == "" {
			if _, err := strconv.ParseUint(port, 10, 16); err != nil {
				return fmt.Errorf("%s %q: port %s is out of range (0 to 65535; 0 picks a free one)", flagName, addr, port)
			}
		}
	}
	if err := c.checkPortsApart(); err != nil {
		return err
	}
	if _, err := c.RelayPrefixes(); err != nil {
		return err
	}
	if err := projections.CheckSyncFrom(c.SyncFrom, c.Name); err != nil {
		return fmt.Errorf("--sync-from: %w", err)
	}
	for _, p := range c.SyncTo {
		peer, err := bridge.ParsePeer(p)
		if err == nil {
			err = peer.CheckTrust()
		}
		if err != nil {
			return fmt.Errorf("--sync-to: %w", err)
		}
	}
	if c.SyncInterval != 0 && (c.SyncInterval < syncIntervalMin || c.SyncInterval > durationFlagMax) {
		// Below the bound, a peer that cannot be reached would be dialled
		// (and a failure logged) in a tight loop.
		return fmt.Errorf("--sync-interval %v: must be between %v and %gh (0: the default, %v)", c.SyncInterval, syncIntervalMin, durationFlagMax.Hours(), bridge.SyncIntervalDefault)
	}
	if c.PrepareStateFrom != "" && c.RotateNodeKey {
		return errors.New("--prepare-state-from and --rotate-node-key are two runs: rotate first, with the node stopped")
	}
	if c.SaveStateEvery != 0 && (c.SaveStateEvery < saveStateEveryMin || c.SaveStateEvery > durationFlagMax) {
		return fmt.Errorf("--save-state-every %v: must be 0 (only at a clean stop) or between %v and %gh", c.SaveStateEvery, saveStateEveryMin, durationFlagMax.Hours())
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return fmt.Errorf("--tls-cert and --tls-key go together")
	}
	// Flags that would do nothing are refused, not ignored: an operator
	// who gave them believes they hold (helper-139).
	if c.TLSCert != "" && c.TLSListen == "" {
		return fmt.Errorf("--tls-cert and --tls-key: no TLS port serves them (--tls-listen is empty)")
	}
	if _, err := c.FsyncInterval(); err != nil {
		return err
	}
	if c.NATSURL != "" && c.Fsync != "always" {
		return fmt.Errorf("--fsync %s with --nats-url: the operator's NATS server decides when it writes to disk (its sync_interval), not the node; leave --fsync out", c.Fsync)
	}
	if c.BodySizeMax < protocol.BodySizeMaxMin || c.BodySizeMax > protocol.BodySizeMaxLimit {
		return fmt.Errorf("--body-max %d: must be between %d and %d bytes", c.BodySizeMax, protocol.BodySizeMaxMin, protocol.BodySizeMaxLimit)
	}
	if c.ConnectionsMax < 1 || c.ConnectionsMax > connectionsMaxLimit {
		return fmt.Errorf("--max-connections %d: must be between 1 and %d", c.ConnectionsMax, connectionsMaxLimit)
	}
	if c.ConnectionsPerHostMax < 0 || c.ConnectionsPerHostMax > c.ConnectionsMax {
		return fmt.Errorf("--max-connections-per-host %d: must be between 0 (a quarter of --max-connections) and --max-connections (%d)", c.ConnectionsPerHostMax, c.ConnectionsMax)
	}
	if c.PipelineMax < 1 || c.PipelineMax > pipelineMaxLimit {
		return fmt.Errorf("--max-pipeline %d: must be between 1 and %d", c.PipelineMax, pipelineMaxLimit)
	}
	if c.IdleTimeout < time.Second || c.IdleTimeout > durationFlagMax {
		return fmt.Errorf("--idle-timeout %v: must be between 1s and %gh", c.IdleTimeout, durationFlagMax.Hours())
	}
	switch {
	case c.Replicas < 1 || c.Replicas > replicasMax || c.Replicas%2 == 0:
		// An even count survives no more lost servers than the odd one
		// below it, and costs a copy more.
		return fmt.Errorf("--replicas %d: must be 1, 3 or 5", c.Replicas)
	case c.Replicas > 1 && c.NATSURL == "":
		return fmt.Errorf("--replicas %d: the embedded server is one server; replicas need a NATS cluster (--nats-url)", c.Replicas)
	}
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return fmt.Errorf("--log-level %q: want debug, info, warn or error", c.LogLevel)
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		return fmt.Errorf("--log-format %q: want text or json", c.LogFormat)
	}
	if c.DataDir == "" {
		// With --nats-url too: the node key, the zone token key, the TLS
		// files and the saved fold state are kept there, and an empty one
		// put them in the working directory, unlocked (helper-139).
		return fmt.Errorf("--data: must not be empty (the node keeps its key, TLS files and saved state there, with --nats-url too)")
	}
	return nil
}

// checkPortsApart refuses two of the node's TCP listeners on one port: the
// second bind failed only after the store was opened and repaired, naming
// the flag that came second as if another process held its port.
func (c Config) checkPortsApart() error {
	flags := []struct{ name, addr string }{{"--http", c.HTTP}, {"--listen", c.Listen}, {"--tls-listen", c.TLSListen}}
	if c.NATSURL == "" {
		flags = append(flags, struct{ name, addr string }{"--nats-listen", c.NATSListen})
	}
	wildcard := func(h string) bool { return h == "" || h == "0.0.0.0" || h == "::" }
	for i, a := range flags {
		ha, pa, err := net.SplitHostPort(a.addr)
		if a.addr == "" || err != nil || pa == "0" || pa == "" {
			continue
		}
		for _, b := range flags[i+1:] {
			hb, pb, err := net.SplitHostPort(b.addr)
			if b.addr == "" || err != nil || pb != pa {
				continue
			}
			if ha == hb || wildcard(ha) || wildcard(hb) {
				return fmt.Errorf("%s %q and %s %q: one port cannot take both", a.name, a.addr, b.name, b.addr)
			}
		}
	}
	return nil
}

// RelayPrefixes parses --relay-networks.
func (c Config) RelayPrefixes() ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range strings.Split(c.RelayNetworks, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("--relay-networks: %q is not a CIDR such as 10.0.0.0/8: %w", s, err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// NodeKeyPath is where the node's signing key lives.
func (c Config) NodeKeyPath() string {
	if c.NodeKey != "" {
		return c.NodeKey
	}
	return filepath.Join(c.DataDir, "keys", "node.key")
}

// FsyncInterval is 0 for "always", else the flush interval.
func (c Config) FsyncInterval() (time.Duration, error) {
	if c.Fsync == "always" {
		return 0, nil
	}
	d, err := time.ParseDuration(c.Fsync)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf(`--fsync %q: must be "always" or a positive duration such as 1s`, c.Fsync)
	}
	return d, nil
}

// redactURLs is a --nats-url value fit for a log line or an error: every
// URL in the comma-separated list with its user information (a password,
// or a token written as the user) replaced by "redacted". Logs are read
// by more people than may connect to NATS.
func redactURLs(list string) string {
	parts := strings.Split(list, ",")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		parts[i] = p
		if !strings.Contains(p, "://") {
			// As the NATS client reads it: user:pass@host without a
			// scheme is nats://user:pass@host, where url.Parse alone
			// took "user" for a scheme and let the password through.
			p = "nats://" + p
		}
		u, err := url.Parse(p)
		switch {
		case err != nil:
			parts[i] = "(a URL that does not parse)"
		case u.User != nil:
			u.User = url.User("redacted")
			parts[i] = u.String()
		}
	}
	return strings.Join(parts, ",")
}
