package bridge

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/protocol"
	"github.com/oklog/ulid/v2"
)

// writeBufferSize holds many small replies, so a burst of pipelined frames
// is answered with few writes.
const writeBufferSize = 32 << 10 // bytes

// conn is one TCP connection. A reader goroutine decodes frames and starts
// their appends; a writer goroutine answers them in the same order. The
// queue between them is bounded by PipelineMax, which is what stops the
// reader when a peer sends faster than the log acknowledges.
type conn struct {
	s         *Server
	nc        net.Conn
	transport string
	peer      string
	queue     chan *item
	stopOnce  sync.Once
	stopped   chan struct{}
	fatal     bool // reading ended on a framing error; set by the reader
}

// item is one frame waiting for its reply.
type item struct {
	to        string // the reply's TO: the frame's FROM, when it has one
	inReplyTo string
	pending   *events.Pending // set when the frame was appended
	refusal   error           // set when it was refused
	accepted  protocol.Status // 200 or 202, for an appended frame
	silent    bool            // ack and error frames are never answered
}

func (s *Server) startConn(nc net.Conn, transport string) {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		nc.Close()
		return
	}
	if len(s.conns) >= s.cfg.ConnectionsMax {
		s.mu.Unlock()
		s.n.connsShed.Add(1)
		s.lg.Warn("connection refused: limit reached", "peer", nc.RemoteAddr().String(), "limit", s.cfg.ConnectionsMax)
		nc.SetWriteDeadline(time.Now().Add(time.Second))
		nc.Write(s.errorFrame("", ulid.Make().String(), protocol.Errorf(protocol.StatusTooManyRequests, "the node serves at most %d connections; try again later", s.cfg.ConnectionsMax)))
		nc.Close()
		return
	}
	c := &conn{
		s: s, nc: nc, transport: transport, peer: nc.RemoteAddr().String(),
		queue:   make(chan *item, s.cfg.PipelineMax),
		stopped: make(chan struct{}),
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	s.n.connsOpen.Add(1)
	s.n.connsTotal.Add(1)
	go c.serve()
}

func (c *conn) serve() {
	defer c.s.wg.Done()
	written := make(chan struct{})
	go func() { c.writeLoop(); close(written) }()
	c.readLoop()
	<-written
	if c.fatal {
		c.lingerClose()
	}
	c.nc.Close()
	c.s.mu.Lock()
	delete(c.s.conns, c)
	c.s.mu.Unlock()
	c.s.n.connsOpen.Add(-1)
}

// stopReading makes the reader stop at the next frame boundary it reaches
// (or at once, if it is waiting for bytes); replies in flight still go out.
func (c *conn) stopReading() {
	c.stopOnce.Do(func() {
		close(c.stopped)
		c.nc.SetReadDeadline(time.Now())
	})
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
	dec := protocol.NewDecoder(c.nc, protocol.DecoderOptions{BodySizeMax: c.s.cfg.BodySizeMax})
	for !c.isStopped() {
		f, err := dec.Decode()
		if errors.Is(err, io.EOF) {
			return
		}
		var pe *protocol.Error
		if err != nil && !errors.As(err, &pe) {
			if !c.isStopped() {
				c.s.lg.Debug("connection read ended", "peer", c.peer, "err", err)
			}
			return
		}
		it := c.s.admit(f, pe, c.transport, c.peer)
		c.queue <- it
		if pe != nil && pe.Fatal {
			c.fatal = true
			return
		}
	}
}

func (c *conn) writeLoop() {
	bw := bufio.NewWriterSize(c.nc, writeBufferSize)
	var werr error
	for it := range c.queue {
		if it.pending != nil && !it.pending.Poll() && bw.Buffered() > 0 && werr == nil {
			// About to wait for the log: let the replies already made go.
			werr = c.flush(bw)
		}
		reply := c.s.reply(it)
		if reply == nil || werr != nil {
			continue // still drain: every pending append must be waited for
		}
		if _, werr = bw.Write(reply); werr == nil && len(c.queue) == 0 {
			werr = c.flush(bw)
		}
		if werr != nil {
			c.s.lg.Debug("connection write failed", "peer", c.peer, "err", werr)
			c.stopReading()
		}
	}
	if werr == nil {
		c.flush(bw)
	}
}

// lingerClose half-closes and discards what the peer is still sending, for
// a bounded time, before the connection is closed. Closing a socket with
// unread input makes the kernel send a reset, and a reset can destroy the
// error reply before the peer reads it.
func (c *conn) lingerClose() {
	if cw, ok := c.nc.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	c.nc.SetReadDeadline(time.Now().Add(lingerTimeout))
	io.CopyN(io.Discard, c.nc, lingerBytesMax)
}

// Bounds on lingerClose.
const (
	lingerTimeout  = 2 * time.Second
	lingerBytesMax = 4 << 20 // bytes
)

func (c *conn) flush(bw *bufio.Writer) error {
	c.nc.SetWriteDeadline(time.Now().Add(WriteTimeout))
	return bw.Flush()
}

// admit validates a decoded frame and, if it is good, starts its append. It
// returns the item the writer will answer. transport and peer are recorded.
func (s *Server) admit(f *protocol.Frame, decodeErr *protocol.Error, transport, peer string) *item {
	id := ulid.Make().String()
	it := &item{inReplyTo: id}
	if f != nil {
		if v := f.ID(); v != "" {
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
	if decodeErr != nil {
		return s.refuse(it, decodeErr, peer)
	}
	msg, err := protocol.Parse(f)
	if err != nil {
		return s.refuse(it, err, peer)
	}
	env := &events.Envelope{
		ID:         id,
		MsgID:      id,
		Type:       msg.Info.Name,
		From:       msg.From.String(),
		To:         recipient(msg),
		Transport:  transport,
		Declared:   f.Transport,
		Peer:       peer,
		ReceivedAt: time.Now().UTC(),
		Headers:    f.Headers,
		Body:       f.Body,
	}
	if v := f.ID(); v != "" {
		// The sender named the message: a resend within the duplicate window
		// finds the first event instead of making a second.
		env.MsgID = "id:" + env.From + ":" + v
	}
	it.accepted = protocol.StatusAccepted
	if env.To == s.cfg.Name {
		it.accepted = protocol.StatusOK
	}
	it.pending = s.log.Append(context.Background(), env)
	return it
}

func (s *Server) refuse(it *item, err error, peer string) *item {
	s.n.refused.Add(1)
	it.refusal = err
	s.lg.Info("frame refused", "peer", peer, "id", it.inReplyTo, "status", int(protocol.StatusOf(err)), "reason", reasonOf(err))
	return it
}

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
