package events

import (
	"fmt"

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
var readerPublishDeny = []string{"aglx.>", "_INBOX.>"}

// readerImport maps a subject readers publish on, in their account, to one
// in the node's account.
type readerImport struct {
	from, to string
	streamed bool // the answer is many messages (a pull request's)
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
func shareWithReaders(ns *server.Server, stream string) error {
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
