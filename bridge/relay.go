package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/projections"
	"github.com/aglx/ledger/protocol"
	"github.com/nats-io/nats.go/jetstream"
)

// Relay bounds.
const (
	// RelayConsumer is the durable JetStream consumer the relay reads the
	// event stream with; JetStream keeps its position across restarts.
	RelayConsumer = "AGLX_RELAY"
	// RelayAttemptsMax bounds the deliveries of one message. After the last
	// one the message stays recorded, undelivered, and is logged.
	RelayAttemptsMax = 10
	// relayTimeout bounds one delivery: connecting, writing, and reading
	// the addressee's reply.
	relayTimeout = 10 * time.Second
	// relayPendingMax bounds the messages handed out and not yet settled.
	relayPendingMax = 1024
)

// HeaderRelayedBy marks a frame the node delivers on behalf of its sender.
// A frame that arrives with it is recorded but never relayed again, so two
// nodes (or an agent that registers a node's own address) cannot bounce a
// message between them forever: the relay is one hop.
const HeaderRelayedBy = "RELAYED-BY"

// relayBackOff is the wait before each redelivery; JetStream applies it.
var relayBackOff = []time.Duration{time.Second, 5 * time.Second, 15 * time.Second, 30 * time.Second, time.Minute,
	2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 10 * time.Minute}

// relaySubjects are the messages agents send each other: the relay
// delivers them to the addressee. Registry, security and announce
// messages are for registries and are not relayed.
var relaySubjects = []string{
	events.SubjectPrefix + ".task.>", events.SubjectPrefix + ".credit.>",
	events.SubjectPrefix + ".mentor.request.>", events.SubjectPrefix + ".mentor.feedback.>",
	events.SubjectPrefix + ".registry.exchange.>", events.SubjectPrefix + ".shutdown.>",
	events.SubjectPrefix + ".plan.>", events.SubjectPrefix + ".ack.>", events.SubjectPrefix + ".error.>",
}

// Relay delivers the messages agents address to each other. It follows the
// event stream with a durable consumer, so a message is delivered after it
// is recorded, at least once, across restarts of the node. It sends each
// message, exactly as recorded, to the address the addressee registered
// (registry.update's address and port) and counts it delivered when the
// addressee answers. A message to an agent that has no live registration
// with an address is not delivered: it stays in the log, where the agent
// (or anyone) can read it. A failed delivery is retried with back-off, up
// to RelayAttemptsMax times.
type Relay struct {
	Log      *events.Log
	Runner   *projections.Runner
	Registry *projections.Registry
	NodeURI  string
	Lg       *slog.Logger
	// Networks are the only networks the relay connects to. Agents say
	// where they listen, so without this bound anyone who can register
	// could make the node open connections into any network it can reach.
	// Addresses must be IP literals.
	Networks []netip.Prefix

	delivered, undeliverable, failed atomic.Int64

	mu    sync.Mutex
	conns map[string]*Client // by address; reused while they work
}

// RelayCounters are the relay's running totals.
type RelayCounters struct {
	Delivered     int64 `json:"delivered"`
	Undeliverable int64 `json:"undeliverable"`
	Failed        int64 `json:"failed_attempts"`
}

// Counters returns the relay's running totals.
func (r *Relay) Counters() RelayCounters {
	return RelayCounters{Delivered: r.delivered.Load(), Undeliverable: r.undeliverable.Load(), Failed: r.failed.Load()}
}

// Run delivers until ctx ends.
func (r *Relay) Run(ctx context.Context) error {
	cons, err := r.Log.JetStream().CreateOrUpdateConsumer(ctx, r.Log.Stream(), jetstream.ConsumerConfig{
		Durable:        RelayConsumer,
		Description:    "AGLX relay: delivers agent-to-agent messages to their addressees",
		DeliverPolicy:  jetstream.DeliverNewPolicy,
		AckPolicy:      jetstream.AckExplicitPolicy,
		MaxDeliver:     RelayAttemptsMax,
		BackOff:        relayBackOff,
		FilterSubjects: relaySubjects,
		MaxAckPending:  relayPendingMax,
	})
	if err != nil {
		return fmt.Errorf("relay: consumer: %w", err)
	}
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("relay: %w", err)
	}
	defer it.Stop()
	defer r.closeConns()
	for {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return nil
			}
			r.Lg.Warn("relay: reading the stream", "err", err)
			continue
		}
		r.handle(m)
	}
}

