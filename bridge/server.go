// Package bridge is the node's network edge: it reads AGLX frames from TCP
// connections and UDP datagrams, appends each valid one to the event log,
// and answers every TCP frame exactly once, in the order it arrived.
package bridge

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/projections"
	"github.com/aglx/ledger/protocol"
)

// Limits of the edge. Each bounds memory or a wait that a peer controls.
const (
	// ConnectionsMaxDefault bounds open TCP connections. One more is
	// answered with 429 and closed.
	ConnectionsMaxDefault = 1024 // connections
	// PipelineMaxDefault bounds the frames of one connection that are read
	// but not yet answered. When it is reached the node stops reading that
	// connection until a reply goes out: back-pressure, never a drop.
	PipelineMaxDefault = 256 // frames
	// WriteTimeout bounds how long a reply may wait for a peer that does not
	// read. The connection is closed after it.
	WriteTimeout = 30 * time.Second // per reply write
	// ShutdownWriteTimeout bounds each reply write once the node is
	// stopping, so that a peer that does not read cannot hold the stop
	// (aglxd gives the whole stop 30 s).
	ShutdownWriteTimeout = 5 * time.Second // per reply write
	// IdleTimeoutDefault bounds the wait for a connection's next frame,
	// counted while the node owes the peer no reply (a peer waiting for
	// its answers is not idle), until the frame's last byte. A connection
	// that sends nothing, or a frame a byte at a time, for this long is
	// closed: without it, idle or trickling connections could
	// hold every one of ConnectionsMax slots (and a TLS connection that
	// never finishes its handshake is one of them).
	IdleTimeoutDefault = 5 * time.Minute // per frame
	// ConnectionsPerHostDivisor sets the default share of ConnectionsMax
	// one host may hold: a quarter. Without a share of its own, one peer
	// holding every slot with silent connections (each kept for the idle
	// timeout, and reopened) locked out every other agent, and with plain
	// TCP and TLS counted together, every security message too.
	ConnectionsPerHostDivisor = 4
	// UDPPendingMax bounds announce datagrams waiting for their append.
	// Beyond it the node stops reading the socket until one is stored.
	UDPPendingMax = 1024 // datagrams
)

// Config configures a Server.
type Config struct {
	// Name is the node's own URI, e.g. registry://localhost. Replies come
	// from it; frames addressed to it are answered 200, others 202.
	Name           string
	BodySizeMax    int
	ConnectionsMax int
	// ConnectionsPerHostMax bounds the connections from one IP address;
	// 0 means ConnectionsMax / ConnectionsPerHostDivisor (at least 1).
	ConnectionsPerHostMax int
	PipelineMax           int
	// IdleTimeout is the most a connection may take to send its next
	// frame; 0 means IdleTimeoutDefault.
	IdleTimeout time.Duration
	// TLSAddr is where the node serves AGLX over TLS, named in the refusal
	// of a security message that came in the clear; "" if it does not.
	TLSAddr string
	// AllowPlaintextSecurity accepts auth.*, key.rotate and zone.* without
	// TLS. It exists for tests; a node in service never sets it.
	AllowPlaintextSecurity bool
	// Answerer, if set, decides the reply to the messages the node acts
	// on itself (credit outcomes, registry answers); others get an ack.
	Answerer Answerer
	// Verifier, if set, checks signatures in the validation workers, in
	// parallel, before the message is appended (see projections).
	Verifier Verifier
}

// The node's default addresses: all on loopback, so that a node started
// without flags serves no one but its own machine. aglxd listens on them
// and the aglx commands look for the node there.
const (
	DefaultTCPAddr  = "127.0.0.1:2594" // AGLX over TCP, and UDP on the same port
	DefaultTLSAddr  = "127.0.0.1:2596" // AGLX over TLS
	DefaultHTTPAddr = "127.0.0.1:2595" // the HTTP API
	DefaultNATSAddr = "127.0.0.1:4222" // the embedded NATS server's client port
)

// Verifier checks messages' signatures ahead of the fold.
type Verifier interface {
	// NeedsCheck reports, cheaply, whether the fold will judge the
	// message's signature against a key. Such a frame is answered only
	// once the fold has (a 202 before it could be followed by a refusal),
	// and, if it carries a signature, goes to the validation workers,
	// whose VerifyBatch checks it ahead of the fold.
	NeedsCheck(env *events.Envelope, msg *protocol.Message) bool
	// VerifyBatch checks the signatures of envs, each with its Msg set,
	// together where that is cheaper than one by one.
	VerifyBatch(envs []*events.Envelope)
	// Forget drops what VerifyBatch recorded for env, whose event the
	// fold will never apply: a resend the log answered from the first
	// copy, or a frame whose append failed.
	Forget(env *events.Envelope)
}

