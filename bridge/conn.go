package bridge

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/protocol"
	"github.com/oklog/ulid/v2"
)

// writeBufferSize holds many small replies, so a burst of pipelined frames
// is answered with few writes.
const writeBufferSize = 32 << 10 // bytes

// conn is one TCP connection, served by three goroutines in a pipeline:
//
//	reader     decodes frames (framing is sequential by nature) and hands
//	           each to the server's validation workers, which check frames
//	           of this and every other connection in parallel;
//	sequencer  takes the frames back in arrival order as each is validated
//	           and appends them, so the log holds one connection's messages
//	           in the order they were sent;
//	writer     answers each frame, in the same order, once its append is
//	           durable.
//
// Both queues are bounded by PipelineMax: when a peer sends faster than the
// log acknowledges, the reader stops reading and TCP pushes back.
type conn struct {
	s         *Server
	nc        net.Conn
	transport string
	peer      string
	host      string     // the peer's host for ConnectionsPerHostMax (hostOf)
	queue     chan *item // reader -> sequencer
	replies   chan *item // sequencer -> writer
	stopOnce  sync.Once
	stopped   chan struct{}
	fatal     bool // reading ended on a framing error; set by the reader

	// keying counts the auth.requests and key.rotates read on this
	// connection and not yet answered: a key they bind may judge the
	// frames read meanwhile (it.afterKeying).
	keying atomic.Int32

	// idleMu guards unanswered, the frames read and not yet answered, and
	// every change of the read deadline: the idle clock runs only while
	// the node owes the peer nothing (armRead, answered).
	idleMu     sync.Mutex
	unanswered int

	// owed holds a token for every frame read and not yet answered: the
	// reader takes one before it reads a frame, the writer gives it back.
	// So a connection owes at most PipelineMax replies, however the frames
	// are spread over the two queues (each of which could hold that many).
	owed chan struct{}

	// bytesInFlight is the wire size of the frames read and not yet
	// answered; guarded by the server's budget.
	bytesInFlight int64
}

// item is one frame on its way from the socket to its reply.
type item struct {
	to        string // the reply's TO: the frame's FROM, when it has one
	inReplyTo string
	silent    bool // ack and error frames are never answered

	// Set by prepare, read by validate.
	id         string
	frame      *protocol.Frame
	decodeErr  *protocol.Error
	transport  string
	peer       string
	receivedAt time.Time
	// readAt is when it was read, on the monotonic clock (receivedAt, in
	// UTC, has none): the ack latency, and the answer's deadline, count
	// from it.
	readAt time.Time
	size   int64 // wire size, taken from the server's budget

	// Set by validate; validated is closed when it is done (validateAsync
	// sets it: alreadyValidated for the frames validated on the reader).
	validated chan struct{}
	env       *events.Envelope // the event to append, if the frame is valid
	accepted  protocol.Status  // 200 or 202, for a valid frame
	keyed     bool             // the fold judges its signature against a key (Verifier.NeedsCheck)
	// afterKeying: read while a key request of the same connection was
	// unanswered, so the fold may judge it by a key the edge did not see.
	afterKeying bool
	keys        bool  // an auth.request or key.rotate: counted in conn.keying until answered
	refusal     error // why the frame was refused, if it was

	pending *events.Pending // set by the sequencer when appended
}

func (s *Server) startConn(nc net.Conn, transport string) {
	s.mu.Lock()
	if s.closing.Load() {
		s.mu.Unlock()
		nc.Close()
		return
	}
	host := hostOf(nc.RemoteAddr())
	if full, perHost := len(s.conns) >= s.cfg.ConnectionsMax, s.perHost[host] >= s.cfg.ConnectionsPerHostMax; full || perHost {
		// A slot for telling it why, taken under s.mu as every s.wg.Add
		// is, so that none comes after Shutdown's Wait began.
		told := false
		select {
		case s.refusing <- struct{}{}:
			told = true
			s.wg.Add(1)
		default:
		}
		s.mu.Unlock()
		s.n.connsShed.Add(1)
		why := protocol.Errorf(protocol.StatusTooManyRequests, "the node serves at most %d connections; try again later", s.cfg.ConnectionsMax)
		if !full {
			why = protocol.Errorf(protocol.StatusTooManyRequests, "the node serves at most %d connections from one host; close some, or try again later", s.cfg.ConnectionsPerHostMax)
		}
		s.shedLog.log(s.lg, time.Now(), slog.LevelWarn, "connection refused: limit reached", "peer", nc.RemoteAddr().String(), "reason", why.Reason)
		if !told {
			nc.Close()
			return
		}
		go s.refuseConn(nc, why)
		return
	}
	c := &conn{
		s: s, nc: nc, transport: transport, peer: nc.RemoteAddr().String(),
		queue:   make(chan *item, s.cfg.PipelineMax),
		replies: make(chan *item, s.cfg.PipelineMax),
		owed:    make(chan struct{}, s.cfg.PipelineMax),
		stopped: make(chan struct{}),
	}
	s.conns[c] = struct{}{}
	s.perHost[host]++
	c.host = host
	s.wg.Add(1)
	s.mu.Unlock()
	s.n.connsOpen.Add(1)
	s.n.connsTotal.Add(1)
	go c.serve()
}

