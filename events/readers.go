package events

import (
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// ReadersAccount is the NATS account of every client that connects to the
// embedded server without credentials. The node and its streams live in
// the server's global account; readers reach them only through what that
// account exports to this one: the events' subjects, pulls and
// acknowledgements for consumers, and the readers' gate (readerGate) for
// every other JetStream request.
//
// Until 2026-11-30 readers shared the node's account, kept in check by a
// list of subjects they could not publish to. A list cannot close one door:
// any request may name any reply subject, and JetStream sends its answer
// there from inside the account, where the event stream took it as an
// event (a reader could make the node lose an acknowledged event that
// way, events.errForeign). Across accounts, a reply subject is mapped on
// its way back to the reader's account, so no answer can land in the
// node's streams, its key-value buckets or its inboxes.
const ReadersAccount = "AGLX_READERS"

// readerPublishDeny are the subjects readers may not publish on inside
// their own account: the events' (a reader's forgery reached every other
// reader's plain subscription as an event) and the inboxes (junk in
// another reader's pull inbox ended its read). It does not cover reply
// subjects, which NATS permissions cannot restrict: a reader can still
// have JetStream or the gate answer onto an event subject or into another
// reader's inbox, or have stored events delivered onto any event subject.
// Readers share one user and one account; a plain subscriber must take
// only messages with the Aglx-Event-Id header whose subject is the one
// their envelope gives and matches its filter, once each (docs/EVENTS.md).
//
// The pulls and acknowledgements of the former relay consumer
// (LegacyRelayConsumer) are denied too: its name is public, they reach
// JetStream past the gate, and on a store from before the relay's cursor
// bucket a reader could fetch and acknowledge from it, moving the floor
// the relay takes over at its first start, so that messages still owed
// were never delivered (helper-142).
var readerPublishDeny = []string{"aglx.>", "_INBOX.>",
	"$JS.API.CONSUMER.MSG.NEXT.*." + LegacyRelayConsumer, "$JS.ACK.*." + LegacyRelayConsumer + ".>"}

// ReaderConnectionsMax bounds the connections all readers together hold
// at once, in connections; past it the server refuses a reader's CONNECT
// with "maximum account active connections exceeded". Each may hold up to
// ServerPendingBytesMax of deliveries it has not taken before the server
// closes it as a slow consumer, so readers hold at most 4 GiB of them.
// Until 2026-12-01 only the server's bound on all connections applied
// (65,536): 1,999 readers' connections from one host were accepted
// (helper-98). A node's readers are `aglx tail` sessions and a few
// analytics clients; more belong on a NATS server of their own that
// mirrors the stream. The node's own connections are in another account
// and are not counted.
const ReaderConnectionsMax = 64 // connections

// ReaderSubscriptionsMax bounds the subscriptions of one reader's
// connection; past it the server answers a SUB with "maximum
// subscriptions exceeded" and keeps the connection. Each costs the server
// some 600 bytes: one connection held 200,000 from 5.4 MB of SUB lines,
// 117 MiB of the node's heap (helper-98). A reader needs one for each
// consumer it reads (the stream has at most ReaderConsumersMax), one for
// its requests' answers, and its plain subscriptions. The node's own
// connections, in another account, are not limited.
const ReaderSubscriptionsMax = 512 // subscriptions per connection

// ReaderPullExpiresMax bounds how long a reader's pull request may wait
// for events: the gate gives every consumer a reader makes this
// max_expires (unless the reader asks for less), and JetStream answers a
// longer pull with 409. It is nats.go's default for Fetch, Consume and
// Messages (which `aglx tail` reads with), so clients that keep the
// defaults are unaffected. A pull's events reach the reader only while
// the server keeps the way back (ReaderPullResponseThreshold): a pull
// that outlived it had its later events sent into nothing.
const ReaderPullExpiresMax = 30 * time.Second

// ReaderPullResponseThreshold is how long the server keeps the way back
// to a reader for a pull, or an acknowledgement, that names a reply
// subject. Each such message leaves a response mapping in the node's
// account, some 330 bytes, until this much time has passed, whether
// anyone is still there to answer or not; the server sweeps them once a
// threshold, so each lives one to two. At the server's default (2
// minutes), 200,000 of them from a reader that then left held 64 MiB for
// that long (helper-98). It outlasts the longest pull
// (ReaderPullExpiresMax) by 10 s, for JetStream to take the pull from its
// queue. It bounds how long a mapping lives, not how many there are: one
// reader's connection made some 50,000 a second on two cores
// (2026-12-01), so a flood of them can still hold some 4 million, over a
// gigabyte (docs/OPERATIONS.md).
const ReaderPullResponseThreshold = ReaderPullExpiresMax + 10*time.Second

// ReaderAPIResponseThreshold is the same for the requests readers send
// through the gate. The gate answers each once, which ends its mapping,
// within readerGateTimeout of a worker taking it; a mapping lasts longer
// only for a request the gate's connection dropped under a flood, and an
// answer this late finds the reader's client gone (nats.go waits 5 s).
const ReaderAPIResponseThreshold = 2 * readerGateTimeout

// readerImport maps a subject readers publish on, in their account, to one
// in the node's account.
type readerImport struct {
	from, to string
	streamed bool // the answer is many messages (a pull request's)
}

// responseThreshold is how long the server keeps the way back to a reader
// for a message on im.from that names a reply subject.
func (im readerImport) responseThreshold() time.Duration {
	if im.streamed {
		return ReaderPullResponseThreshold
	}
	return ReaderAPIResponseThreshold
}

// readerImports are all the ways a reader reaches the node's account, all
// for the event stream only. Pulls and acknowledgements go straight to
// JetStream, as they must (only the server may set the reply subjects they
// use); every other request goes through the gate, which checks it,
// bounds how many come in, and passes it on. Nothing here creates,
// changes, purges or deletes a stream, reads the write-ahead stream or
// touches a key-value bucket.
func readerImports(stream string) []readerImport {
	gated := func(s string) readerImport { return readerImport{from: "$JS.API." + s, to: gateAPI + s} }
	return []readerImport{
		{from: "$JS.API.CONSUMER.MSG.NEXT." + stream + ".*", to: "$JS.API.CONSUMER.MSG.NEXT." + stream + ".*", streamed: true},
		// Streamed: an acknowledgement that asks for the next messages
		// (+NXT) is answered by as many as it asked for.
		{from: "$JS.ACK." + stream + ".>", to: "$JS.ACK." + stream + ".>", streamed: true},
		gated("INFO"),
		gated("STREAM.NAMES"),
		gated("STREAM.LIST"),
		gated("STREAM.INFO." + stream),
		gated("STREAM.MSG.GET." + stream),
		gated("CONSUMER.NAMES." + stream),
		gated("CONSUMER.LIST." + stream),
		gated("CONSUMER.CREATE." + stream),
		gated("CONSUMER.CREATE." + stream + ".>"),
		gated("CONSUMER.DURABLE.CREATE." + stream + ".*"),
		gated("CONSUMER.INFO." + stream + ".*"),
		gated("CONSUMER.DELETE." + stream + ".*"),
	}
}

// eventSubjects are the subjects the node's account exports to readers as a
// stream, for clients that subscribe to events as they are published.
const eventSubjects = "aglx.ev.>"

// shareWithReaders sets up the exports and imports between the node's
// account and ReadersAccount on a server made but not started.
// responseThreshold, if not zero, stands in for every export's own
// (tests).
func shareWithReaders(ns *server.Server, stream string, responseThreshold time.Duration) error {
	readers, err := ns.LookupAccount(ReadersAccount)
	if err != nil {
		return fmt.Errorf("events: server: the readers' account: %w", err)
	}
	node := ns.GlobalAccount()
	to := []*server.Account{readers}
	for _, im := range readerImports(stream) {
		rt := server.Singleton
		if im.streamed {
			rt = server.Streamed
		}
		if err := node.AddServiceExportWithResponse(im.to, rt, to); err != nil {
			return fmt.Errorf("events: server: export %s: %w", im.to, err)
		}
		thresh := im.responseThreshold()
		if responseThreshold > 0 {
			thresh = responseThreshold
		}
		if err := node.SetServiceExportResponseThreshold(im.to, thresh); err != nil {
			return fmt.Errorf("events: server: export %s: %w", im.to, err)
		}
		if err := readers.AddServiceImport(node, im.from, im.to); err != nil {
			return fmt.Errorf("events: server: import %s: %w", im.from, err)
		}
	}
	if err := node.AddStreamExport(eventSubjects, to); err != nil {
		return fmt.Errorf("events: server: export %s: %w", eventSubjects, err)
	}
	if err := readers.AddStreamImport(node, eventSubjects, ""); err != nil {
		return fmt.Errorf("events: server: import %s: %w", eventSubjects, err)
	}
	return nil
}

// readersAccount makes ReadersAccount, with its limits, in opts, which
// must have no accounts yet. The server takes an account's limits from a
// configuration only.
func readersAccount(opts *server.Options) (*server.Account, error) {
	conf := fmt.Sprintf("accounts: { %s: { limits: { max_connections: %d, max_subscriptions: %d } } }",
		ReadersAccount, ReaderConnectionsMax, ReaderSubscriptionsMax)
	if err := opts.ProcessConfigString(conf); err != nil {
		return nil, fmt.Errorf("events: server: the readers' account: %w", err)
	}
	if len(opts.Accounts) != 1 || opts.Accounts[0].Name != ReadersAccount || opts.Accounts[0].MaxActiveConnections() != ReaderConnectionsMax {
		return nil, fmt.Errorf("events: server: the readers' account was not made as configured")
	}
	return opts.Accounts[0], nil
}