// Answerer gives the reply the projections decided for a message.
type Answerer interface {
	// Answers reports whether the reply to a TYPE may come from the
	// projections, so that the writer waits for them.
	Answers(typ string) bool
	// Answer waits until the event at seq is applied and returns the
	// reply decided for it, if there is one.
	Answer(ctx context.Context, seq uint64) (projections.Reply, bool, error)
	// Ready reports, without waiting, whether Answer would return at once.
	Ready(seq uint64) bool
}

// AnswerTimeout bounds the wait for the projections to apply an appended
// message. After it the sender gets an ack with 202: the message is
// durable, its outcome is not known yet.
const AnswerTimeout = 10 * time.Second

// AnswerAfterAppendMin is the least the projections are given to answer
// once an append is durable, even when AnswerTimeout, counted from the
// frame's reading, has passed: they apply an event within milliseconds
// of its append unless they are stalled.
const AnswerAfterAppendMin = time.Second

func (c Config) withDefaults() Config {
	if c.Name == "" {
		c.Name = "registry://localhost"
	}
	if c.BodySizeMax <= 0 {
		c.BodySizeMax = protocol.BodySizeMaxDefault
	}
	if c.ConnectionsMax <= 0 {
		c.ConnectionsMax = ConnectionsMaxDefault
	}
	if c.ConnectionsPerHostMax <= 0 {
		c.ConnectionsPerHostMax = max(1, c.ConnectionsMax/ConnectionsPerHostDivisor)
	}
	if c.PipelineMax <= 0 {
		c.PipelineMax = PipelineMaxDefault
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = IdleTimeoutDefault
	}
	return c
}

// Counters are the edge's running totals, for /v1/stats and the logs.
type Counters struct {
	ConnectionsOpen  int64 `json:"connections_open"`
	ConnectionsTotal int64 `json:"connections_total"`
	ConnectionsShed  int64 `json:"connections_refused"`
	// ConnectionsIdle counts connections closed for sending no complete
	// frame within the idle timeout.
	ConnectionsIdle int64 `json:"connections_idle_closed"`
	// FramesAppended counts frames stored as events: a fold may still
	// have refused one (it is then in FramesRefused too; the log records
	// what was asked). FramesDuplicate counts resends answered from the
	// first copy, which store nothing.
	FramesAppended  int64 `json:"frames_appended"`
	FramesDuplicate int64 `json:"frames_duplicate"`
	// FramesRefused counts every refused frame, UDP ones included;
	// FramesRefusedBy by status ("400", ..., "other").
	FramesRefused   int64            `json:"frames_refused"`
	FramesRefusedBy map[string]int64 `json:"frames_refused_by_status"`
	UDPAppended     int64            `json:"udp_appended"`
	UDPRefused      int64            `json:"udp_refused"`
	// UDPLimited counts datagrams dropped unread over the UDP rate
	// bounds (udp_limit.go).
	UDPLimited int64 `json:"udp_limited"`
}

type counters struct {
	connsOpen, connsTotal, connsShed atomic.Int64
	idleClosed                       atomic.Int64
	appended, duplicate, refused     atomic.Int64
	refusedBy                        [len(refusedStatuses) + 1]atomic.Int64 // "other", then refusedStatuses
	udpAppended, udpRefused          atomic.Int64
	udpLimited                       atomic.Int64
	// ack is the time from reading a frame to handing its reply to the
	// socket: the node's share of an agent's ack latency.
	ack events.Latency
}

// Server serves AGLX on any number of TCP listeners and UDP sockets.
type Server struct {
	log *events.Log
	cfg Config
	lg  *slog.Logger
	n   counters
	// binds bounds the auth.requests taken from one host (bind_limit.go).
	binds *bindLimiter

	mu sync.Mutex
	// closing is set, under mu, when Shutdown begins; read under mu where
	// it must order with what mu guards, and without it by every reply
	// write (deadlineWriter).
	closing   atomic.Bool
	listeners map[net.Listener]struct{}
	packets   map[net.PacketConn]struct{}
	conns     map[*conn]struct{}
	perHost   map[string]int // open connections by the peer's IP address
	wg        sync.WaitGroup // every connection, refusal and UDP waiter
	refusing  chan struct{}  // a slot per refusal in progress (RefusingMax)
	// draining holds the refused connections whose input is being
	// discarded after their 429 (refuseConn), for Shutdown to cut short.
	draining map[net.Conn]struct{}

	workOnce sync.Once
	stopWork sync.Once
	work     chan *item // frames waiting for a validation worker

	// abort ends every wait for the log (an append's queueing, its
	// result) when Shutdown's deadline passes: a log that takes no events
	// must not keep the node from exiting.
	abort     context.Context
	abortWait context.CancelFunc

	budget *budget // bytes of frames in flight (ConnBytesMax, ServerBytesMax)

	// Per-frame log lines, each kind bounded (LogLinesPerSecondMax).
	refusedLog, datagramLog, failedLog, shedLog logRate
}