// hostOf is the unit of ConnectionsPerHostMax for a peer: its IPv4
// address, or the /64 network of its IPv6 address, since one IPv6 host
// usually holds a whole /64 and could take every slot one address at a
// time (helper-55).
func hostOf(a net.Addr) string { return prefixOf(a, 32, 64) }

// prefixOf names the network of a peer's address: its IPv4 address masked
// to v4 bits, or its IPv6 address to v6 bits, with the length written
// unless the address is whole. A TCP or UDP address; any other is named
// by its host.
func prefixOf(a net.Addr, v4, v6 int) string {
	var ip net.IP
	switch a := a.(type) {
	case *net.TCPAddr:
		ip = a.IP
	case *net.UDPAddr:
		ip = a.IP
	default:
		host, _, err := net.SplitHostPort(a.String())
		if err != nil {
			return a.String()
		}
		return host
	}
	if ip4 := ip.To4(); ip4 != nil {
		if v4 == 32 {
			return ip4.String()
		}
		return ip4.Mask(net.CIDRMask(v4, 32)).String() + "/" + strconv.Itoa(v4)
	}
	return ip.Mask(net.CIDRMask(v6, 128)).String() + "/" + strconv.Itoa(v6)
}

// refuseConn tells a connection over the limit why it is closed, off the
// accept loop and within refuseTimeout, read and write: on TLS the write
// first runs the handshake, which reads. Refused on the accept loop with a
// write deadline only, one silent peer on the TLS port stopped every later
// TLS connection and held Shutdown for as long as it stayed. startConn
// runs at most RefusingMax of these at once; beyond that it closes a
// connection without a reason.
func (s *Server) refuseConn(nc net.Conn, why *protocol.Error) {
	defer func() { <-s.refusing; s.wg.Done() }()
	nc.SetDeadline(time.Now().Add(refuseTimeout))
	if _, err := nc.Write(s.errorFrame("", ulid.Make().String(), why)); err == nil {
		// What the peer sent before it read is discarded, so that the
		// close is not a reset: the sender's write would fail with it,
		// and the 429 be lost (TestConnectionLimitRefusalSurvivesTheSendersFrame).
		// Shutdown ends the drain (TestShutdownEndsARefusalsDrain).
		s.lingerClose(nc, refuseTimeout, refuseDrainMax)
	}
	nc.Close()
}

// lingerClose half-closes nc and discards its input, for at most timeout
// and max bytes, before the caller closes it. Closing a socket with
// unread input makes the kernel send a reset, and a reset can destroy the
// error reply before the peer reads it, or fail the peer's write. The
// connection is listed for Shutdown, which sets its read deadline to now;
// both under s.mu, so that neither undoes the other: once the node is
// stopping, nothing is discarded, and a peer that keeps its connection
// open does not hold the stop.
func (s *Server) lingerClose(nc net.Conn, timeout time.Duration, max int64) {
	s.mu.Lock()
	if s.closing.Load() {
		s.mu.Unlock()
		return
	}
	nc.SetReadDeadline(time.Now().Add(timeout))
	s.draining[nc] = struct{}{}
	s.mu.Unlock()
	drain(nc, max)
	s.mu.Lock()
	delete(s.draining, nc)
	s.mu.Unlock()
}

