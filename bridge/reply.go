package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/projections"
	"github.com/aglx/ledger/protocol"
	"github.com/oklog/ulid/v2"
)

// reply waits for the item's append, if any, and returns the frame that
// answers it, or nil for a frame that is never answered.
func (s *Server) reply(it *item) []byte {
	if it.pending != nil {
		a, err := it.pending.Wait(s.abort)
		s.forgetUnfolded(it.env, it.keyed, a, err)
		if err != nil {
			s.n.refuse(protocol.StatusOf(err))
			if st := protocol.StatusOf(err); st >= 400 && st < 500 {
				// The sender's mistake (a reused ID with other content),
				// not the store's: logged as refusals are.
				s.refusedLog.log(s.lg, time.Now(), slog.LevelInfo, "append refused", "id", it.inReplyTo, "status", int(st), "reason", protocol.ReasonOf(err))
			} else {
				s.failedLog.log(s.lg, time.Now(), slog.LevelWarn, "append failed", "id", it.inReplyTo, "err", err)
			}
			it.refusal = err
		} else {
			if a.Duplicate {
				s.n.duplicate.Add(1)
			} else {
				s.n.appended.Add(1)
			}
			if it.silent {
				return nil
			}
			if r, ok := s.answer(it, a); ok {
				return s.frame(r.Type, it.to, it.inReplyTo, r.Status, withEvent(r.Body, a))
			}
			return s.ackFrame(it.to, it.inReplyTo, it.accepted, a)
		}
	}
	if it.silent {
		return nil
	}
	return s.errorFrame(it.to, it.inReplyTo, it.refusal)
}

// forgetUnfolded drops what the validation workers recorded for env (if
// keyed, something was) when its event will never be folded: a resend
// answered from the first copy, or a failed append. A resend of a signed
// auth.request, again and again, kept its records, parsed key and all,
// until newer ones pushed them out (helper-76); the fold forgets the rest.
func (s *Server) forgetUnfolded(env *events.Envelope, keyed bool, a events.Appended, err error) {
	if keyed && (err != nil || a.Duplicate) {
		s.cfg.Verifier.Forget(env)
	}
}

// mayWait reports whether making the reply to it may wait: for its append, or
// for the projections' answer (up to AnswerTimeout), which the writer
// must not do with other replies still in its buffer.
func (s *Server) mayWait(it *item) bool {
	if it.pending == nil {
		return false
	}
	if !it.pending.Poll() {
		return true
	}
	if it.silent || it.env == nil {
		return false
	}
	a, err := it.pending.Wait(context.Background()) // resolved: returns at once
	return err == nil && s.answered(it, a) && !s.cfg.Answerer.Ready(a.Seq)
}

// answered reports whether the reply to it, appended as a, comes from the
// projections rather than being a plain ack.
func (s *Server) answered(it *item, a events.Appended) bool {
	if s.cfg.Answerer == nil {
		return false
	}
	if s.cfg.Answerer.Answers(it.env.Type) {
		return true
	}
	// The fold judges a signature where the sender has a key, and where
	// the message carries one, key or not (a placeholder is refused as
	// such): either may end in a refusal (401) the relay withholds by,
	// whatever the TYPE, and a 202 would tell the sender otherwise
	// (helper-58, helper-63). Other messages are answered once stored.
	return it.keyed || it.afterKeying || (it.env.Msg != nil && it.env.Msg.HasSignatureMember())
}