// New returns a Server that appends to log.
func New(log *events.Log, cfg Config, lg *slog.Logger) *Server {
	if lg == nil {
		lg = slog.Default()
	}
	s := &Server{
		log: log, cfg: cfg.withDefaults(), lg: lg, binds: newBindLimiter(),
		listeners: map[net.Listener]struct{}{},
		packets:   map[net.PacketConn]struct{}{},
		conns:     map[*conn]struct{}{},
		perHost:   map[string]int{},
		budget:    newBudget(),
		refusing:  make(chan struct{}, RefusingMax),
		draining:  map[net.Conn]struct{}{},
	}
	s.abort, s.abortWait = context.WithCancel(context.Background())
	return s
}

// Counters returns a snapshot of the running totals.
func (s *Server) Counters() Counters {
	return Counters{
		ConnectionsOpen:  s.n.connsOpen.Load(),
		ConnectionsTotal: s.n.connsTotal.Load(),
		ConnectionsShed:  s.n.connsShed.Load(),
		ConnectionsIdle:  s.n.idleClosed.Load(),
		FramesAppended:   s.n.appended.Load(),
		FramesDuplicate:  s.n.duplicate.Load(),
		FramesRefused:    s.n.refused.Load(),
		FramesRefusedBy:  s.n.refusedByStatus(),
		UDPAppended:      s.n.udpAppended.Load(),
		UDPRefused:       s.n.udpRefused.Load(),
		UDPLimited:       s.n.udpLimited.Load(),
	}
}

// AckLatency is how long frames took from being read to having their reply
// written to the socket's buffer.
func (s *Server) AckLatency() events.LatencySnapshot { return s.n.ack.Snapshot() }

// ErrServerClosed is returned by the Serve methods after Shutdown.
var ErrServerClosed = errors.New("bridge: server closed")

// ServeTCP accepts connections on ln until Shutdown. transport is recorded
// in each event (events.TransportTCP or events.TransportTLS).
func (s *Server) ServeTCP(ln net.Listener, transport string) error {
	if !s.track(ln, nil) {
		return ErrServerClosed
	}
	var tempDelay time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.isClosing() {
				return ErrServerClosed
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			// Out of file descriptors (EMFILE, ENFILE), out of buffers,
			// a connection reset before it was taken: wait and go on, as
			// net/http does. Ending here left the node running without
			// its listener, with /healthz still saying ok.
			tempDelay = s.backOff(tempDelay, "accepting connections failed; retrying", ln.Addr().String(), err)
			continue
		}
		tempDelay = 0
		s.startConn(nc, transport)
	}
}

// backOff waits after a read or accept error that may pass, doubling the
// wait from 5 ms up to a second, and returns the new wait. The first error
// of a run is logged; Shutdown's deadline ends the wait.
func (s *Server) backOff(delay time.Duration, msg, addr string, err error) time.Duration {
	if delay == 0 {
		s.lg.Warn(msg, "addr", addr, "err", err)
	}
	delay = min(max(2*delay, 5*time.Millisecond), time.Second)
	select {
	case <-time.After(delay):
	case <-s.abort.Done():
	}
	return delay
}

// track registers a listener or packet conn for Shutdown to close, and
// reports false once the server is closing.
func (s *Server) track(ln net.Listener, pc net.PacketConn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing.Load() {
		return false
	}
	if ln != nil {
		s.listeners[ln] = struct{}{}
	}
	if pc != nil {
		s.packets[pc] = struct{}{}
		// The datagram waiter is counted here, under the lock that Shutdown
		// takes before it waits: an Add after Wait began would race it.
		s.wg.Add(1)
	}
	return true
}

func (s *Server) isClosing() bool { return s.closing.Load() }

// Shutdown stops accepting connections and datagrams, stops reading new
// frames, and waits until every frame already read has been answered (its
// append acknowledged or refused) or ctx ends. Then it closes everything.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing.Store(true)
	for ln := range s.listeners {
		ln.Close()
	}
	for pc := range s.packets {
		pc.Close()
	}
	for nc := range s.draining {
		nc.SetReadDeadline(time.Now()) // what it still sends is no reason to wait
	}
	for c := range s.conns {
		c.stopReading()
		// A write blocked now got WriteTimeout when it began.
		c.nc.SetWriteDeadline(time.Now().Add(ShutdownWriteTimeout))
	}
	s.mu.Unlock()

	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		s.workOnce.Do(func() {}) // no worker may start after this
		s.stopWork.Do(func() {
			if s.work != nil {
				close(s.work)
			}
		})
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.abortWait()
		s.mu.Lock()
		conns := make([]net.Conn, 0, len(s.conns))
		for c := range s.conns {
			conns = append(conns, c.nc)
		}
		s.mu.Unlock()
		// Closed hard, outside the lock: a TLS close would first send
		// close_notify, which waits up to 5 s on a peer that stopped
		// reading, one connection after another.
		for _, nc := range conns {
			if tc, ok := nc.(*tls.Conn); ok {
				nc = tc.NetConn()
			}
			nc.Close()
		}
		<-done
		return ctx.Err()
	}
}