func (r *Relay) handle(m jetstream.Msg) {
	meta, err := m.Metadata()
	if err != nil {
		m.Term()
		return
	}
	// The addressee is the subject's last token: look it up before paying
	// for decoding the envelope, since most messages in a busy network go
	// to agents that are not listening at a registered address.
	to, err := events.RecipientOf(m.Subject())
	if err != nil || to == "" || to == r.NodeURI {
		m.Ack() // not an agent-to-agent message
		return
	}
	var addr string
	var ok bool
	r.Runner.View(func(uint64) { addr, ok = r.Registry.Contact(to, time.Now()) })
	if !ok {
		r.undeliverable.Add(1)
		r.Lg.Debug("relay: addressee has no live registration with an address; the message stays in the log", "seq", meta.Sequence.Stream, "to", to)
		m.Term()
		return
	}
	env, err := events.FromMsg(m.Headers(), m.Data(), meta.Sequence.Stream)
	if err != nil || env.Header(HeaderRelayedBy) != "" {
		m.Ack() // not decodable, or relayed once already
		return
	}
	if !r.allowed(addr) {
		r.undeliverable.Add(1)
		r.Lg.Info("relay: the addressee's address is outside the relay networks; the message stays in the log", "seq", env.Seq, "to", env.To, "addr", addr)
		m.Term()
		return
	}
	if err := r.deliver(addr, env); err != nil {
		r.failed.Add(1)
		r.Lg.Info("relay: delivery failed; will retry", "seq", env.Seq, "to", env.To, "addr", addr, "attempt", meta.NumDelivered, "err", err)
		if meta.NumDelivered >= RelayAttemptsMax {
			r.Lg.Warn("relay: giving up; the message stays in the log", "seq", env.Seq, "to", env.To)
		}
		// An explicit NAK is redelivered at once unless it names a delay; the
		// consumer's back-off only governs unacknowledged timeouts.
		m.NakWithDelay(relayBackOff[min(int(meta.NumDelivered), len(relayBackOff))-1])
		return
	}
	r.delivered.Add(1)
	m.Ack()
}

// allowed reports whether addr is an IP literal inside the relay networks.
func (r *Relay) allowed(addr string) bool {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return false
	}
	for _, n := range r.Networks {
		if n.Contains(ap.Addr().Unmap()) {
			return true
		}
	}
	return false
}

// deliver sends env's frame to addr and waits for the addressee's reply.
func (r *Relay) deliver(addr string, env *events.Envelope) error {
	c, err := r.conn(addr)
	if err != nil {
		return err
	}
	c.Conn().SetDeadline(time.Now().Add(relayTimeout))
	f := env.Frame()
	if f.Transport == "" {
		f.Transport = protocol.TransportTCP
	}
	// A copy of the headers: the envelope may be shared with the folds.
	f.Headers = append(append([]protocol.Header(nil), f.Headers...), protocol.Header{Name: HeaderRelayedBy, Value: r.NodeURI})
	if err := c.WriteFrame(f); err == nil {
		err = c.Flush()
	}
	if err == nil {
		_, err = c.ReadReply()
	}
	if err != nil {
		r.drop(addr)
		return err
	}
	return nil
}

func (r *Relay) conn(addr string) (*Client, error) {
	r.mu.Lock()
	c := r.conns[addr]
	r.mu.Unlock()
	if c != nil {
		return c, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), relayTimeout)
	defer cancel()
	c, err := Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	if r.conns == nil {
		r.conns = map[string]*Client{}
	}
	r.conns[addr] = c
	r.mu.Unlock()
	return c, nil
}

func (r *Relay) drop(addr string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c := r.conns[addr]; c != nil {
		c.Close()
		delete(r.conns, addr)
	}
}

func (r *Relay) closeConns() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for a, c := range r.conns {
		c.Close()
		delete(r.conns, a)
	}
}
