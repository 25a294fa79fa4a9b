package events

import (
	"fmt"
	"time"

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

// ConnLost says which of the log's NATS connections is lost, and since
// when, or nil: known without asking the server, which a lost connection
// cannot reach (a health check asks it only when this says nothing).
func (l *Log) ConnLost() error { return l.connDown(0) }

// connDown says why appends are refused because a connection of the log's
// has been down for longer than grace, or nil. Health asks it with no
// grace: a lost connection is news at once.
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
		what := "the log takes no appends until it is back"
		if grace == 0 {
			what = fmt.Sprintf("appends wait for it up to %s, then are refused at once until it is back", ConnDownGrace)
		}
		return &protocol.Error{Status: protocol.StatusUnavailable, Reason: fmt.Sprintf(
			"events: the node's NATS connection (%s) has been lost since %s (%s ago); %s; nothing acknowledged is lost, resend with the same ID",
			c.name, since.UTC().Format(time.RFC3339), time.Since(since).Round(time.Second), what)}
	}
	return nil
}
