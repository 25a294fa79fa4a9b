package events

import (
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"

	"github.com/nats-io/nats.go"
)

// ClientEvents are options for the node's own NATS connections that put
// what the client library notices on its own into the node's log and
// counters: a lost connection, a reconnection, an asynchronous error such
// as a slow consumer. Without them the library printed its own unstructured
// line on stderr ("nats: slow consumer, messages dropped on connection
// [2] for subscription on ..."), which said nothing of what it meant for
// the node, and a lost connection to an operator's NATS was not logged at
// all: appends failed with 503 and nothing said why.
//
// The node's connections reconnect, and the client then reports a lost
// one with its cause; it reports a close of the node's own with none, and
// (without reconnects) a lost one too, which is why a connection given
// these options should reconnect.
//
// No line is rate-limited: the library reports a slow consumer once until
// the subscription catches up, and reconnects at most once per its wait.
//
// lost says what the node cannot do while this connection is down, for
// the log line: the connections differ (the commit connection takes the
// appends; the other copies events to the event stream and reads).
func ClientEvents(lg *slog.Logger, name, lost string) []nats.Option {
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	lg = lg.With("nats_connection", name)
	return []nats.Option{
		nats.ErrorHandler(func(nc *nats.Conn, sub *nats.Subscription, err error) {
			clientCounters.asyncErrors.Add(1)
			args := []any{"err", err}
			if sub != nil {
				args = append(args, "subject", sub.Subject)
			}
			if errors.Is(err, nats.ErrSlowConsumer) {
				clientCounters.slowConsumers.Add(1)
				meaning, harmless := slowConsumerMeaning(sub)
				log := lg.Warn
				if harmless {
					// A replay of a long log at start met it two to
					// eight times, and on-call read the warnings as
					// trouble (helper-104); it costs only time.
					log = lg.Info
				}
				log("NATS client: a subscription fell behind and the client dropped messages for it; "+meaning, args...)
				return
			}
			lg.Warn("NATS client: asynchronous error", args...)
		}),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if err == nil {
				return // the node closed it itself, as when it stops
			}
			clientCounters.disconnects.Add(1)
			lg.Warn("NATS connection lost; until it is back, "+lost, "err", err)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			lg.Info("NATS connection back", "server", nc.ConnectedUrlRedacted())
		}),
	}
}

// slowConsumerMeaning says what a slow consumer costs, by the
// subscription's subject. The node's reads use ordered consumers, whose
// deliveries come to a plain inbox under NodeInboxPrefix: when the client
// drops one, the ordered consumer sees the gap and starts again at the
// first event it lacks, so the read loses nothing but time (the client
// library's own design: nats.go jetstream/ordered.go, which checks each
// delivery's consumer sequence and resets on a gap). The same happens when the
// dropped message was a heartbeat, which the client puts in the same
// bounded channel as the events: a read slower than its deliveries (a cold
// replay whose folds take longer than the stream takes to send) can fill
// the channel exactly when a heartbeat comes. Other subscriptions have no
// such repair.
func slowConsumerMeaning(sub *nats.Subscription) (meaning string, harmless bool) {
	if sub != nil && strings.HasPrefix(sub.Subject, NodeInboxPrefix+".") && !strings.ContainsAny(sub.Subject, "*>") {
		return "it is a read's consumer, which starts again at the first event it lacks: nothing is lost, the read is slower", true
	}
	return "what that subscription was to receive is lost", false
}

// clientCounters count what ClientEvents saw, for /metrics.
var clientCounters struct {
	asyncErrors, slowConsumers, disconnects atomic.Uint64
}

// ClientCounters is a snapshot of what the node's NATS connections
// reported since the process started.
type ClientCounters struct {
	AsyncErrors   uint64 // every asynchronous error, slow consumers included
	SlowConsumers uint64
	Disconnects   uint64
}

// ReadClientCounters returns the counters of ClientEvents.
func ReadClientCounters() ClientCounters {
	return ClientCounters{
		AsyncErrors:   clientCounters.asyncErrors.Load(),
		SlowConsumers: clientCounters.slowConsumers.Load(),
		Disconnects:   clientCounters.disconnects.Load(),
	}
}