// answer waits for the projections' reply to an appended message, for the
// TYPEs they answer. A duplicate gets the reply to the first event (the
// outbox keeps it), or 202 when it is gone: a plain ack, as before
// 2026-11-30, told an agent whose transfer the ledger had refused that
// its resend succeeded.
func (s *Server) answer(it *item, a events.Appended) (projections.Reply, bool) {
	if !s.answered(it, a) {
		return projections.Reply{}, false
	}
	ctx := s.abort
	if !s.cfg.Answerer.Ready(a.Seq) {
		// A timer only for a reply that may wait: one for every reply
		// was 2% of a signed transfer's CPU in a profile (about a
		// microsecond), and an answer already applied needs none.
		//
		// AnswerTimeout counts from when the frame was read, not from
		// when the writer gets to it: the replies on one connection are
		// written in order, and when the folds stopped applying (a full
		// disk kept the events from the event stream) each waited its
		// own 10 s after the one before, so 256 frames in flight took 43
		// minutes to be answered and the client gave up (helper-109).
		// But an append that itself took longer (buffered through a
		// NATS reconnection) still gives the folds AnswerAfterAppendMin
		// to answer: a deadline already past made the answer 202 at
		// once, and a refused transfer's sender heard "recorded"
		// (helper-111).
		deadline := it.readAt.Add(AnswerTimeout)
		if least := it.pending.DurableAt().Add(AnswerAfterAppendMin); deadline.Before(least) {
			deadline = least
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(s.abort, deadline)
		defer cancel()
	}
	r, ok, err := s.cfg.Answerer.Answer(ctx, a.Seq)
	if a.Duplicate {
		r = r.ForResend()
	}
	if err != nil {
		s.failedLog.log(s.lg, time.Now(), slog.LevelWarn, "no answer from the projections; acknowledging as recorded (202), the outcome is to be read from the state", "seq", a.Seq, "err", err)
		it.accepted = protocol.StatusAccepted
	}
	if ok && !a.Duplicate && r.Status != protocol.StatusOK && r.Status != protocol.StatusAccepted {
		// A resend's refusal was counted with its first copy.
		s.n.refuse(r.Status)
		// The folds' refusals (402, most 401s, 409) were counted but
		// never logged: "why was this transfer refused?" had no answer
		// an operator could look up (helper-109).
		typ := cutForLog(it.env.Type, refusedTypeLogMax)
		s.refusedLog.log(s.lg, time.Now(), slog.LevelInfo, "frame refused by the projections", "peer", it.peer, "from", it.env.From, "type", typ,
			"id", it.inReplyTo, "seq", a.Seq, "event_id", a.EventID, "status", int(r.Status), "reason", replyReason(r.Body))
	}
	return r, ok
}

// replyReason is the reason an error reply's body gives (ErrorReply), cut
// at refusedReasonLogMax bytes for the log.
func replyReason(body []byte) string {
	var b struct {
		Reason string `json:"reason"`
	}
	json.Unmarshal(body, &b)
	return cutForLog(b.Reason, refusedReasonLogMax)
}

// cutForLog cuts s to at most max bytes for a log line, at the start of a
// character, and marks the cut.
func cutForLog(s string, max int) string {
	if len(s) <= max {
		return s
	}
	i := max
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

// refusedReasonLogMax bounds the reason a refusal's log line repeats, in
// bytes.
const refusedReasonLogMax = 512 // bytes

// withEvent puts event_id and seq first in a reply body, so every answer to
// a stored message names the event, whatever the projection decided. A body
// that names its event already is left alone: it may be signed, and adding
// a member would break the signature.
func withEvent(body []byte, a events.Appended) []byte {
	if bytes.HasPrefix(bytes.TrimSpace(body), []byte(`{"event_id":`)) {
		return body
	}
	out := make([]byte, 0, len(body)+64)
	out = append(out, `{"event_id":"`...)
	out = append(out, a.EventID...)
	out = append(out, `","seq":`...)
	out = strconv.AppendUint(out, a.Seq, 10)
	rest := bytes.TrimSpace(body)
	if len(rest) < 2 || rest[0] != '{' {
		return append(out, '}')
	}
	rest = bytes.TrimSpace(rest[1:])
	if len(rest) > 0 && rest[0] != '}' {
		out = append(out, ',')
	}
	return append(out, rest...)
}

// ackFrame says: your message is event a.EventID at a.Seq, on disk.
func (s *Server) ackFrame(to, inReplyTo string, status protocol.Status, a events.Appended) []byte {
	body := make([]byte, 0, 96)
	body = append(body, `{"event_id":"`...)
	body = append(body, a.EventID...)
	body = append(body, `","seq":`...)
	body = strconv.AppendUint(body, a.Seq, 10)
	if a.Duplicate {
		body = append(body, `,"duplicate":true`...)
	}
	body = append(body, '}')
	return s.frame("ack", to, inReplyTo, status, body)
}

// errorFrame says why a message was refused.
func (s *Server) errorFrame(to, inReplyTo string, err error) []byte {
	return s.errorFrameOver(protocol.TransportTCP, to, inReplyTo, err)
}

// errorFrameOver is errorFrame with the start line's transport: a reply
// to a datagram says UDP.
func (s *Server) errorFrameOver(transport, to, inReplyTo string, err error) []byte {
	status := protocol.StatusOf(err)
	body, _ := json.Marshal(struct {
		Status int    `json:"status"`
		Reason string `json:"reason"`
	}{int(status), protocol.ReasonOf(err)})
	return s.frameOver(transport, "error", to, inReplyTo, status, body)
}

func (s *Server) frame(typ, to, inReplyTo string, status protocol.Status, body []byte) []byte {
	return s.frameOver(protocol.TransportTCP, typ, to, inReplyTo, status, body)
}

func (s *Server) frameOver(transport, typ, to, inReplyTo string, status protocol.Status, body []byte) []byte {
	f := protocol.Frame{Transport: transport, Body: body}
	f.Headers = make([]protocol.Header, 0, 7)
	f.Headers = append(f.Headers, protocol.Header{Name: protocol.HeaderFrom, Value: s.cfg.Name})
	if to != "" {
		f.Headers = append(f.Headers, protocol.Header{Name: protocol.HeaderTo, Value: to})
	}
	f.Headers = append(f.Headers,
		protocol.Header{Name: protocol.HeaderType, Value: typ},
		protocol.Header{Name: protocol.HeaderID, Value: ulid.Make().String()},
		protocol.Header{Name: protocol.HeaderInReplyTo, Value: inReplyTo},
		protocol.Header{Name: protocol.HeaderStatus, Value: status.String()},
		protocol.Header{Name: protocol.HeaderContentType, Value: "application/json"},
	)
	return protocol.AppendFrame(make([]byte, 0, 256+len(body)), &f)
}
