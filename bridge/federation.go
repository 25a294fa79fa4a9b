package bridge

import (
	"bytes"
	"context"
	"crypto"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aglx/ledger/projections"
	"github.com/aglx/ledger/protocol"
	"github.com/oklog/ulid/v2"
)

// Federation bounds.
const (
	// SyncIntervalDefault is how often the node pushes its changed registry
	// entries to each peer registry.
	SyncIntervalDefault = 10 * time.Second
	// syncEntriesPerFrame and syncBodyMax bound one registry.sync: the
	// entries are packed by their encoded size, well under a peer's
	// default body limit (protocol.BodySizeMaxDefault, 1 MiB), with room
	// for the timestamp and the signature. An entry is about 200 bytes,
	// but its free text (status, capabilities) is bounded only by the
	// body that registered it.
	syncEntriesPerFrame = 1000      // entries
	syncBodyMax         = 512 << 10 // bytes
	// syncDialTimeout bounds a push's connection, and then each page's
	// frames and replies.
	syncDialTimeout = 10 * time.Second
	// syncPageEntries is about how many changed entries a push reads
	// under one Runner.View, holding up the fold (and every reply) for
	// as long, and sends before reading more: ten frames' worth.
	syncPageEntries = 10 * syncEntriesPerFrame // entries
	// SyncRetryMax bounds the wait between pushes to a peer that keeps
	// failing: after each failure the wait doubles, from the interval up
	// to this; the first push that succeeds goes back to the interval. A
	// peer records every registry.sync it refuses (its log keeps what it
	// was sent), so a node pushing every 10 s to a peer that had not bound
	// its key yet put some 8,600 refused events a day in the peer's log
	// for good (helper-73); this is at most 300.
	SyncRetryMax = 5 * time.Minute
)

// syncWait is the wait before the next push, after one that waited last
// and failed or not.
func syncWait(interval, last time.Duration, failed bool) time.Duration {
	if !failed {
		return interval
	}
	return min(max(2*last, interval), max(SyncRetryMax, interval))
}

// Peer is a registry this node pushes its registry to: its URI (the TO of
// the registry.sync frames), its AGLX address, and how its answers are
// trusted. The entries are signed, so nobody on the path can change them;
// but the peer's registry.ack, which makes this node move past them, is
// trusted only as far as the connection is: over plain TCP anyone on the
// path could answer a push with a forged ack, and this node would not
// send those entries again until they changed (helper-87). So a peer is
// reached over TLS, trusting its certificate as `aglx send` does (CA, a
// PEM file such as the peer's DATA/tls/cert.pem, or Pin, its SHA-256
// fingerprint), unless Plain says plain TCP, which the operator must ask
// for by name.
type Peer struct {
	URI   string
	Addr  string
	CA    string // PEM file of certificates to trust for the peer's TLS port
	Pin   string // the peer's certificate's fingerprint, as ParsePin returns it
	Plain bool   // plain TCP: the peer's acks are not authenticated
}