// RefusingMax bounds the connections over the limit that are being told
// so at once; refuseTimeout how long telling one may take, and again how
// long its input is discarded after; refuseDrainMax how much of it. A
// frame with the largest default body fits, so a peer that sends one
// frame before it reads gets its 429; a peer that keeps sending is cut
// off, and takes at most one of the RefusingMax slots for two seconds.
const (
	RefusingMax    = 64 // connections
	refuseTimeout  = time.Second
	refuseDrainMax = 2 << 20 // bytes
)

func (c *conn) serve() {
	defer c.s.wg.Done()
	written := make(chan struct{})
	go func() { c.writeLoop(); close(written) }()
	go c.sequenceLoop()
	c.readLoop()
	<-written
	if c.fatal {
		c.lingerClose()
	}
	c.nc.Close()
	c.s.mu.Lock()
	delete(c.s.conns, c)
	if c.s.perHost[c.host]--; c.s.perHost[c.host] <= 0 {
		delete(c.s.perHost, c.host)
	}
	c.s.mu.Unlock()
	c.s.n.connsOpen.Add(-1)
}

// stopReading makes the reader stop at the next frame boundary it reaches
// (or at once, if it is waiting for bytes); replies in flight still go out.
func (c *conn) stopReading() {
	c.stopOnce.Do(func() {
		c.idleMu.Lock()
		defer c.idleMu.Unlock()
		close(c.stopped)
		c.nc.SetReadDeadline(time.Now())
		c.s.budget.wake()
	})
}

// armRead sets the deadline for the next frame: IdleTimeout from now if the
// node owes the peer no reply, none while it does (a peer that waits for
// its replies is not idle; answered arms the clock when the last goes
// out). It reports false if the connection is stopping.
func (c *conn) armRead() bool {
	c.idleMu.Lock()
	defer c.idleMu.Unlock()
	if c.isStopped() {
		return false
	}
	if c.unanswered == 0 {
		c.nc.SetReadDeadline(time.Now().Add(c.s.cfg.IdleTimeout))
	} else {
		c.nc.SetReadDeadline(time.Time{})
	}
	return true
}

// read counts a frame read, which the node now owes a reply (or a silent
// drop) to.
func (c *conn) read() {
	c.idleMu.Lock()
	c.unanswered++
	c.idleMu.Unlock()
}

// answered counts a frame dealt with by the writer, and starts the idle
// clock when it was the last one owed.
func (c *conn) answered() {
	<-c.owed
	c.idleMu.Lock()
	defer c.idleMu.Unlock()
	if c.unanswered--; c.unanswered == 0 && !c.isStopped() {
		c.nc.SetReadDeadline(time.Now().Add(c.s.cfg.IdleTimeout))
	}
}

func (c *conn) isStopped() bool {
	select {
	case <-c.stopped:
		return true
	default:
		return false
	}
}

func (c *conn) readLoop() {
	defer close(c.queue)
	dec := protocol.NewDecoder(c.nc, protocol.DecoderOptions{BodySizeMax: c.s.cfg.BodySizeMax, DeferJSONCheck: true})
	for !c.isStopped() {
		select {
		case c.owed <- struct{}{}:
		case <-c.stopped:
			return
		}
		if !c.armRead() {
			return
		}
		f, err := dec.Decode()
		if errors.Is(err, io.EOF) {
			return
		}
		var pe *protocol.Error
		if err != nil && !errors.As(err, &pe) {
			if rhe := (tls.RecordHeaderError{}); errors.As(err, &rhe) && rhe.Conn != nil && bytes.HasPrefix(rhe.RecordHeader[:], []byte("AGLX")) {
				// A plain frame on the TLS port: say so in the clear, as
				// net/http does for plain HTTP, rather than close without
				// a word.
				rhe.Conn.SetWriteDeadline(time.Now().Add(refuseTimeout))
				rhe.Conn.Write(c.s.errorFrame("", ulid.Make().String(), protocol.Errorf(protocol.StatusBadRequest,
					"this port takes AGLX over TLS only: connect with TLS, or send plain frames to the node's TCP port")))
				return
			}
			if ne, ok := err.(net.Error); ok && ne.Timeout() && !c.isStopped() {
				c.s.n.idleClosed.Add(1)
				c.s.lg.Debug("connection closed: no complete frame within the idle timeout", "peer", c.peer, "timeout", c.s.cfg.IdleTimeout)
			} else if !c.isStopped() {
				c.s.lg.Debug("connection read ended", "peer", c.peer, "err", err)
			}
			return
		}
		size := f.MemorySize()
		c.s.budget.acquire(c, size)
		c.read()
		it := c.s.prepare(f, pe, c.transport, c.peer)
		it.size = size
		c.s.validateAsync(it)
		c.noteKeying(it)
		c.queue <- it
		if pe != nil && pe.Fatal {
			c.fatal = true
			return
		}
	}
}

