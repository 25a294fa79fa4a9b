package bridge

import (
	"context"
	"crypto"
	"encoding/json"
	"fmt"
	"log/slog"
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
	// syncEntriesPerFrame keeps one registry.sync well under the peer's
	// default body limit (an entry is about 200 bytes).
	syncEntriesPerFrame = 1000 // entries
	// syncDialTimeout bounds one push attempt's connection and replies.
	syncDialTimeout = 10 * time.Second
)

// Peer is a registry this node pushes its registry to: its URI (the TO of
// the registry.sync frames) and its AGLX TCP address.
type Peer struct {
	URI  string
	Addr string
}

// ParsePeer reads "registry://backup.local@HOST:PORT".
func ParsePeer(s string) (Peer, error) {
	uri, addr, ok := strings.Cut(s, "@")
	if !ok || addr == "" {
		return Peer{}, fmt.Errorf("%q: want registry://NAME@HOST:PORT", s)
	}
	u, err := protocol.ParseURI(uri)
	if err != nil {
		return Peer{}, err
	}
	if u.Scheme != protocol.SchemeRegistry {
		return Peer{}, fmt.Errorf("%q: a peer must be a registry:// URI", s)
	}
	return Peer{URI: u.String(), Addr: addr}, nil
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
}

// Failures counts the pushes that did not reach the peer.
func (f *Federation) Failures() int64 { return f.failures.Load() }

// Run pushes until ctx ends.
func (f *Federation) Run(ctx context.Context) {
	interval := f.Interval
	if interval <= 0 {
		interval = SyncIntervalDefault
	}
	var pushed uint64 // the applied sequence the peer has everything up to
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		at, err := f.push(ctx, pushed)
		if err != nil {
			f.failures.Add(1)
			f.Log.Warn("registry sync: peer not reached; will retry", "peer", f.Peer.URI, "addr", f.Peer.Addr, "err", err)
		} else {
			pushed = at
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
}

// push sends what changed after seq and returns the position it covered.
func (f *Federation) push(ctx context.Context, seq uint64) (uint64, error) {
	var entries []projections.SyncEntry
	var at uint64
	f.Runner.View(func(applied uint64) { at, entries = applied, f.Registry.Changed(seq) })
	if len(entries) == 0 {
		return at, nil
	}
	ctx, cancel := context.WithTimeout(ctx, syncDialTimeout)
	defer cancel()
	c, err := Dial(ctx, f.Peer.Addr)
	if err != nil {
		return seq, err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.Conn().SetDeadline(dl)
	}
	frames := 0
	for len(entries) > 0 {
		n := min(len(entries), syncEntriesPerFrame)
		fr, err := f.frame(entries[:n])
		if err != nil {
			return seq, err
		}
		if err := c.WriteFrame(fr); err != nil {
			return seq, err
		}
		entries = entries[n:]
		frames++
	}
	if err := c.Flush(); err != nil {
		return seq, err
	}
	for range frames {
		r, err := c.ReadReply()
		if err != nil {
			return seq, err
		}
		if r.Type() == "error" {
			return seq, fmt.Errorf("the peer refused the sync: %s", r.Body)
		}
	}
	return at, nil
}

func (f *Federation) frame(entries []projections.SyncEntry) (*protocol.Frame, error) {
	body, err := json.Marshal(struct {
		Entries   []projections.SyncEntry `json:"entries"`
		Timestamp string                  `json:"timestamp"`
	}{entries, time.Now().UTC().Format(time.RFC3339)})
	if err != nil {
		return nil, err
	}
	fr := &protocol.Frame{Transport: protocol.TransportTCP, Body: body, Headers: []protocol.Header{
		{Name: protocol.HeaderFrom, Value: f.NodeURI},
		{Name: protocol.HeaderTo, Value: f.Peer.URI},
		{Name: protocol.HeaderType, Value: protocol.TypeRegistrySync},
		{Name: protocol.HeaderID, Value: ulid.Make().String()},
		{Name: protocol.HeaderContentType, Value: "application/json"},
	}}
	return fr, protocol.SignFrame(f.Key, fr)
}