// ParsePeer reads "registry://NAME@HOST:PORT?TRUST", where TRUST is
// ca=FILE or pin=FINGERPRINT (or both, joined by &) for the peer's TLS
// port, or plain for its TCP port. With neither the peer is refused: a
// push whose acknowledgement anyone on the path could forge is not the
// default.
func ParsePeer(s string) (Peer, error) {
	uri, rest, ok := strings.Cut(s, "@")
	addr, query, _ := strings.Cut(rest, "?")
	if !ok || addr == "" {
		return Peer{}, fmt.Errorf("%q: want registry://NAME@HOST:PORT?ca=FILE, ?pin=FINGERPRINT or ?plain", s)
	}
	if _, port, err := net.SplitHostPort(addr); err != nil {
		return Peer{}, fmt.Errorf("%q: %s is not HOST:PORT: %w", s, addr, err)
	} else if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return Peer{}, fmt.Errorf("%q: %s is not HOST:PORT: port %q is not a number from 0 to 65535", s, addr, port)
	}
	u, err := protocol.ParseURI(uri)
	if err != nil {
		return Peer{}, err
	}
	if u.Scheme != protocol.SchemeRegistry {
		return Peer{}, fmt.Errorf("%q: a peer must be a registry:// URI", s)
	}
	p := Peer{URI: u.String(), Addr: addr}
	for _, opt := range strings.Split(query, "&") {
		name, value, _ := strings.Cut(opt, "=")
		switch {
		case (name == "ca" && p.CA != "") || (name == "pin" && p.Pin != ""):
			return Peer{}, fmt.Errorf("%q: %s= is given twice; give it once (to trust two certificates, put both in the CA file)", s, name)
		case name == "ca" && value != "":
			p.CA = value
		case name == "pin" && value != "":
			if p.Pin, err = ParsePin(value); err != nil {
				return Peer{}, fmt.Errorf("%q: %w", s, err)
			}
		case opt == "plain":
			p.Plain = true
		case opt == "" && query == "":
		default:
			return Peer{}, fmt.Errorf("%q: %q is not ca=FILE, pin=FINGERPRINT or plain (options are joined by &, so a CA file's path cannot hold one)", s, opt)
		}
	}
	switch {
	case p.Plain && (p.CA != "" || p.Pin != ""):
		return Peer{}, fmt.Errorf("%q: plain is TCP without TLS; it does not go with ca= or pin=", s)
	case !p.Plain && p.CA == "" && p.Pin == "":
		return Peer{}, fmt.Errorf("%q: say how to trust the peer: ?ca=FILE (its DATA/tls/cert.pem) or ?pin=FINGERPRINT (GET /v1/node's tls_sha256) for its TLS port, "+
			"or ?plain for its TCP port, where anyone on the path can forge its registry.ack and make this node skip entries", s)
	}
	return p, nil
}

// CheckTrust says whether the peer's trust can be used now: its CA file
// read and holding a certificate. ParsePeer leaves the file alone, so that
// a node whose CA file is missing for a moment after its start (replaced
// by rm and cp) fails those pushes and takes the file at the next one,
// instead of pushing to no peer at all (helper-94); a start checks it
// once, to refuse a path that is wrong.
func (p Peer) CheckTrust() error {
	_, err := p.tlsConfig()
	return err
}

// tlsConfig is the client configuration for the peer's TLS port, nil for a
// plain peer. It reads the CA file each time: a peer's new certificate is
// taken at the next push, without a restart.
func (p Peer) tlsConfig() (*tls.Config, error) {
	if p.Plain {
		return nil, nil
	}
	host, _, err := net.SplitHostPort(p.Addr)
	if err != nil {
		return nil, err
	}
	return ClientTLS(p.CA, p.Pin, host)
}

// dial connects to the peer as its trust says.
func (p Peer) dial(ctx context.Context) (*Client, error) {
	cfg, err := p.tlsConfig()
	if err != nil {
		return nil, err
	}
	if cfg == nil {
		return Dial(ctx, p.Addr)
	}
	return DialTLS(ctx, p.Addr, cfg)
}

// String is the peer as ParsePeer reads it.
func (p Peer) String() string {
	var opts []string
	if p.CA != "" {
		opts = append(opts, "ca="+p.CA)
	}
	if p.Pin != "" {
		opts = append(opts, "pin="+p.Pin)
	}
	if p.Plain {
		opts = append(opts, "plain")
	}
	return p.URI + "@" + p.Addr + "?" + strings.Join(opts, "&")
}

// Federation pushes the registry entries that changed since the last
// successful push to one peer, every interval, as signed registry.sync
// frames. While the peer is down it keeps trying, from the same point, so
// nothing is skipped; the peer's merge rule makes a repeated entry harmless.
type Federation struct {
	Peer     Peer
	NodeURI  string
	Key      crypto.Signer
	Runner   *projections.Runner
	Registry *projections.Registry
	Interval time.Duration
	Log      *slog.Logger

	failures atomic.Int64
	skipped  atomic.Int64 // entries too large to push
	failing  atomic.Bool  // the last push failed

	// entriesMax bounds the entries of one registry.sync body, in bytes
	// (0: syncBodyMax-syncBodySlack). A peer may run with a --body-max
	// below syncBodyMax; it refuses a larger body with 413, and the push
	// retried the same page for ever, so no later change reached it
	// (helper-143). So each 413 halves the bound, down to
	// syncEntriesMin, which fits the smallest --body-max. Only Run's
	// goroutine reads and writes it.
	entriesMax int
}

