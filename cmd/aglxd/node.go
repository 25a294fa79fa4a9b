package main

import (
	"context"
	"crypto"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aglx/ledger/bridge"
	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/projections"
	"github.com/aglx/ledger/protocol"
	"github.com/nats-io/nats.go"
)

// Main is a running node. Run starts it; Close stops it. Tests use it to run
// the real wiring in-process.
type Main struct {
	cfg Config
	lg  *slog.Logger
	key crypto.Signer // the node's signing key

	dataLock *os.File // held while the node runs (lockDataDir)
	// runningMarked: this run's record is in the data dir (running.go).
	runningMarked bool
	// uncleanRecord is the record of the last run that markRunning found
	// (it did not stop cleanly), put back by a stop before the log opened.
	uncleanRecord []byte

	ns       *events.Server // nil with --nats-url
	nc       *nats.Conn
	commitNC *nats.Conn // carries only the write-ahead commits (events.Config.CommitConn)
	// lease is the writer's lease on an operator's NATS (--nats-url);
	// nil on the embedded server, where the data dir's lock does.
	lease    *events.Lease
	log      *events.Log
	runner   *projections.Runner
	stats    *projections.Stats
	outbox   *projections.Outbox
	folds    *projections.Folds
	verdicts *projections.VerdictCache
	registry *projections.Registry
	credits  *projections.Credits
	// handshakes tracks requests between agents and their answers;
	// reputation scores agents by mentors' feedback.
	handshakes *projections.Handshakes
	reputation *projections.Reputation

	zonesDigest string // of the zones the folds run with (last-stop.json)
	// tokenKeyDigest is the SHA-256 of the zone token key: the registry
	// folds session tokens with it, so a saved state made under another
	// key is not this start's (foldstate.go).
	tokenKeyDigest string
	// checkpoints saves the folds' state while the node runs
	// (checkpoint.go); nil when --save-state-every is 0.
	checkpoints *checkpointer
	// foldConfig is what the node's folds were made with (startFolds),
	// Outbox aside: a background copy of them is made with it.
	foldConfig projections.RegistryConfig
	// stateLoadedFrom is the file the start loaded the folds from
	// (foldStateFile, or preparedStateFile), or "".
	stateLoadedFrom string
	// preparedLoaded is the prepared state file as the start found it,
	// until it is removed (dropPreparedState).
	preparedLoaded fs.FileInfo

	federations []*bridge.Federation
	relay       *bridge.Relay
	bridge      *bridge.Server
	http        *http.Server
	httpAPI     atomic.Pointer[http.Handler] // the API once the node serves; before, startingHandler

	tcpLn    net.Listener
	tlsLn    net.Listener
	tlsCerts *bridge.Certs // the TLS certificate served, and its fingerprint
	udpPC    net.PacketConn
	httpLn   net.Listener
	// httpLimit is httpLn with the HTTP API's bound on connections.
	httpLimit *bridge.LimitedListener

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// What the node cannot do while one of its NATS connections is down, for
// the log line that says it was lost (events.ClientEvents).
const (
	lostCommit = "appends wait for it 3 s (events.ConnDownGrace), then fail with 503 at once (the write-ahead stream is written over this connection)"
	lostMain   = "events cannot be copied to the event stream, nor the stream repaired: within moments appends fail with 503 too, and the projections and the relay stop"
)

// NewMain returns a node that will run with cfg.
func NewMain(cfg Config, lg *slog.Logger) *Main { return &Main{cfg: cfg, lg: lg} }

// Run starts every part and returns once the node serves. The parts keep
// running until Close.
func (m *Main) Run(ctx context.Context) error {
	// First, so that the log of a start that fails says which build failed.
	m.lg.Info("aglxd starting", "version", bridge.Version())
	if m.cfg.RotateNodeKey {
		if err := m.checkStoreToRotate(); err != nil {
			return err
		}
	}
	if m.cfg.DataDir != "" { // Validate refuses an empty one; tests may wire without
		lock, err := lockDataDir(m.cfg.DataDir)
		if err != nil {
			return err
		}
		m.dataLock = lock
		m.markRunning()
	}
	// The zone file is read before anything is made in the data dir: a
	// bad one used to be found after the store was created and stamped
	// with the node's name (helper-81).
	zones, err := m.readZones()
	if err != nil {
		return err
	}
	if !m.cfg.RotateNodeKey {
		// Before the key is read: with the rotation's last step undone,
		// the old key may be gone and a new one would be made here.
		if err := m.checkNoRotationLeft(); err != nil {
			return err
		}
	}
	key, made, err := loadNodeKey(m.cfg.NodeKeyPath())
	if err != nil {
		return err
	}
	if made && m.cfg.RotateNodeKey {
		return fmt.Errorf("--rotate-node-key: there is no node key at %s to rotate", m.cfg.NodeKeyPath())
	}
	m.key = key
	if !m.cfg.RotateNodeKey { // a maintenance run answers nobody
		if err := m.serveHTTPEarly(); err != nil {
			return err
		}
	}
	sync, _ := m.cfg.FsyncInterval()
	if m.cfg.NATSURL == "" {
		listen := m.cfg.NATSListen
		if m.cfg.RotateNodeKey {
			listen = "" // a maintenance run serves no NATS clients
		}
		ns, err := events.StartServer(events.ServerConfig{DataDir: m.cfg.DataDir, Listen: listen, SyncInterval: sync, Logger: m.lg})
		if err != nil {
			return fmt.Errorf("--nats-listen %s, --data %s: %w", m.cfg.NATSListen, m.cfg.DataDir, err)
		}
		m.ns = ns
		m.nc, err = ns.Connect("aglxd", events.ClientEvents(m.lg, "aglxd", lostMain)...)
		if err != nil {
			return err
		}
		if m.commitNC, err = ns.Connect("aglxd-commit", events.ClientEvents(m.lg, "aglxd-commit", lostCommit)...); err != nil {
			return err
		}
		m.lg.Info("embedded NATS JetStream started", "store", m.cfg.DataDir, "client_url", m.NATSURL(), "fsync", m.cfg.Fsync)
	} else {
		m.nc, err = nats.Connect(m.cfg.NATSURL, append(events.ClientEvents(m.lg, "aglxd", lostMain),
			nats.Name("aglxd"), nats.MaxReconnects(-1), nats.CustomInboxPrefix(events.NodeInboxPrefix))...)
		if err != nil {
			return fmt.Errorf("connect to %s: %w", redactURLs(m.cfg.NATSURL), err)
		}
		m.commitNC, err = nats.Connect(m.cfg.NATSURL, append(events.ClientEvents(m.lg, "aglxd-commit", lostCommit),
			nats.Name("aglxd-commit"), nats.MaxReconnects(-1), nats.CustomInboxPrefix(events.NodeInboxPrefix))...)
		if err != nil {
			return fmt.Errorf("connect to %s: %w", redactURLs(m.cfg.NATSURL), err)
		}
		m.lg.Info("using external NATS", "url", redactURLs(m.cfg.NATSURL))
		// Before anything is written there: another node may be writing
		// these streams (events.AcquireLease).
		if err := m.takeLease(ctx); err != nil {
			return err
		}
	}
	// On the embedded server nobody else can publish into the node's
	// account; on an operator's NATS others may, and the publisher has
	// every event acknowledged (events.Config.ExclusiveWriter).
	logCfg := events.Config{BodySizeMax: m.cfg.BodySizeMax, CommitConn: m.commitNC, Replicas: m.cfg.Replicas,
		AckTimeout: m.cfg.ackTimeout, ExclusiveWriter: m.ns != nil, Owner: m.cfg.Name + " " + protocol.KeyID(key.Public()),
		TakeOver: m.cfg.TakeOverStore}
	if m.cfg.RotateNodeKey {
		// The rotation checks the owner itself: an interrupted one may
		// have recorded the new key's already.
		logCfg.Owner, logCfg.TakeOver = "", false
	}
	if m.ns != nil {
		logCfg.StoreDown = m.ns.JetStreamDown
	}
	if m.lease != nil {
		logCfg.StoreDown = m.lease.Lost
	}
	if err := m.keepKey(ctx, logCfg, made); err != nil {
		return err
	}
	if m.cfg.RotateNodeKey {
		if err := m.checkRotationTarget(ctx); err != nil {
			return err
		}
	}
	m.log, err = events.Open(ctx, m.nc, logCfg, m.lg)
	if err != nil {
		if errors.Is(err, events.ErrDamaged) && m.ns != nil {
			// The path as a shell takes it: "$G" unquoted was lost when
			// pasted (helper-61). Aside means outside the store, where
			// the server does not try to load it at every start.
			err = fmt.Errorf("%w. Here: mv '%s' to a place outside %s", err, m.ns.StreamDir(events.StreamNameDefault), m.cfg.DataDir)
		}
		if errors.Is(err, events.ErrTooLittleDisk) && m.ns != nil {
			// What is free now, beside what is needed: a df saved
			// (helper-109).
			if free, ferr := m.ns.StoreFree(); ferr == nil {
				err = fmt.Errorf("%w; %d MiB are free under %s", err, free>>20, m.cfg.DataDir)
			}
		}
		if errors.Is(err, events.ErrWALDamaged) && m.ns != nil {
			err = fmt.Errorf("%w. The write-ahead stream here: '%s'; move it to a place outside %s", err, m.ns.StreamDir(events.StreamNameDefault+"_WAL"), m.cfg.DataDir)
		}
		return m.ownerError(err, false)
	}

	if m.cfg.RotateNodeKey {
		return m.rotateNodeKey(ctx)
	}
	firstKey, err := m.log.NodeFirstKey()
	if m.log.TakeOverPending() != "" {
		firstKey, err = nil, nil // a take-over's first key is this node's
	}
	if err != nil {
		return err
	}
	// On the log as Open repaired it; a take-over is recorded only after,
	// since recording it drops the first key for good.
	if err := m.checkKeyAgainstLog(ctx, firstKey); err != nil {
		return err
	}
	if err := m.log.RecordTakeOver(ctx); err != nil {
		return err
	}
	m.noteRetiredKeys()

	runCtx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	// What the node sends besides its log's answers (the relay's
	// deliveries, pushes to peers) stops with its writer's lease: the
	// node that took it sends them now.
	sendCtx := runCtx
	if m.lease != nil {
		var stopSending context.CancelFunc
		sendCtx, stopSending = context.WithCancel(runCtx)
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			defer stopSending()
			select {
			case <-m.lease.LostC():
				m.lg.Error("the writer's lease is lost: the relay and pushes to peers stop")
			case <-runCtx.Done():
			}
		}()
	}
	if err := m.noteZoneChange(zones); err != nil {
		return err
	}
	m.zonesDigest = projections.ZonesDigest(zones)
	if err := m.noteSyncFromChange(m.cfg.SyncFrom); err != nil {
		return err
	}
	tokenPath := filepath.Join(filepath.Dir(m.cfg.NodeKeyPath()), "token.key")
	tokenKey, tokenMade, err := loadOrCreateSecret(tokenPath)
	if err != nil {
		return fmt.Errorf("zone token key: %w", err)
	}
	m.lg.Info("zone token key", "path", tokenPath, "created", tokenMade)
	tokenSum := sha256.Sum256(tokenKey)
	m.tokenKeyDigest = hex.EncodeToString(tokenSum[:])
	if tokenMade {
		if last, err := m.log.LastSeq(ctx); err == nil && last > 0 {
			// Made anew beside a log that has events: the old one is lost.
			m.lg.Warn("zone token key made anew beside an existing log: session tokens handed out before no longer validate, and agents must join their zones again; restore the old key file if there is one",
				"path", tokenPath)
		}
	}
	m.verdicts = projections.NewVerdictCache()
	resumeAt := m.startFolds(ctx, projections.RegistryConfig{
		NodeURI: m.cfg.Name, NodeKey: key, NodeFirstKey: firstKey, Zones: zones, TokenKey: tokenKey, SyncFrom: m.cfg.SyncFrom,
		Verdicts: m.verdicts,
	})
	m.runner = projections.NewRunner(m.log, m.lg, m.folds.All()...)
	m.runner.Resume(resumeAt)
	m.startCheckpoints(resumeAt)
	// The edge's workers and the replay check with verifiers of their own,
	// so that a failed batch on one path does not make the other check one
	// by one (protocol.SigBatcher); both record into the same cache.
	verifier := &projections.IngestVerifier{Registry: m.registry, Cache: m.verdicts}
	m.runner.Prefetcher = &projections.IngestVerifier{Registry: m.registry, Cache: m.verdicts}
	if m.cfg.Relay {
		nets, _ := m.cfg.RelayPrefixes()
		for _, n := range nets {
			// Agents choose the addresses the relay connects to; a network
			// this wide lets any of them point the node anywhere.
			if n.Bits() < 8 || (n.Addr().Is6() && !n.Addr().Is4In6() && n.Bits() < 16) {
				m.lg.Warn("--relay-networks holds a very wide network: any agent can have the node connect to almost any address in it", "network", n.String())
			}
		}
		m.relay = &bridge.Relay{Log: m.log, Runner: m.runner, Registry: m.registry, NodeURI: m.cfg.Name, Lg: m.lg, Networks: nets,
			Refused: m.outbox.Refused, Timeout: m.cfg.relayTimeout}
		// Before any frame is taken: a relay that never ran starts at the
		// log's end as it stands now.
		if err := m.relay.Open(ctx); err != nil {
			return err
		}
	}
	m.watchLastStop(resumeAt) // before the runner runs: it looks at the replay as it passes
	m.wg.Add(1)
	go func() { defer m.wg.Done(); m.runner.Run(runCtx) }()
	m.wg.Add(1)
	go func() { defer m.wg.Done(); m.warnUnnamedSyncs(runCtx) }()

	if m.tcpLn = m.cfg.tcpLn; m.tcpLn == nil {
		if m.tcpLn, err = net.Listen("tcp", m.cfg.Listen); err != nil {
			return fmt.Errorf("--listen: %w", err)
		}
	}
	if m.cfg.TLSListen != "" {
		host, _, _ := net.SplitHostPort(m.cfg.TLSListen)
		tcfg, certs, err := bridge.TLSConfig(m.cfg.TLSCert, m.cfg.TLSKey, filepath.Join(m.cfg.DataDir, "tls"), []string{host}, m.lg)
		if err != nil {
			return fmt.Errorf("--tls-listen: %w", err)
		}
		ln, err := net.Listen("tcp", m.cfg.TLSListen)
		if err != nil {
			return fmt.Errorf("--tls-listen: %w", err)
		}
		m.tlsLn = tls.NewListener(ln, tcfg)
		m.tlsCerts = certs
		m.lg.Info("TLS certificate", "sha256_fingerprint", certs.Fingerprint(), "self_signed", m.cfg.TLSCert == "", "created", certs.MadeAtStart(), "not_after", certs.NotAfter())
	}
	m.bridge = bridge.New(m.log, bridge.Config{
		Name: m.cfg.Name, BodySizeMax: m.cfg.BodySizeMax,
		ConnectionsMax: m.cfg.ConnectionsMax, ConnectionsPerHostMax: m.cfg.ConnectionsPerHostMax,
		PipelineMax: m.cfg.PipelineMax, IdleTimeout: m.cfg.IdleTimeout,
		TLSAddr: m.TLSAddr(), AllowPlaintextSecurity: m.cfg.AllowPlaintextSecurity,
		Answerer: projections.NewAnswers(m.runner, m.outbox, projections.AnswersCredits, projections.AnswersRegistry),
		Verifier: verifier,
	}, m.lg)
	m.serve("tcp", func() error { return m.bridge.ServeTCP(m.tcpLn, events.TransportTCP) })
	if m.tlsLn != nil {
		m.serve("tls", func() error { return m.bridge.ServeTCP(m.tlsLn, events.TransportTLS) })
	}
	if m.cfg.UDP != "" {
		if m.udpPC, err = net.ListenPacket("udp", m.cfg.UDP); err != nil {
			return fmt.Errorf("--udp: %w", err)
		}
		m.serve("udp", func() error { return m.bridge.ServeUDP(m.udpPC) })
	}
	for _, ps := range m.cfg.SyncTo {
		peer, err := bridge.ParsePeer(ps) // Validate took it; a Config built by code may not have been validated
		if err != nil {
			return fmt.Errorf("--sync-to: %w", err)
		}
		fed := &bridge.Federation{Peer: peer, NodeURI: m.cfg.Name, Key: m.key, Runner: m.runner, Registry: m.registry, Interval: m.cfg.SyncInterval, Log: m.lg}
		m.federations = append(m.federations, fed)
		m.wg.Add(1)
		go func() { defer m.wg.Done(); fed.Run(sendCtx) }()
		if peer.Plain {
			m.lg.Warn("pushing registry changes over plain TCP: anyone on the path can answer a push with a forged registry.ack, and this node would not send those entries again until they change; use the peer's TLS port with ?ca= or ?pin= (OPERATIONS.md, Federation)",
				"peer", peer.URI, "addr", peer.Addr, "every", m.cfg.SyncInterval)
		} else {
			m.lg.Info("pushing registry changes over TLS", "peer", peer.URI, "addr", peer.Addr, "every", m.cfg.SyncInterval)
		}
	}
	if m.cfg.HTTP != "" {
		pub, _ := protocol.MarshalPublicKey(m.key.Public())
		api := bridge.API{
			Log: m.log, Runner: m.runner, Stats: m.stats, Credits: m.credits, Registry: m.registry, Handshakes: m.handshakes, Reputation: m.reputation, Edge: m.bridge, Relay: m.relay,
			Node:  bridge.NodeInfo{Name: m.cfg.Name, PublicKey: pub, KeyID: protocol.KeyID(m.key.Public()), TLS: m.TLSAddr(), Version: bridge.Version(), Fsync: m.fsyncPromise()},
			Certs: m.tlsCerts,
		}
		if m.ns != nil {
			api.StoreFree = m.ns.StoreFree
			api.StoreUsage = m.ns.StoreUsage
		}
		api.Federations = m.federations
		if c := m.checkpoints; c != nil {
			api.SavedState = func() (uint64, uint64) { return c.saved.Load(), c.failures.Load() }
		}
		h := bridge.HTTPHandler(api)
		m.httpAPI.Store(&h)
	}
	if m.relay != nil {
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			if err := m.relay.Run(sendCtx); err != nil {
				m.lg.Error("relay stopped", "err", err)
			}
		}()
	}
	if m.ns != nil {
		m.wg.Add(1)
		go func() { defer m.wg.Done(); m.ns.WatchFree(runCtx, m.lg, events.RestartFreeMin) }()
	}
	m.lg.Info("aglxd serving", "name", m.cfg.Name, "tcp", m.TCPAddr(), "tls", m.TLSAddr(), "udp", m.UDPAddr(), "http", m.HTTPAddr())
	return nil
}

