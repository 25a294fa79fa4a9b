package events

// Why the log refuses appends: a store that takes no writes, a lost
// connection, an event stream that refuses events, a failed commit. Each
// is known without asking the server, so that a refusal and /healthz come
// at once rather than after a question times out.

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/aglx/ledger/protocol"
)

// ConnDownGrace is how long a lost NATS connection may stay lost before
// the log refuses appends at once. Within it an append waits: the client
// buffers what is sent while it reconnects and sends it when it is back,
// and a server restart takes the client about two seconds to notice it
// is back (nats.go's reconnect wait), so a restart costs no refusals.
// Past it every append waited AckTimeout (30 s) for its 503 while the
// node's log already said the connection was lost, and a client with
// frames in flight heard nothing for as long (helper-104).
const ConnDownGrace = 3 * time.Second

// ConnLost says which of the log's NATS connections has been lost for
// longer than ConnDownGrace, and since when, or nil: known without asking
// the server, which a lost connection cannot reach (a health check asks
// it only when this says nothing). It uses the appends' grace, so that
// /healthz and aglx_healthy turn when appends are refused, not at every
// blip a reconnection mends (helper-105).
func (l *Log) ConnLost() error { return l.connDown(ConnDownGrace) }

// connDown says why appends are refused because a connection of the log's
// has been down for longer than grace, or nil.
func (l *Log) connDown(grace time.Duration) error {
	for _, c := range []struct {
		w    *dropWatch
		name string
	}{{l.walDrops, "commit"}, {l.drops, "main"}} {
		if c.w == nil || (c.name == "main" && c.w == l.walDrops) {
			continue // none, or the one connection both use, asked already
		}
		since, down := c.w.down()
		if !down || time.Since(since) < grace {
			continue
		}
		return &protocol.Error{Status: protocol.StatusUnavailable, Reason: fmt.Sprintf(
			"events: the node's NATS connection (%s) has been lost since %s (%s ago); the log refuses appends at once until it is back; nothing acknowledged is lost, resend with the same ID",
			c.name, since.UTC().Format(time.RFC3339), time.Since(since).Round(time.Second))}
	}
	return nil
}

// errStoreDownForClients is what a client hears while the store takes no
// writes. The reason itself, with the store's paths in it (the server's
// "write /var/lib/aglx/.../1.blk: no space left on device"), is for the
// operator, in /healthz and the log; an agent was told the node's file
// layout (helper-104).
var errStoreDownForClients = &protocol.Error{Status: protocol.StatusUnavailable,
	Reason: "the node's store takes no writes until its operator acts (its disk, or the store's limit, is full, or its JetStream shut down); nothing acknowledged is lost; resend with the same ID later"}

// Healthy reports why the log refuses appends or why its last commit
// failed, or nil.
func (l *Log) Healthy() error {
	if err := l.StoreDown(); err != nil {
		return err
	}
	if err := l.ConnLost(); err != nil {
		return err
	}
	if err := l.unhealthy.get(); err != nil {
		return err
	}
	if err := l.pubErr.get(); err != nil {
		return err
	}
	return l.lastCommitErr.get()
}

// StoreDown is Config.StoreDown's answer, nil without one: why the store
// takes nothing, known without asking it (a health check asks it only
// when this says nothing).
func (l *Log) StoreDown() error {
	if l.cfg.StoreDown == nil {
		return nil
	}
	return l.cfg.StoreDown()
}

// setPublisherFailing records that the event stream refuses events (err),
// or with nil that it takes them again.
func (l *Log) setPublisherFailing(err error) {
	if err == nil {
		l.pubErr.set(nil)
		return
	}
	err = fmt.Errorf("events: the event stream refuses events, so the log takes no new ones until it does (the write-ahead stream must not get ahead of it by more than it holds): %w", explainStoreLimit(err))
	l.pubErr.set(err)
}

// atStoreLimit reports whether err is JetStream's refusal of a write at
// its limit on the store (Server.StoreUsage).
func atStoreLimit(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jsErrStoreLimit
}

// errStoreLimit explains JetStream's "insufficient resources" to the
// operator, in /healthz and the log (helper-106).
type errStoreLimit struct{ err error }

func (e errStoreLimit) Error() string {
	return "the store has reached JetStream's limit on it, which it sets at each start to three quarters of the disk's free space plus of what the streams hold (aglx_store_used_bytes, aglx_store_limit_bytes): free disk space, or move the store to a larger disk, and restart the node; nothing acknowledged is lost (" + e.err.Error() + ")"
}

func (e errStoreLimit) Unwrap() error { return e.err }

// explainStoreLimit is err, explained if it is a refusal at the store's
// limit.
func explainStoreLimit(err error) error {
	if atStoreLimit(err) {
		return errStoreLimit{err}
	}
	return err
}