// syncEntriesMin is the least that a 413 from the peer makes entriesMax:
// with the body's other members and its signature (under 200 bytes), a
// body within protocol.BodySizeMaxMin.
const syncEntriesMin = 768 // bytes

// entriesBound is entriesMax, or its default.
func (f *Federation) entriesBound() int {
	if f.entriesMax == 0 {
		return syncBodyMax - syncBodySlack
	}
	return f.entriesMax
}

// Failing reports whether the last push to the peer failed.
func (f *Federation) Failing() bool { return f.failing.Load() }

// Failures counts the pushes that did not reach the peer.
func (f *Federation) Failures() int64 { return f.failures.Load() }

// Skipped counts the entries left out of a push for being too large for a
// registry.sync of their own.
func (f *Federation) Skipped() int64 { return f.skipped.Load() }

// Run pushes until ctx ends.
func (f *Federation) Run(ctx context.Context) {
	interval := f.Interval
	if interval <= 0 {
		interval = SyncIntervalDefault
	}
	var pushed uint64 // the applied sequence the peer has everything up to
	wait := interval
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		at, err := f.push(ctx, pushed)
		// failing before the count, so that a reader who sees the count
		// sees the state too (helper-107).
		if was := f.failing.Swap(err != nil); err != nil {
			f.failures.Add(1)
		} else if was {
			// Said, so that whoever saw the failures sees them end
			// (helper-106).
			f.Log.Info("registry sync: pushes reach the peer again", "peer", f.Peer.URI, "addr", f.Peer.Addr)
		}
		pushed = at // after an error, the pages the peer took
		wait = syncWait(interval, wait, err != nil)
		if err != nil {
			f.Log.Warn("registry sync: the push failed; will retry", "peer", f.Peer.URI, "addr", f.Peer.Addr, "in", wait, "err", err)
		}
		t.Reset(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
}

// push sends what changed after seq and returns the position the peer
// has everything up to: after an error, the end of the last page it took.
// It reads the changes a page at a time (syncPageEntries), one Runner.View
// each, and the deadline is a page's: the first push after a start
// sends the whole registry, which under one View held up every reply of
// the node for as long as reading a million entries takes, and under one
// 10-second deadline could never finish (helper-98).
func (f *Federation) push(ctx context.Context, seq uint64) (uint64, error) {
	var c *Client
	var open atomic.Pointer[Client] // c, for the stop below
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	// A stop closes the connection: a peer that never answers held the
	// node's shutdown for the whole timeout.
	defer context.AfterFunc(ctx, func() {
		if c := open.Load(); c != nil {
			c.Close()
		}
	})()
	for {
		var entries []projections.SyncEntry
		var at, through uint64
		f.Runner.View(func(applied uint64) { at = applied; entries, through = f.Registry.ChangedPage(seq, syncPageEntries) })
		if len(entries) == 0 {
			return at, nil
		}
		if c == nil {
			var err error
			if c, err = f.dial(ctx); err != nil {
				return seq, err
			}
			open.Store(c)
			if ctx.Err() != nil { // stopped while dialing: the stop found none to close
				return seq, ctx.Err()
			}
		}
		c.Conn().SetDeadline(time.Now().Add(syncDialTimeout))
		if err := f.send(c, entries); err != nil {
			return seq, err
		}
		if through == 0 {
			return at, nil
		}
		seq = through
	}
}

// dial connects to the peer within syncDialTimeout.
func (f *Federation) dial(ctx context.Context) (*Client, error) {
	ctx, cancel := context.WithTimeout(ctx, syncDialTimeout)
	defer cancel()
	return f.Peer.dial(ctx)
}

// send pushes one page of entries on c and waits for the peer's
// registry.ack of each frame.
func (f *Federation) send(c *Client, entries []projections.SyncEntry) error {
	frames := 0
	for _, part := range f.pack(entries) {
		fr, err := f.frame(part)
		if err != nil {
			return err
		}
		if err := c.WriteFrame(fr); err != nil {
			return err
		}
		frames++
	}
	if err := c.Flush(); err != nil {
		return err
	}
	for range frames {
		r, err := c.ReadReply()
		if err != nil {
			return err
		}
		// Only the peer's registry.ack takes the entries: an ack of a
		// plain record (a peer by another name, which stores the frame
		// and merges nothing) counted as a push, and the entries were
		// never sent again (helper-68).
		if r.Type() == "error" {
			if strings.HasPrefix(r.Value(protocol.HeaderStatus), fmt.Sprintf("%d ", protocol.StatusTooLarge)) && f.entriesBound() > syncEntriesMin {
				f.entriesMax = max(f.entriesBound()/2, syncEntriesMin)
				return fmt.Errorf("the peer refused the sync as too large (its --body-max is smaller); the next push sends bodies of at most %d bytes of entries: %s", f.entriesMax, r.Body)
			}
			return fmt.Errorf("the peer refused the sync: %s", r.Body)
		}
		if from, err := protocol.ParseURI(r.From()); r.Type() != protocol.TypeRegistryAck || err != nil || from.String() != f.Peer.URI {
			return fmt.Errorf("the peer answered the sync with %s from %s, not a registry.ack from %s (is %s the peer's --name?): %s",
				r.Type(), r.From(), f.Peer.URI, f.Peer.URI, r.Body)
		}
	}
	return nil
}

// pack encodes the entries and groups them into the bodies of
// registry.sync frames of at most syncEntriesPerFrame entries and
// syncBodyMax bytes. Packing by count alone made one entry with a long
// status (JSON writes '<' as six bytes) a body every peer refused, and the
// push retried that same body for ever, so no later change reached the
// peer. An entry too large for a body of its own is left out, and said so:
// the peer cannot take it.
func (f *Federation) pack(entries []projections.SyncEntry) [][][]byte {
	var parts [][][]byte
	var part [][]byte
	size, bound := 0, f.entriesBound()
	for _, e := range entries {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(e); err != nil {
			f.Log.Warn("registry sync: an entry does not encode; left out", "peer", f.Peer.URI, "agent", e.AgentURI.String(), "err", err)
			continue
		}
		raw := bytes.TrimRight(buf.Bytes(), "\n")
		if len(raw) > bound {
			f.skipped.Add(1)
			f.Log.Warn("registry sync: an entry is too large for a registry.sync; left out", "peer", f.Peer.URI, "agent", e.AgentURI.String(), "bytes", len(raw), "max", bound)
			continue
		}
		if len(part) > 0 && (len(part) == syncEntriesPerFrame || size+len(raw)+1 > bound) {
			parts, part, size = append(parts, part), nil, 0
		}
		part = append(part, raw)
		size += len(raw) + 1
	}
	if len(part) > 0 {
		parts = append(parts, part)
	}
	return parts
}

// syncBodySlack is room in a registry.sync body for what surrounds the
// entries: the member names, the timestamp and the signature.
const syncBodySlack = 1 << 10 // bytes

// frame builds a signed registry.sync of the entries, each already
// encoded.
func (f *Federation) frame(entries [][]byte) (*protocol.Frame, error) {
	body := append([]byte(nil), `{"entries":[`...)
	body = append(body, bytes.Join(entries, []byte(","))...)
	body = append(body, `],"timestamp":"`...)
	body = time.Now().UTC().AppendFormat(body, time.RFC3339)
	body = append(body, `"}`...)
	fr := &protocol.Frame{Transport: protocol.TransportTCP, Body: body, Headers: []protocol.Header{
		{Name: protocol.HeaderFrom, Value: f.NodeURI},
		{Name: protocol.HeaderTo, Value: f.Peer.URI},
		{Name: protocol.HeaderType, Value: protocol.TypeRegistrySync},
		{Name: protocol.HeaderID, Value: ulid.Make().String()},
		{Name: protocol.HeaderContentType, Value: "application/json"},
	}}
	return fr, protocol.SignFrame(f.Key, fr)
}