// serveHTTPEarly serves the HTTP API's port from the start: until the node
// serves, every path answers 503 "starting". The start's repair of the
// event stream and the rebuild of the duplicate index take seconds on a
// long log, and /healthz was refused meanwhile, which looked like a node
// that had died (helper-53).
func (m *Main) serveHTTPEarly() error {
	if m.cfg.HTTP == "" {
		return nil
	}
	var err error
	if m.httpLn, err = net.Listen("tcp", m.cfg.HTTP); err != nil {
		return fmt.Errorf("--http: %w", err)
	}
	starting := http.Handler(http.HandlerFunc(startingHandler))
	m.httpAPI.Store(&starting)
	// Every wait a client controls is bounded: the request's headers (in
	// time and in bytes), the response, a kept-alive connection between
	// requests, and how many connections are open at once.
	m.http = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*m.httpAPI.Load()).ServeHTTP(w, r) }),
		ReadHeaderTimeout: 10 * time.Second, ReadTimeout: bridge.RequestReadMax, WriteTimeout: bridge.ResponseWriteMax, IdleTimeout: 2 * time.Minute,
		MaxHeaderBytes: bridge.HTTPHeaderBytesMax}
	httpLn := bridge.LimitListener(m.httpLn, bridge.HTTPConnectionsMax)
	m.httpLimit = httpLn
	m.http.ConnState = httpLn.ConnState
	m.serve("http", func() error { return m.http.Serve(httpLn) })
	return nil
}

