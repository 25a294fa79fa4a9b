package events

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/aglx/ledger/protocol"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Who owns a log. The node's own messages in it (mints, adjustments,
// registry entries, its key rotations) are made under its name and key,
// and the folds check them against the owner as configured; the event
// stream's metadata records that owner, so that a node started on the
// store under another name or key is refused before its replay voids
// every earlier mint. The write-ahead stream keeps a copy, for an event
// stream rebuilt from it.

// MetaOwner is the event stream's metadata key for Config.Owner.
const MetaOwner = "aglx_owner"

// MetaTakenFrom keeps the owner the last take-over replaced (Config.
// TakeOver), so that an auditor can learn why that owner's mints no longer
// count.
const MetaTakenFrom = "aglx_taken_from"

// MetaNodeFirstKey is the event stream's metadata key for the public key
// (base64 DER SPKI, protocol.MarshalPublicKey) the owner's first messages
// in the log were signed with, kept from the owner's first key rotation
// on: the folds check the node's own messages against that key and follow
// the rotations in the log from it (projections.RegistryConfig.
// NodeFirstKey). Without it the first key is the owner's current one,
// which is right for a log whose owner never rotated. A take-over drops
// it: the new owner's key is the first that counts.
const MetaNodeFirstKey = "aglx_node_first_key"

// ErrOtherOwner is Open's refusal of a log that another owner wrote.
var ErrOtherOwner = errors.New("events: the log is another node's")

// OtherOwnerError is that refusal with the owners it names, for a caller
// that advises on them (aglxd names an old key kept beside its key file
// that is the recorded owner). errors.Is(err, ErrOtherOwner) holds.
type OtherOwnerError struct {
	Stream string
	Was    string // the owner the log records
	Owner  string // the one that was refused
}

func (e *OtherOwnerError) Error() string {
	return fmt.Sprintf("%v: stream %s was written by %q, and this is %q: a node's own mints and registry entries are void on replay under another name or key. Start it as the node that wrote it, give another node a store of its own, or take the store over knowing that (docs/OPERATIONS.md)", ErrOtherOwner, e.Stream, e.Was, e.Owner)
}

// Is makes errors.Is(err, ErrOtherOwner) hold.
func (e *OtherOwnerError) Is(target error) bool { return target == ErrOtherOwner }

// CheckOwner refuses, with ErrOtherOwner, an event stream that another
// owner than cfg.Owner wrote, as Open would, but changes nothing: the node
// asks before it keeps a key it made at this start.
func CheckOwner(ctx context.Context, nc *nats.Conn, cfg Config) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("events: jetstream: %w", err)
	}
	_, _, err = checkExisting(ctx, js, cfg.withDefaults())
	return err
}

// checkExisting checks an existing event stream against cfg (its replicas
// and its owner) and returns the metadata to keep on it: the stream's
// own, with cfg.Owner added where it had none. takenFrom is the owner that
// cfg.TakeOver replaces, for the caller to log, or "".
func checkExisting(ctx context.Context, js jetstream.JetStream, cfg Config) (meta map[string]string, takenFrom string, err error) {
	meta = map[string]string{}
	s, err := js.Stream(ctx, cfg.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		// A new log, or an event stream moved aside to be rebuilt from
		// the write-ahead stream (ErrDamaged), which keeps the owner too:
		// without it the rebuild took any owner, and the guard was gone
		// just when an operator was repairing the store (helper-55).
		w, err := js.Stream(ctx, cfg.walStream())
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
		case err != nil:
			return nil, "", fmt.Errorf("events: stream %s: %w", cfg.walStream(), err)
		default:
			maps.Copy(meta, walMeta(w.CachedInfo().Config.Metadata))
		}
		return owned(meta, cfg)
	}
	if err != nil {
		return nil, "", fmt.Errorf("events: stream %s: %w", cfg.Stream, err)
	}
	info := s.CachedInfo()
	if err := checkReplicas(info, cfg); err != nil {
		return nil, "", err
	}
	for k, v := range info.Config.Metadata {
		if !strings.HasPrefix(k, "_nats.") { // the server's own, which it sets
			meta[k] = v
		}
	}
	return owned(meta, cfg)
}

// owned checks the owner recorded in meta against cfg.Owner and records
// cfg.Owner there, or refuses with ErrOtherOwner.
func owned(meta map[string]string, cfg Config) (_ map[string]string, takenFrom string, _ error) {
	switch was := meta[MetaOwner]; {
	case cfg.Owner == "":
	case was == "" || was == cfg.Owner:
		meta[MetaOwner] = cfg.Owner
	case cfg.TakeOver:
		// Recorded by RecordTakeOver, not here: the caller checks first
		// that its key fits the log, and a take-over recorded before a
		// refusal had dropped the first key for good.
		takenFrom = was
	default:
		return nil, "", &OtherOwnerError{Stream: cfg.Stream, Was: was, Owner: cfg.Owner}
	}
	return meta, takenFrom, nil
}

// walMeta is the part of the event stream's metadata the write-ahead
// stream keeps a copy of: what a rebuilt event stream needs to be
// recognised as its owner's, and whom a take-over replaced, for an
// auditor.
func walMeta(meta map[string]string) map[string]string {
	out := map[string]string{}
	for _, k := range []string{MetaOwner, MetaNodeFirstKey, MetaTakenFrom} {
		if v := meta[k]; v != "" {
			out[k] = v
		}
	}
	return out
}

