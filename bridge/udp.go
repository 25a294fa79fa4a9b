package bridge

import (
	"errors"
	"log/slog"
	"net"
	"time"

	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/protocol"
)

// ServeUDP reads datagrams from pc until Shutdown. Only TYPEs that the
// protocol allows over UDP (agent.announce) are appended; nothing is
// answered on success, as a broadcast expects no reply. A datagram that is
// an AGLX frame but is refused gets one error datagram back: it is smaller
// than any frame that can provoke it, so the node cannot amplify traffic.
// Anything that is not an AGLX frame at all gets no answer.
func (s *Server) ServeUDP(pc net.PacketConn) error {
	if !s.track(nil, pc) {
		return ErrServerClosed
	}
	waiting := make(chan *udpItem, UDPPendingMax)
	go s.udpWaiter(waiting) // track counted it in s.wg
	defer close(waiting)
	limit := newUDPLimiter()
	buf := make([]byte, protocol.DatagramSizeMax+1)
	var tempDelay time.Duration
	for {
		n, addr, err := pc.ReadFrom(buf)
		if err != nil {
			if s.isClosing() {
				return ErrServerClosed
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			// Out of buffers or memory, an ICMP error surfacing on the
			// socket: wait and go on, as ServeTCP does. Ending here left
			// the node without its UDP port, with /healthz still ok.
			tempDelay = s.backOff(tempDelay, "reading datagrams failed; retrying", pc.LocalAddr().String(), err)
			continue
		}
		tempDelay = 0
		if !limit.allow(addr, time.Now()) {
			s.n.udpLimited.Add(1)
			continue
		}
		s.handleDatagram(pc, addr, buf[:n], waiting)
	}
}

type udpItem struct {
	peer    string
	pending *events.Pending
	checked *events.Envelope // its signature was checked ahead of the fold
}

func (s *Server) handleDatagram(pc net.PacketConn, addr net.Addr, b []byte, waiting chan<- *udpItem) {
	peer := addr.String()
	if len(b) > protocol.DatagramSizeMax {
		s.n.udpRefused.Add(1)
		return
	}
	// The datagram buffer is reused: the frame must own its bytes.
	f, err := protocol.DecodeDatagram(append([]byte(nil), b...), protocol.DecoderOptions{BodySizeMax: s.cfg.BodySizeMax})
	var pe *protocol.Error
	if err != nil && errors.As(err, &pe) && f == nil {
		// Not even a frame we could read the addressing of: no reply.
		s.n.udpRefused.Add(1)
		s.datagramLog.log(s.lg, time.Now(), slog.LevelInfo, "datagram refused", "peer", peer, "status", int(pe.Status), "reason", pe.Reason)
		return
	}
	if err == nil {
		if typ := f.Type(); typ != "" {
			if info, ok := protocol.Lookup(typ); ok && !info.UDP {
				over := "TCP"
				if info.Security {
					over = "TLS"
				}
				err = protocol.Errorf(protocol.StatusBadRequest, "TYPE %s must be sent over %s; only agent.announce is accepted over UDP", typ, over)
			}
		}
	}
	var decodeErr *protocol.Error
	if err != nil {
		decodeErr = asProtocolError(err)
	}
	it := s.prepare(f, decodeErr, events.TransportUDP, peer)
	if s.validate(it) {
		s.cfg.Verifier.VerifyBatch([]*events.Envelope{it.env})
	}
	s.append(it)
	if it.refusal != nil {
		s.n.udpRefused.Add(1)
		if !it.silent {
			reply := s.errorFrameOver(protocol.TransportUDP, it.to, it.inReplyTo, it.refusal)
			if len(reply) <= len(b) {
				pc.WriteTo(reply, addr)
			}
		}
		return
	}
	// When the waiter is behind this blocks the read loop, and the kernel's
	// socket buffer absorbs or drops what comes next: UDP's own back-pressure.
	u := &udpItem{peer: peer, pending: it.pending}
	if it.keyed {
		u.checked = it.env
	}
	waiting <- u
}

func asProtocolError(err error) *protocol.Error {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe
	}
	return &protocol.Error{Status: protocol.StatusBadRequest, Reason: err.Error()}
}

// udpWaiter collects the results of UDP appends in order, for the counters
// and the log.
func (s *Server) udpWaiter(waiting <-chan *udpItem) {
	defer s.wg.Done()
	for it := range waiting {
		a, err := it.pending.Wait(s.abort)
		s.forgetUnfolded(it.checked, it.checked != nil, a, err)
		if err != nil {
			// Refused at the append (an ID reused with other content) or
			// not stored: counted, and logged at the edge's rate, since
			// a sender in a loop (with a forged source address, even)
			// would otherwise write a line per datagram.
			s.n.udpRefused.Add(1)
			s.n.refuse(protocol.StatusOf(err))
			if st := protocol.StatusOf(err); st >= 400 && st < 500 {
				s.datagramLog.log(s.lg, time.Now(), slog.LevelInfo, "datagram refused", "peer", it.peer, "status", int(st), "reason", protocol.ReasonOf(err))
			} else {
				s.failedLog.log(s.lg, time.Now(), slog.LevelWarn, "announce not stored", "peer", it.peer, "err", err)
			}
			continue
		}
		if a.Duplicate {
			s.n.duplicate.Add(1)
		} else {
			s.n.udpAppended.Add(1)
		}
	}
}