// startingRetryAfter is the Retry-After of the 503 "starting": how long
// the start takes (seconds on a long log) the node cannot know until it
// is done, and a second between asks is what a health check asks anyway,
// while the answer costs nothing.
const startingRetryAfter = 1 // seconds

// startingHandler answers every request while the node starts.
func startingHandler(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Retry-After", strconv.Itoa(startingRetryAfter))
	w.WriteHeader(http.StatusServiceUnavailable)
	io.WriteString(w, `{"status":"starting","error":"the node is starting: it repairs its event stream and rebuilds its duplicate index before it serves"}`+"\n")
}

func (m *Main) serve(what string, fn func() error) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		if err := fn(); err != nil && !errors.Is(err, bridge.ErrServerClosed) && !errors.Is(err, http.ErrServerClosed) {
			m.lg.Error("listener stopped", "listener", what, "err", err)
		}
	}()
}

// Close stops accepting, answers the frames already read, then stops the
// projections, the NATS connection and the embedded server, in that order.
func (m *Main) Close(ctx context.Context) error {
	var errs []error
	if m.bridge != nil {
		errs = append(errs, m.bridge.Shutdown(ctx))
	}
	// The bridge closes the sockets its Serve calls registered; one whose
	// Serve had not started yet (a start that failed just after) is
	// closed here. Closing twice does no harm.
	for _, c := range []interface{ Close() error }{m.tcpLn, m.tlsLn, m.udpPC} {
		if c != nil {
			c.Close()
		}
	}
	if m.http != nil {
		errs = append(errs, m.http.Shutdown(ctx))
	}
	// Before the stop saves the state itself: a round that ended after it
	// would put an older state in its place.
	m.checkpoints.stop()
	m.recordStop(ctx) // no frame can come in now; before the log closes
	if m.log != nil {
		errs = append(errs, m.log.Close(ctx))
	}
	if m.cancel != nil {
		m.cancel()
	}
	m.wg.Wait()
	if m.lease != nil {
		// The log is closed and the relay and the pushes have stopped (the
		// relay writes its cursor, in the streams' account, as it stops):
		// nothing more is written.
		m.lease.Release(ctx)
	}
	if m.commitNC != nil {
		m.commitNC.Close()
	}
	if m.nc != nil {
		m.nc.Close()
	}
	if m.ns != nil {
		m.ns.Shutdown()
	}
	err := errors.Join(errs...)
	if err == nil {
		m.markStopped() // under the lock still: the next node's record is its own
	}
	if m.dataLock != nil {
		m.dataLock.Close() // the store is closed: another node may have it
		m.dataLock = nil
	}
	return err
}