// noteKeying marks a frame read while an auth.request or key.rotate of
// this connection is unanswered, whose key the fold may judge it by
// though the edge, which looked up its sender's key as it stood, found
// none: its reply then waits for the fold, like a keyed frame's. An agent
// that bound its first key and sent an unsigned transfer right behind it
// was told 202 for a transfer the fold then refused (401) and the relay
// withheld. (Another connection's binding can still race a frame so;
// only that agent's own key is at stake.)
func (c *conn) noteKeying(it *item) {
	if it.env == nil {
		return
	}
	it.afterKeying = c.keying.Load() > 0
	if it.env.Type == protocol.TypeAuthRequest || it.env.Type == protocol.TypeKeyRotate {
		it.keys = true
		c.keying.Add(1)
	}
}

// sequenceLoop appends validated frames in arrival order.
func (c *conn) sequenceLoop() {
	defer close(c.replies)
	for it := range c.queue {
		<-it.validated
		c.s.append(it)
		c.replies <- it
	}
}

func (c *conn) writeLoop() {
	bw := bufio.NewWriterSize(deadlineWriter{c.nc, &c.s.closing}, writeBufferSize)
	var werr error
	for it := range c.replies {
		werr = c.writeReply(bw, it, werr)
		if it.keys {
			c.keying.Add(-1)
		}
		c.s.budget.release(c, it.size)
		c.answered()
	}
	if werr == nil {
		c.flush(bw)
	}
}

// writeReply writes the reply to it, if there is one, and flushes when no other
// reply is ready. werr is the connection's write error so far, returned
// updated.
func (c *conn) writeReply(bw *bufio.Writer, it *item, werr error) error {
	if werr != nil {
		// The peer is gone: drain without waiting. Appends still complete;
		// the log resolves them whether or not anyone waits.
		return werr
	}
	if bw.Buffered() > 0 && c.s.mayWait(it) {
		// About to wait for the log or the folds: let the replies already
		// made go.
		if werr = c.flush(bw); werr != nil {
			c.stopReading()
			return werr
		}
	}
	if reply := c.s.reply(it); reply != nil {
		c.s.n.ack.Observe(time.Since(it.readAt))
		_, werr = bw.Write(reply)
	}
	// Flushed when no other reply is ready, even if this frame had none
	// (an ack or error frame from the peer): a reply written before it
	// would otherwise wait in the buffer for the next frame.
	if werr == nil && len(c.replies) == 0 && bw.Buffered() > 0 {
		werr = c.flush(bw)
	}
	if werr != nil {
		c.s.lg.Debug("connection write failed", "peer", c.peer, "err", werr)
		c.stopReading()
	}
	return werr
}

// lingerClose lingers before the connection is closed after a fatal
// frame (Server.lingerClose).
func (c *conn) lingerClose() { c.s.lingerClose(c.nc, lingerTimeout, lingerBytesMax) }

// drain half-closes nc and discards its input until its read deadline, its
// end or max bytes. The caller closes it.
func drain(nc net.Conn, max int64) {
	if cw, ok := nc.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	io.CopyN(io.Discard, nc, max)
}

// Bounds on lingerClose.
const (
	lingerTimeout  = 2 * time.Second
	lingerBytesMax = 4 << 20 // bytes
)

func (c *conn) flush(bw *bufio.Writer) error {
	return bw.Flush()
}

// deadlineWriter gives every write to the socket its own WriteTimeout.
// The buffered writer writes to the socket not only when flushed but also
// whenever a reply overflows its buffer; a deadline set only at flushes
// could then be long past (a connection quiet for longer than
// WriteTimeout), and the write would fail at once, losing every reply on
// the connection.
//
// Once the node is stopping (Server.closing set), each write gets
// ShutdownWriteTimeout instead: one peer that did not read its replies held
// a stop for the whole WriteTimeout (helper-74).
type deadlineWriter struct {
	nc       net.Conn
	stopping *atomic.Bool // nil: never
}

