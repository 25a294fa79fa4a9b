package events

import (
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aglx/ledger/protocol"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"golang.org/x/time/rate"
)

// ServerConfig describes the embedded nats-server.
type ServerConfig struct {
	// DataDir holds the JetStream store (in DataDir/jetstream).
	DataDir string
	// Listen is the client address other NATS clients (analytics consumers,
	// `aglx tail`) connect to, host:port. Port 0 picks a free one; "" means
	// no network listener at all (in-process clients only).
	Listen string
	// SyncInterval is how often the store is flushed to disk. Zero means
	// fsync after every write: an acknowledged event survives power loss.
	SyncInterval time.Duration
	// MaxPayload bounds one NATS message; it must hold the largest event.
	MaxPayload int32
	// Logger takes the server's warnings and errors (nil: none are
	// logged). JetStream says only there that it shut itself down for a
	// full disk; without it an operator saw nothing but commit timeouts.
	Logger *slog.Logger

	// responseThreshold, if not zero, stands in for the readers'
	// exports' response thresholds (ReaderPullResponseThreshold,
	// ReaderAPIResponseThreshold), so that a test sees them expire.
	responseThreshold time.Duration
	// connectionsMax, if not zero, stands in for ServerConnectionsMax, so
	// that a test reaches the bound with a few connections: a thousand
	// silent ones took longer than the server's auth timeout to open under
	// the race detector, and the first were closed before the last came.
	connectionsMax int
	// maxStore, if not zero, is JetStream's limit on the store in bytes,
	// instead of the one it sets from the disk (StoreUsage), so that a
	// test reaches it.
	maxStore int64
}

// ServerConnectionsMax bounds all the connections the embedded server
// holds at once, in connections: the node's own (three: its main
// connection, its committer's and the readers' gate's), readers' (at most
// ReaderConnectionsMax) and those that have not sent their CONNECT yet,
// which the server closes after its auth timeout (2 s). Past it the
// server refuses a connection with "maximum connections exceeded", one of
// the node's in-process connections too: the node makes those at start,
// and later only when the readers' gate opens again. At the server's
// default, 65,536, connections that said nothing could hold some 12 KB
// each, 750 MB in all.
const ServerConnectionsMax = 1024 // connections

// ServerPendingBytesMax bounds what the server holds for one connection
// that has not taken it yet, in bytes; past it the server closes the
// connection as a slow consumer. It is the server's default, set here to
// say why it is not lower: it cannot be set for readers alone, and a read
// (the node's own, or `aglx tail`'s) asks for up to readBufferBytes at
// once, two of the largest events (16 MiB; the node runs up to three at once), which JetStream sends as fast
// as it reads them. The node's in-process client takes what comes as it
// comes, whatever its reads do with it; a reader on a slow link does not,
// and must have room for a whole pull. Readers' connections hold at most
// ReaderConnectionsMax times this.
const ServerPendingBytesMax = 64 << 20 // bytes

// EventSyncInterval is how often the event stream, which is written only
// from batches already synced to the write-ahead stream, is flushed to disk.
// The write-ahead stream must hold far more than this much ingest. It is
// short because each flush is a burst of writes that the write-ahead
// stream's fsyncs wait behind: once a second, the burst delayed acks by
// 20-30 ms (docs/DESIGN.md, "Group commit").
const EventSyncInterval = 100 * time.Millisecond

// serverReadyTimeout bounds the wait for the embedded server to start.
const serverReadyTimeout = 30 * time.Second

// Server is the embedded nats-server. The node talks to it in-process as the
// only user of its account; every client that connects over the network
// without credentials is a reader, in an account of its own
// (ReadersAccount).
type Server struct {
	*server.Server
	password string // of nodeUser; random per start, never stored

	gateMu  sync.Mutex
	gate    *nats.Conn  // the readers' gate's connection
	readers *readerGate // the gate on it
	down    bool        // Shutdown has begun

	// writeErr is the first stream the server could no longer write, as
	// its log said (serverLog); nil while every write succeeds.
	writeErr *errSlot
	storeDir string // the JetStream store, for its free space
}

// gateReopenWait is the pause between attempts to open the readers' gate
// again after its connection closed.
const gateReopenWait = time.Second