// TCPAddr is the AGLX TCP address actually listened on.
func (m *Main) TCPAddr() string { return addrOf(m.tcpLn) }

// TLSAddr is the AGLX TLS address actually listened on.
func (m *Main) TLSAddr() string { return addrOf(m.tlsLn) }

// HTTPAddr is the HTTP address actually listened on.
func (m *Main) HTTPAddr() string { return addrOf(m.httpLn) }

// UDPAddr is the AGLX UDP address actually listened on.
func (m *Main) UDPAddr() string {
	if m.udpPC == nil {
		return ""
	}
	return m.udpPC.LocalAddr().String()
}

// NATSURL is the URL other NATS clients reach the node's server at.
func (m *Main) NATSURL() string {
	if m.ns == nil {
		return m.cfg.NATSURL
	}
	if m.cfg.NATSListen == "" || m.cfg.RotateNodeKey { // a rotation serves no NATS clients
		return ""
	}
	return m.ns.ClientURL()
}

// readZones reads and checks the zone file (--zones), if there is one.
func (m *Main) readZones() ([]projections.Zone, error) {
	if m.cfg.Zones == "" {
		return nil, nil
	}
	b, err := os.ReadFile(m.cfg.Zones)
	if err != nil {
		return nil, fmt.Errorf("--zones: %w", err)
	}
	zones, err := projections.ParseZones(b)
	if err != nil {
		return nil, fmt.Errorf("--zones %s: %w", m.cfg.Zones, err)
	}
	return zones, nil
}