func (w deadlineWriter) Write(b []byte) (int, error) {
	timeout := WriteTimeout
	if w.stopping != nil && w.stopping.Load() {
		timeout = ShutdownWriteTimeout
	}
	w.nc.SetWriteDeadline(time.Now().Add(timeout))
	if timeout == WriteTimeout && w.stopping != nil && w.stopping.Load() {
		// The stop began in between, and its deadline was just replaced.
		w.nc.SetWriteDeadline(time.Now().Add(ShutdownWriteTimeout))
	}
	return w.nc.Write(b)
}

// prepare records what the reply will need from a decoded frame. It runs
// on the reader, so it does only cheap work; validate does the rest.
func (s *Server) prepare(f *protocol.Frame, decodeErr *protocol.Error, transport, peer string) *item {
	id := ulid.Make().String()
	now := time.Now()
	it := &item{
		inReplyTo: id, id: id, frame: f, decodeErr: decodeErr,
		transport: transport, peer: peer, receivedAt: now.UTC(), readAt: now,
	}
	if f != nil {
		if v := f.ID(); v != "" && len(v) <= protocol.IDSizeMax {
			// A longer one is refused (Parse), and echoed it would make a
			// reply line too long to read; the reply names the event id.
			it.inReplyTo = v
		}
		if from := f.From(); from != "" {
			if _, err := protocol.ParseURI(from); err == nil {
				it.to = from
			}
		}
		if t := f.Type(); t == "ack" || t == "error" {
			it.silent = true
		}
	}
	return it
}

// validate checks a prepared frame and, if it is good, builds its event,
// and reports whether the event's signature is still to be checked (by
// verify). It is safe to run on any goroutine.
func (s *Server) validate(it *item) (verify bool) {
	if it.decodeErr != nil {
		s.refuse(it, it.decodeErr)
		return
	}
	f := it.frame
	// The transport is judged before the body: a security message sent in
	// the clear is refused as such (403, naming the TLS port), not coached
	// field by field into a form that is then refused anyway, and its body
	// is never parsed or quoted on the plaintext path.
	if info, ok := protocol.Lookup(f.Type()); ok && info.Security && it.transport != events.TransportTLS && !s.cfg.AllowPlaintextSecurity {
		s.refuse(it, s.needsTLS(info.Name))
		return
	}
	if id, ok := f.Get(protocol.HeaderID); ok && id == "" {
		// Refused here, not in Parse, which reads stored events too: one
		// stored with an empty ID before 2026-12-01 must fold as it did.
		s.refuse(it, protocol.Errorf(protocol.StatusBadRequest, "the ID header must be 1 to %d bytes of visible ASCII; leave it out to send without one", protocol.IDSizeMax))
		return
	}
	if !utf8.Valid(f.Body) {
		// Refused here too, not in Parse: a body stored before 2026-12-02
		// must fold as it did. JSON is UTF-8 (RFC 8259); encoding/json,
		// and the scanner after it, read such bytes as U+FFFD, so the
		// node booked the message while every strict reader of the
		// stream (Python's json, a UTF-8 column) failed on it
		// (helper-102).
		s.refuse(it, protocol.Errorf(protocol.StatusBadRequest, "the body is not valid UTF-8 (at byte %d); JSON text must be UTF-8", invalidUTF8At(f.Body)))
		return
	}
	msg, err := protocol.Parse(f)
	if err != nil {
		s.refuse(it, err)
		return
	}
	if err := s.notTaken(msg); err != nil {
		s.refuse(it, err)
		return
	}
	if msg.Info.Name == protocol.TypeAuthRequest && !s.binds.allow(it.peer, it.receivedAt) {
		s.refuse(it, protocol.Errorf(protocol.StatusTooManyRequests, "more than %d auth.requests a second from this host (a burst of %d); send again in a moment", BindsPerHostPerSecondMax, BindsPerHostBurst))
		return
	}
	env := &events.Envelope{
		ID:         it.id,
		MsgID:      it.id,
		Type:       msg.Info.Name,
		From:       msg.From.String(),
		To:         recipient(msg),
		Transport:  it.transport,
		Declared:   f.Transport,
		Peer:       it.peer,
		ReceivedAt: it.receivedAt,
		Headers:    f.Headers,
		Body:       f.Body,
		Msg:        msg,
	}
	if v := f.ID(); v != "" {
		// The sender named the message: a resend within the duplicate window
		// finds the first event instead of making a second.
		env.MsgID = events.ClientKey(env.From, v)
	}
	it.accepted = protocol.StatusAccepted
	if _, relayed := f.Get(HeaderRelayedBy); env.To == s.cfg.Name || !relayable(env.Type) || relayed {
		// Done once recorded: addressed to the node, of a TYPE the relay
		// never delivers (a registry's answers, announcements), or relayed
		// once already (a RELAYED-BY header, which the relay never
		// delivers again: relayedBefore), for all of which "queued for
		// delivery" would not be true. A sender's own RELAYED-BY got 202
		// and its message was never delivered (helper-108).
		it.accepted = protocol.StatusOK
	}
	it.env = env
	it.keyed = s.cfg.Verifier != nil && s.cfg.Verifier.NeedsCheck(env, msg)
	// A message without a signature has nothing to check: the fold
	// refuses it where its sender's key requires one.
	return it.keyed && msg.HasSignatureMember()
}