// openGate opens the readers' gate on a connection of its own.
func (s *Server) openGate() error {
	// Under a flood of readers' requests the gate's connection drops what
	// it cannot hold (the readers time out); that is no error of the
	// node's.
	quiet := nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})
	nc, err := s.Connect("aglxd readers' gate", quiet, nats.ClosedHandler(s.gateClosed))
	if err != nil {
		return err
	}
	g, err := openReaderGate(nc, StreamNameDefault)
	if err != nil {
		nc.Close()
		return err
	}
	s.gateMu.Lock()
	defer s.gateMu.Unlock()
	if s.down {
		g.stop()
		nc.Close()
		return nil
	}
	s.gate, s.readers = nc, g
	if nc.IsClosed() {
		// Closed before it was the gate's: its handler found another
		// connection and did not open the gate again.
		go s.gateClosed(nc)
	}
	return nil
}

// gateClosed stops the gate whose connection nc closed and, unless the
// server is shutting down, opens it again: a connection the server closed
// (for an error of its protocol) otherwise left every reader without
// answers until the node restarted.
func (s *Server) gateClosed(nc *nats.Conn) {
	s.gateMu.Lock()
	var g *readerGate
	if s.gate == nc {
		g, s.gate, s.readers = s.readers, nil, nil
	}
	down := s.down
	s.gateMu.Unlock()
	if g != nil {
		g.stop()
	}
	if down || g == nil {
		return
	}
	go func() {
		for s.openGate() != nil {
			time.Sleep(gateReopenWait)
			s.gateMu.Lock()
			down := s.down
			s.gateMu.Unlock()
			if down {
				return
			}
		}
	}()
}

// nodeUser and readerUser are the embedded server's two users.
const (
	nodeUser   = "aglxd"
	readerUser = "reader"
)

// NodeInboxPrefix starts the reply subjects of the node's own connections.
// Readers may neither publish nor subscribe there: a reader that answered
// a write-ahead publish before JetStream did, with a made-up sequence,
// would have the node expect the wrong end of its write-ahead stream and
// refuse every later append. On an operator's own NATS server, deny
// publishing to NodeInboxPrefix.> to everyone but the node (OPERATIONS.md).
const NodeInboxPrefix = "_AGLX_NODE"

// unlimitedJetStream is the node's account's JetStream limits: none; the
// streams carry their own.
var unlimitedJetStream = server.JetStreamAccountLimits{MaxMemory: -1, MaxStore: -1, MaxStreams: -1, MaxConsumers: -1,
	MaxAckPending: -1, MemoryMaxStreamBytes: -1, StoreMaxStreamBytes: -1}

// Connect opens an in-process connection as the node's writing user.
func (s *Server) Connect(name string, opts ...nats.Option) (*nats.Conn, error) {
	opts = append(opts, nats.InProcessServer(s.Server), nats.UserInfo(nodeUser, s.password), nats.Name(name),
		nats.CustomInboxPrefix(NodeInboxPrefix))
	nc, err := nats.Connect("", opts...)
	if err != nil {
		return nil, fmt.Errorf("events: connect to the embedded server: %w", err)
	}
	return nc, nil
}

// Shutdown stops the server and waits until it has stopped.
func (s *Server) Shutdown() {
	s.gateMu.Lock()
	s.down = true
	gate := s.gate
	s.gateMu.Unlock()
	if gate != nil {
		gate.Close()
	}
	s.Server.Shutdown()
	s.Server.WaitForShutdown()
}

// JetStreamDown says why the server's JetStream cannot store the node's
// events, or nil: it is shut down, or a stream of it met a write error.
//
// A stream that fails a write (a full disk: ENOSPC) keeps that error and
// stores nothing more until the server restarts, on a standalone server
// without shutting JetStream down. Its publishers get no answer at all:
// every commit then waited out its timeout, and /healthz said ok for as
// long as the disk was full (helper-61). The server says so only in its
// log, which is where serverLog finds it.
func (s *Server) JetStreamDown() error {
	if err := s.writeErr.get(); err != nil {
		return err
	}
	if s.JetStreamEnabled() {
		return nil
	}
	return errors.New("events: the embedded JetStream is shut down (the server's log says why): free space if the disk is full, and restart the node; nothing acknowledged is lost")
}