func addrOf(ln net.Listener) string {
	if ln == nil {
		return ""
	}
	return ln.Addr().String()
}

// keepKey writes a node key made at this start, but only once the store is
// known to be the node's: on a store another owner wrote (a lost or
// misplaced key file) the start is refused and the made key forgotten, so
// the operator can put the old key back without first clearing a new one
// away.
func (m *Main) keepKey(ctx context.Context, cfg events.Config, made bool) error {
	if made {
		if err := events.CheckOwner(ctx, m.nc, cfg); err != nil {
			return m.ownerError(err, true)
		}
		if err := keepNodeKey(m.cfg.NodeKeyPath(), m.key); err != nil {
			return err
		}
	}
	pub, _ := protocol.MarshalPublicKey(m.key.Public())
	m.lg.Info("node key", "path", m.cfg.NodeKeyPath(), "created", made, "key_id", protocol.KeyID(m.key.Public()), "public_key", pub)
	return nil
}

// ownerError names the flags behind a refusal for another owner's store;
// made says the key file was missing and the key was made at this start.
func (m *Main) ownerError(err error, made bool) error {
	if !errors.Is(err, events.ErrOtherOwner) {
		return err
	}
	kid := protocol.KeyID(m.key.Public())
	if made {
		return fmt.Errorf("--name %s, --node-key %s: the key file is missing, and a new key (key id %s) was not kept: %w; restore the node's key file, or --take-over-store starts it anyway under a new key", m.cfg.Name, m.cfg.NodeKeyPath(), kid, err)
	}
	return fmt.Errorf("--name %s, --node-key %s (key id %s): %w; --take-over-store starts it anyway%s", m.cfg.Name, m.cfg.NodeKeyPath(), kid, err, retiredKeyHint(m.cfg.NodeKeyPath(), m.cfg.Name, err))
}