// invalidUTF8At is the offset of the first byte of b that does not
// begin valid UTF-8.
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(b)
}

// notTaken says why the node refuses to record msg at all, or nil.
//
//   - A frame in the node's own name: the node records none of its own
//     replies, so every such event was someone else's. Until 2026-12-01
//     anyone could record a zone.confirm, auth.response or registry.ack
//     "from the node", and have an ack or error in its name delivered by
//     the relay with the node's RELAYED-BY (helpers 62 and 63). Credit
//     messages stay: mints and adjustments are the node's, made with its
//     key (aglx mint), and the ledger refuses them without that
//     signature.
//   - A zone.confirm: a registry's answer to a zone.join, carrying a
//     session token. This node has no use for another registry's, the
//     relay does not carry it, and recording one would put a session
//     token in the log in clear, where every reader sees it.
func (s *Server) notTaken(msg *protocol.Message) error {
	if msg.From.String() == s.cfg.Name && msg.Info.Group != protocol.GroupCredit {
		return protocol.Errorf(protocol.StatusForbidden, "only the node speaks as %s, and it records none of its own replies: a frame in its name is taken only if it is a credit message signed with the node's key", s.cfg.Name)
	}
	if msg.Info.Name == protocol.TypeZoneConfirm {
		return protocol.Errorf(protocol.StatusForbidden, "zone.confirm is a registry's answer to a zone.join and carries a session token, which this node does not record; send the zone.join to the node")
	}
	return nil
}

// needsTLS is the refusal of a security message that came in the clear.
// Such messages carry keys, secrets and session tokens, which the
// reference says must travel encrypted.
func (s *Server) needsTLS(typ string) error {
	if s.cfg.TLSAddr == "" {
		return protocol.Errorf(protocol.StatusForbidden, "%s must be sent over TLS, and this node serves no TLS port", typ)
	}
	return protocol.Errorf(protocol.StatusForbidden, "%s must be sent over TLS: connect to %s", typ, s.cfg.TLSAddr)
}

// append starts the append of a validated frame's event, if it has one.
func (s *Server) append(it *item) {
	if it.env != nil {
		it.pending = s.log.Append(s.abort, it.env)
	}
}

func (s *Server) refuse(it *item, err error) {
	s.n.refuse(protocol.StatusOf(err))
	it.refusal = err
	// FROM (as parsed, so bounded; it is what the sender claims) and
	// TYPE say which agent keeps sending what: an operator could only
	// tell peers apart (helper-106).
	typ, from := "", it.to
	if u, err := protocol.ParseURI(it.to); err == nil {
		from = u.String() // as the log and the folds spell it
	}
	if it.frame != nil {
		typ = cutForLog(it.frame.Type(), refusedTypeLogMax)
	}
	s.refusedLog.log(s.lg, time.Now(), slog.LevelInfo, "frame refused", "peer", it.peer, "from", from, "type", typ, "id", it.inReplyTo, "status", int(protocol.StatusOf(err)), "reason", protocol.ReasonOf(err))
}

// refusedTypeLogMax bounds the TYPE a refusal's log line repeats, in
// bytes: an unknown TYPE may be as long as a header.
const refusedTypeLogMax = 64 // bytes

// recipient is the message's TO in canonical form, or "" for a broadcast.
// The envelope, the subjects and every fold use the canonical spelling, so
// one agent is one sender whatever case its frames use; the stored headers
// keep what the sender wrote.
func recipient(msg *protocol.Message) string {
	if msg.To.IsZero() {
		return ""
	}
	return msg.To.String()
}
