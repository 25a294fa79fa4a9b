package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"syscall"
	"time"

	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/protocol"
)

// The delivery of one message: what the relay writes to an addressee, on
// which connection, and what it makes of the answer. relay.go decides
// which messages go where and when; relay_lane.go runs the deliveries.

// relayBody is a body as the relay writes it: on one line, with the white
// space outside its strings left out (a JSON string holds no line break).
// --relay-networks bounds the relay's addresses, not what listens there,
// and a body is JSON only to the node: a sender could lay one out so that
// a line of it was a command to a line-based service an agent had
// registered as its address (helper-56). Every line the relay writes now
// starts as AGLX's do: the start line, "NAME:" and a header, or '{'.
// json.Compact drops only the white space outside strings: escapes and
// number spellings stay as the sender wrote them, so the canonical form,
// which the signature covers, is unchanged and the signature verifies.
func relayBody(b []byte) []byte {
	var out bytes.Buffer
	out.Grow(len(b))
	if json.Compact(&out, b) != nil {
		return b // not JSON: the node stored it, so it cannot be; as it was
	}
	return out.Bytes()
}

// deliver sends env's frame to addr and waits for the addressee's reply,
// except for the TYPEs that are never answered (ack, error): written and
// flushed, they are delivered. Waiting for their reply counted every one
// as failed after relayTimeout and sent it again, up to ten times, while
// the address was marked down. Only addr's lane calls it, so a connection
// is never used by two deliveries at once.
//
// A kept connection may have been closed by the addressee while it was
// idle (an aglxd closes connections idle for --idle-timeout): if a
// delivery on one finds it closed (EOF, reset, broken pipe), it is made
// again on a new connection before it counts as failed, so that a quiet
// spell does not mark a live address down (relay_breaker.go).
func (r *Relay) deliver(ctx context.Context, addr string, env *events.Envelope) error {
	defer r.release(addr)
	f := env.Frame()
	if f.Transport == "" {
		f.Transport = protocol.TransportTCP
	}
	// A copy of the headers: the envelope may be shared with the folds.
	// It has no RELAYED-BY (consider left such frames alone), so ours is
	// the only one.
	f.Headers = append(append([]protocol.Header(nil), f.Headers...), protocol.Header{Name: HeaderRelayedBy, Value: r.NodeURI})
	f.Body = relayBody(f.Body)
	info, _ := protocol.Lookup(env.Type)
	answered := !info.NoReply
	// One bound for the whole delivery, the redial of a kept connection
	// included: with a timeout of its own, an addressee that held a
	// message on a kept connection almost the whole timeout and then
	// closed it held its lane for nearly two.
	deadline := time.Now().Add(r.timeout())
	for {
		c, kept, err := r.conn(ctx, addr, deadline)
		if err != nil {
			return err
		}
		if kept {
			// Before a message nothing will answer, wait a moment for a
			// close the addressee may have sent: no reply would show that
			// the write went nowhere. Before any other, only look for
			// bytes already there: something nobody asked for (an answer
			// to an ack, say), which read as this message's reply would
			// put every later reply on the connection one behind.
			wait := strayProbeWait
			if !answered {
				wait = staleProbeWait
			}
			if c.PeerClosed(wait) || c.Buffered() > 0 {
				r.drop(addr)
				continue
			}
		}
		err = r.send(ctx, c, f, answered, deadline)
		var pe *protocol.Error
		if err == nil || errors.As(err, &pe) {
			// An answer, even one that does not decode, is the
			// addressee's receipt: sending again would only duplicate.
			// After one that ends the byte stream, though, the
			// connection reads that same error for ever after: every
			// later message on it would count as delivered unsent.
			if pe != nil && pe.Fatal {
				r.drop(addr)
			}
			return nil
		}
		r.drop(addr)
		if !kept || ctx.Err() != nil || !closedByPeer(err) {
			return err
		}
	}
}

// closedByPeer reports whether err is what a write or read gets on a
// connection the other side had closed: the sign of a kept connection gone
// stale, not of an addressee that failed to answer.
func closedByPeer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// send writes f on c and, if answered, reads the addressee's reply, by
// deadline (the delivery's, within the relay's timeout: Relay.Timeout).
func (r *Relay) send(ctx context.Context, c *Client, f *protocol.Frame, answered bool, deadline time.Time) error {
	// Shutdown cuts a delivery short instead of waiting out its timeout.
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	c.Conn().SetDeadline(deadline)
	err := c.WriteFrame(f)
	if err == nil {
		err = c.Flush()
	}
	if err == nil && answered {
		var reply *protocol.Frame
		if reply, err = c.ReadReply(); err == nil {
			if typ := reply.Type(); typ != protocol.TypeAck && typ != protocol.TypeError {
				r.unexpected.Add(1)
				r.strayLog.log(r.Lg, time.Now(), slog.LevelWarn, "relay: an addressee answered a relayed message on the relay's connection; the answer is not recorded or delivered: it must send its answers to the node",
					"addressee", f.To(), "message_type", f.Type(), "reply_type", typ)
			}
			err = refusedForNow(reply)
		}
	}
	return err
}

// errTryAgain is an addressee's answer that it did not take the message
// for now (429, or a 5xx such as 503: "not stored; resend").
var errTryAgain = errors.New("relay: the addressee did not take the message for now")

// refusedForNow returns errTryAgain for an error reply that asks for the
// message again later. Any other reply is the addressee's receipt: a 4xx
// says the message itself is wrong, and sending it again would get the
// same. Counted as delivered, a 429 or 503 lost the message.
func refusedForNow(reply *protocol.Frame) error {
	if reply.Type() != protocol.TypeError {
		return nil
	}
	code, _, _ := strings.Cut(reply.Value(protocol.HeaderStatus), " ")
	if code == "429" || (len(code) == 3 && code[0] == '5') {
		return fmt.Errorf("%w: %s", errTryAgain, reply.Value(protocol.HeaderStatus))
	}
	return nil
}

// staleProbeWait is how long the relay waits for a kept connection to
// show that its peer closed it, before a message that gets no reply;
// strayProbeWait how long it looks for bytes already on one before any
// other message.
const (
	staleProbeWait = time.Millisecond
	strayProbeWait = 50 * time.Microsecond
)