// warnUnnamedSyncs says, once the replay at start is done, which peers
// sent registry.sync frames that the registry refused because --sync-from
// does not name them: a node that took syncs before --sync-from existed,
// or is started without a peer it had, loses on replay every entry those
// peers gave it, and without this line only 403s in the log would tell
// (helper-101).
func (m *Main) warnUnnamedSyncs(ctx context.Context) {
	select {
	case <-m.runner.Ready():
	case <-ctx.Done():
		return
	}
	var peers map[string]int
	m.runner.View(func(uint64) { peers = m.registry.UnnamedSyncs() })
	if len(peers) == 0 {
		return
	}
	names := slices.Sorted(maps.Keys(peers))
	counts := make([]string, len(names))
	for i, p := range names {
		counts[i] = fmt.Sprintf("%s (%d)", p, peers[p])
	}
	m.lg.Warn("the log holds registry.sync frames from peers --sync-from does not name: they were refused, and the entries they gave are not in the registry; add --sync-from for each peer this node should take them from",
		"peers", strings.Join(counts, ", "), "sync_from", m.cfg.SyncFrom)
}

// fsyncPromise is what an ack promises about the disk, for /v1/node: the
// embedded server's --fsync, or, on an operator's NATS, that server's
// sync_interval, which the node does not know (OPERATIONS.md, "Using an
// existing NATS cluster"; helper-107: it said "always" there too).
func (m *Main) fsyncPromise() string {
	if m.ns == nil {
		return "nats-server"
	}
	return m.cfg.Fsync
}