// TakeOverPending is the owner a take-over (Config.TakeOver) replaces,
// once Open found the log another owner's, until RecordTakeOver records
// it; "" when there is none to record.
func (l *Log) TakeOverPending() string {
	l.metaMu.Lock()
	defer l.metaMu.Unlock()
	return l.takeOver
}

// RecordTakeOver records the take-over Open found pending on both
// streams: Config.Owner becomes the owner, the owner it replaces is kept
// as MetaTakenFrom, and the first node key is dropped (the new owner's
// key is the first that counts). The caller records it only once it has
// checked that its key fits the log from there.
func (l *Log) RecordTakeOver(ctx context.Context) error {
	was := l.TakeOverPending()
	if was == "" {
		return nil
	}
	l.lg.Warn("taking the store over from another owner (--take-over-store): that owner's own mints and registry entries are void on replay",
		"stream", l.cfg.Stream, "previous_owner", was, "owner", l.cfg.Owner)
	err := l.updateMeta(ctx, func(meta map[string]string) {
		meta[MetaOwner], meta[MetaTakenFrom] = l.cfg.Owner, was
		delete(meta, MetaNodeFirstKey)
	})
	if err != nil {
		return err
	}
	l.metaMu.Lock()
	l.takeOver = ""
	l.metaMu.Unlock()
	return nil
}

// NodeFirstKey is the node's first key as the log's metadata records it
// (MetaNodeFirstKey), or nil when none is: a node that never rotated, whose
// first key is its current one.
func (l *Log) NodeFirstKey() (crypto.PublicKey, error) {
	text := l.Meta(MetaNodeFirstKey)
	if text == "" {
		return nil, nil
	}
	pub, err := protocol.ParsePublicKey(text)
	if err != nil {
		return nil, fmt.Errorf("events: the event stream's metadata %s does not hold a public key: %w", MetaNodeFirstKey, err)
	}
	return pub, nil
}

// Meta returns the event stream's metadata value for key as the log last
// read or wrote it (Open, Attach, SetOwner), or "".
func (l *Log) Meta(key string) string {
	l.metaMu.Lock()
	defer l.metaMu.Unlock()
	return l.meta[key]
}

// SetOwner records owner as the log's owner on both streams, and firstKey
// as MetaNodeFirstKey where none is recorded yet (an earlier rotation's
// stands: it names the key the log began with). It is the last step of a
// key rotation, once the rotation's event is durable: until then a start
// under the new key is refused as another owner's. The write-ahead stream
// goes first, so that a crash between the two leaves the event stream
// naming the old owner, which the rotation's next run sets right.
func (l *Log) SetOwner(ctx context.Context, owner, firstKey string) error {
	return l.updateMeta(ctx, func(meta map[string]string) {
		meta[MetaOwner] = owner
		if meta[MetaNodeFirstKey] == "" && firstKey != "" {
			meta[MetaNodeFirstKey] = firstKey
		}
	})
}

// updateMeta changes the metadata of both streams by change, the
// write-ahead stream's first.
func (l *Log) updateMeta(ctx context.Context, change func(meta map[string]string)) error {
	if l.wal == nil {
		return errors.New("events: the owner of a log attached for reading cannot be changed")
	}
	update := func(name string) (jetstream.Stream, error) {
		s, err := l.js.Stream(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("events: stream %s: %w", name, err)
		}
		sc := s.CachedInfo().Config
		meta := maps.Clone(sc.Metadata)
		if meta == nil {
			meta = map[string]string{}
		}
		for k := range meta {
			if strings.HasPrefix(k, "_nats.") { // the server's own, which it sets
				delete(meta, k)
			}
		}
		change(meta)
		if name == l.cfg.walStream() {
			meta = walMeta(meta) // the copy it keeps, as Open writes it
		}
		sc.Metadata = meta
		s, err = l.js.UpdateStream(ctx, sc)
		if err != nil {
			return nil, fmt.Errorf("events: recording the owner on stream %s: %w", name, err)
		}
		return s, nil
	}
	if _, err := update(l.cfg.walStream()); err != nil {
		return err
	}
	s, err := update(l.cfg.Stream)
	if err != nil {
		return err
	}
	l.metaMu.Lock()
	l.meta = maps.Clone(s.CachedInfo().Config.Metadata)
	l.metaMu.Unlock()
	return nil
}

// RecordedOwner returns the owner recorded on the log's streams (the
// event stream's, or the write-ahead stream's when the event stream is
// gone), the last sequence that stream holds, and whether either stream
// exists, creating and changing nothing. A node key rotation asks it before it opens the log: one run
// against the wrong --data or --nats-url would otherwise make empty
// streams there, rotate their "log", and replace the node's real key.
func RecordedOwner(ctx context.Context, nc *nats.Conn, stream string) (owner string, last uint64, exists bool, err error) {
	cfg := Config{Stream: stream}.withDefaults()
	js, err := jetstream.New(nc)
	if err != nil {
		return "", 0, false, fmt.Errorf("events: jetstream: %w", err)
	}
	for _, name := range []string{cfg.Stream, cfg.walStream()} {
		s, err := js.Stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			return "", 0, false, fmt.Errorf("events: stream %s: %w", name, err)
		}
		info := s.CachedInfo()
		return info.Config.Metadata[MetaOwner], info.State.LastSeq, true, nil
	}
	return "", 0, false, nil
}