// StreamDir is where the embedded server keeps stream name on disk, for
// the instructions an operator follows by hand (a damaged stream is moved
// aside): the node's streams are in the server's global account.
func (s *Server) StreamDir(name string) string {
	return filepath.Join(s.storeDir, "jetstream", server.DEFAULT_GLOBAL_ACCOUNT, "streams", name)
}

// streamWriteError is how the server's log reports that a stream failed a
// write and will store nothing more (nats-server's stream.go,
// setWriteErrLocked): "JetStream stream 'ACCOUNT > NAME' critical write
// error: ERR". TestStoreFullIsReported holds the node to it on a real
// full file system, so a server upgrade that changes the line fails there.
const streamWriteError = "JetStream stream '"

// noteWriteError records msg, a line of the server's log, if it says a
// stream failed a write: the first such line wins.
func noteWriteError(slot *errSlot, msg string) {
	rest, ok := strings.CutPrefix(msg, streamWriteError)
	if !ok || slot.get() != nil {
		return
	}
	stream, cause, ok := strings.Cut(rest, "' critical write error: ")
	if !ok {
		return
	}
	_, name, _ := strings.Cut(stream, " > ")
	slot.set(fmt.Errorf("events: the embedded JetStream could not write stream %s (%s) and stores nothing more until the node restarts: free space if the disk is full, then restart the node; nothing acknowledged is lost", name, cause))
}

// serverLog passes the embedded server's warnings and errors to the node's
// log; its notices, debug and trace lines are dropped. At most
// serverLogLinesPerSecond pass: the server logs an error for every client
// that fails to authenticate, and anyone who can reach --nats-listen could
// otherwise fill the node's disk with them (helper-55).
type serverLog struct {
	lg *slog.Logger // nil: lines are dropped
	// Errors and warnings are bounded apart, so that a flood of one kind
	// (failed logins are errors) cannot hide the other (helper-58).
	errs, warns *rate.Limiter
	// writeErr takes the first stream write error the server reports
	// (Server.JetStreamDown).
	writeErr *errSlot
}

// serverLogLinesPerSecond bounds the server's lines in the node's log, as
// the edge's own lines are bounded (bridge.LogLinesPerSecondMax).
const serverLogLinesPerSecond = 20 // lines per second

func newServerLog(lg *slog.Logger) serverLog {
	return serverLog{lg: lg, errs: rate.NewLimiter(serverLogLinesPerSecond, serverLogLinesPerSecond),
		warns: rate.NewLimiter(serverLogLinesPerSecond, serverLogLinesPerSecond), writeErr: new(errSlot)}
}

func (l serverLog) Noticef(string, ...any) {}
func (l serverLog) Debugf(string, ...any)  {}
func (l serverLog) Tracef(string, ...any)  {}
func (l serverLog) Warnf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	for _, known := range serverWarningsExpected {
		if strings.HasPrefix(msg, known) {
			return
		}
	}
	if l.lg != nil && l.warns.Allow() {
		l.lg.Warn("nats-server: " + msg)
	}
}

// serverWarningsExpected are warnings the server gives at every start of
// the node's configuration, which would teach operators to skip its
// warnings: the passwords are random, in memory and never leave the
// process, and the payload limit must hold the largest event the node may
// be configured to take.
var serverWarningsExpected = []string{"Plaintext passwords detected", "Maximum payloads over"}

func (l serverLog) Errorf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	noteWriteError(l.writeErr, msg) // before the rate limit: it must never be missed
	if l.lg != nil && l.errs.Allow() {
		l.lg.Error("nats-server: " + msg)
	}
}
func (l serverLog) Fatalf(format string, v ...any) {
	if l.lg == nil {
		return
	}
	l.lg.Error("nats-server (fatal): " + fmt.Sprintf(format, v...))
}

// StartServer starts an embedded nats-server with JetStream. The caller owns
// it and must Shutdown it.
func StartServer(cfg ServerConfig) (*Server, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("events: server: no data dir")
	}
	opts := &server.Options{}
	readers, err := readersAccount(opts)
	if err != nil {
		return nil, err
	}
	opts.ServerName = "aglxd"
	opts.JetStream = true
	opts.StoreDir = filepath.Join(cfg.DataDir, "jetstream")
	opts.NoSigs = true
	opts.MaxPayload = cfg.MaxPayload
	opts.NoAuthUser = readerUser
	opts.MaxConn = ServerConnectionsMax
	if cfg.connectionsMax > 0 {
		opts.MaxConn = cfg.connectionsMax
	}
	if cfg.maxStore > 0 {
		opts.JetStreamMaxStore = cfg.maxStore
	}
	opts.MaxPending = ServerPendingBytesMax
	password, reader := rand.Text(), rand.Text()
	opts.Users = []*server.User{
		{Username: nodeUser, Password: password},
		{Username: readerUser, Password: reader, Account: readers,
			Permissions: &server.Permissions{Publish: &server.SubjectPermission{Deny: readerPublishDeny}}},
	}
	if opts.MaxPayload <= 0 {
		// Room for the largest event the node may be configured to take,
		// in a write-ahead batch of its own (walMessageMax).
		opts.MaxPayload = protocol.BodySizeMaxLimit + envelopeOverhead + walMsgSlack
	}
	if cfg.SyncInterval <= 0 {
		opts.SyncAlways = true
		// Streams in asynchronous persist mode (the event stream) ignore
		// SyncAlways and flush on this interval instead.
		opts.SyncInterval = EventSyncInterval
	} else {
		opts.SyncInterval = cfg.SyncInterval
	}
	if cfg.Listen == "" {
		opts.DontListen = true
	} else {
		host, port, err := net.SplitHostPort(cfg.Listen)
		if err != nil {
			return nil, fmt.Errorf("events: server: listen address %q: %w", cfg.Listen, err)
		}
		p, err := strconv.Atoi(port)
		if err != nil {
			return nil, fmt.Errorf("events: server: listen port %q: %w", port, err)
		}
		opts.Host, opts.Port = host, p
		if p == 0 {
			opts.Port = server.RANDOM_PORT
		}
	}
	if cfg.Listen != "" && opts.Port != server.RANDOM_PORT {
		// Find a taken port now: the server would only say so by not
		// becoming ready, serverReadyTimeout later.
		ln, err := net.Listen("tcp", net.JoinHostPort(opts.Host, strconv.Itoa(opts.Port)))
		if err != nil {
			return nil, fmt.Errorf("events: server: listen on %s: %w", cfg.Listen, err)
		}
		ln.Close()
	}
	// The server keeps its reasons to itself (it has no logger here): a
	// store it cannot write showed only as "not ready" 30 s later.
	if err := os.MkdirAll(opts.StoreDir, 0o700); err != nil {
		return nil, fmt.Errorf("events: server: the store %s: %w", opts.StoreDir, err)
	}
	if f, err := os.CreateTemp(opts.StoreDir, ".writable-*"); err != nil {
		return nil, fmt.Errorf("events: server: the store %s is not writable: %w", opts.StoreDir, err)
	} else {
		f.Close()
		os.Remove(f.Name())
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("events: server: %w", err)
	}
	if err := shareWithReaders(ns, StreamNameDefault, cfg.responseThreshold); err != nil {
		ns.Shutdown()
		return nil, err
	}
	// Always: the log is also how a stream's write error is learnt
	// (JetStreamDown). Without a Logger the lines are dropped.
	sl := newServerLog(cfg.Logger)
	ns.SetLoggerV2(sl, false, false, false)
	go ns.Start()
	if !ns.ReadyForConnections(serverReadyTimeout) {
		ns.Shutdown()
		return nil, fmt.Errorf("events: server: not ready after %s (is %s already in use?)", serverReadyTimeout, cfg.Listen)
	}
	// With an account of its own for readers, the server no longer turns
	// JetStream on for its global account by itself. It is the node's, and
	// its streams are where they always were (jetstream/$G).
	if err := ns.GlobalAccount().EnableJetStream(map[string]server.JetStreamAccountLimits{"": unlimitedJetStream}, nil); err != nil {
		ns.Shutdown()
		return nil, fmt.Errorf("events: server: JetStream for the node's account: %w", err)
	}
	s := &Server{Server: ns, password: password, writeErr: sl.writeErr, storeDir: opts.StoreDir}
	if err := s.openGate(); err != nil {
		s.Shutdown()
		return nil, err
	}
	return s, nil
}
