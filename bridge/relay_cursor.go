package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/aglx/ledger/events"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const (
	// RelayCursorBucket is the JetStream key-value bucket that keeps the
	// relay's position next to the log it follows, so a restored JetStream
	// store restores it too.
	RelayCursorBucket = "AGLX_RELAY"
	relayCursorKey    = "cursor"
	// relayCursorSettleMax bounds how long the relay waits for a new
	// cursor bucket to answer its first read.
	relayCursorSettleMax = 30 * time.Second
	// relayCursorSaveInterval bounds how often the cursor is written. A
	// crash loses at most this much progress: the messages after the last
	// saved cursor are delivered again, which at-least-once allows.
	relayCursorSaveInterval = time.Second
	// relayCursorFailLogEvery is how often a save that keeps failing is
	// logged again.
	relayCursorFailLogEvery = time.Minute
	// legacyRelayConsumer is the durable consumer through which earlier
	// versions followed the log. Its acknowledged floor seeds the cursor
	// once; then it is deleted, so the server stops keeping it up to date.
	legacyRelayConsumer = events.LegacyRelayConsumer
	relayCursorTimeout  = 5 * time.Second
)

// relayCursor is the relay's persistent position: every message at or
// below saved is settled but those in pending, which were waiting for a
// retry or in a lane when it was written.
//
// Until 2026-12-01 the cursor was one number, held back by the oldest
// message still being retried: a message's retries last about half an
// hour, so after any restart, even a clean one, every message relayed
// since that one was delivered again, to every addressee, and an agent
// that registered a dead address could keep that window open. Now the
// messages still owed are named with their attempts, and a restart
// retries those alone.
type relayCursor struct {
	kv      jetstream.KeyValue
	saved   uint64
	pending []pendingRetry
	// record is the value last written or read, so that an unchanged
	// position is not written again.
	record string
}

// pendingRetry is a message the relay still owes its addressee, as kept
// in the cursor record.
type pendingRetry struct {
	Seq uint64 `json:"seq"`
	// EventID is the event's id, checked against the stream's at restore:
	// a store restored from copies of different times may hold another
	// event at that sequence, which must not be delivered in its place.
	EventID  string `json:"event_id,omitempty"`
	Attempts int    `json:"attempts"`
	// Due is when its next attempt is due; a restart keeps the back-off.
	Due time.Time `json:"due"`
	// Addr is the address its last attempt failed at, "" if none did.
	Addr string `json:"addr,omitempty"`
}

// cursorRecord is the cursor's value when messages are pending. With none
// pending the value is the bare sequence, as every earlier version wrote
// it.
type cursorRecord struct {
	Cursor  uint64         `json:"cursor"`
	Pending []pendingRetry `json:"pending"`
}

// encodeCursor is the value that records cursor and pending.
func encodeCursor(cursor uint64, pending []pendingRetry) string {
	if len(pending) == 0 {
		return strconv.FormatUint(cursor, 10)
	}
	b, _ := json.Marshal(cursorRecord{Cursor: cursor, Pending: pending}) // cannot fail: plain fields
	return string(b)
}

// decodeCursor reads a value encodeCursor wrote, or a bare sequence. A
// record naming more messages than the relay can hold, or messages past
// its cursor, was not written by this code and is refused.
func decodeCursor(v []byte) (uint64, []pendingRetry, error) {
	if len(v) == 0 || v[0] != '{' {
		seq, err := strconv.ParseUint(string(v), 10, 64)
		if err != nil {
			return 0, nil, fmt.Errorf("relay: cursor %q: %w", v, err)
		}
		return seq, nil, nil
	}
	var rec cursorRecord
	if err := json.Unmarshal(v, &rec); err != nil {
		return 0, nil, fmt.Errorf("relay: cursor record: %w", err)
	}
	if len(rec.Pending) > relayPendingMax {
		return 0, nil, fmt.Errorf("relay: cursor record names %d pending messages; at most %d can be", len(rec.Pending), relayPendingMax)
	}
	for _, p := range rec.Pending {
		if p.Seq == 0 || p.Seq > rec.Cursor || p.Attempts < 0 || p.Attempts >= RelayAttemptsMax {
			return 0, nil, fmt.Errorf("relay: cursor record: pending message %d (attempts %d) does not fit cursor %d", p.Seq, p.Attempts, rec.Cursor)
		}
	}
	return rec.Cursor, rec.Pending, nil
}

// openRelayCursor reads the saved cursor. A relay that never ran starts at
// the end of the log: it delivers what is recorded from now on, not the
// history.
func openRelayCursor(ctx context.Context, log *events.Log, lg *slog.Logger) (*relayCursor, error) {
	js := log.JetStream()
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      RelayCursorBucket,
		Description: "AGLX relay: the sequence of the event stream up to which every message is settled",
		History:     1,
		Replicas:    log.Replicas(),
	})
	if err != nil {
		return nil, fmt.Errorf("relay: cursor bucket: %w", err)
	}
	c := &relayCursor{kv: kv}
	// A bucket just created on a cluster may not answer at once: its
	// stream's leader is still being chosen, and the read finds no
	// responders. That passes within moments; any other error is final.
	e, err := kv.Get(ctx, relayCursorKey)
	settle := time.Now().Add(relayCursorSettleMax)
	for wait := 10 * time.Millisecond; errors.Is(err, nats.ErrNoResponders) && ctx.Err() == nil && time.Now().Before(settle); wait = min(2*wait, time.Second) {
		select {
		case <-time.After(wait):
		case <-ctx.Done():
		}
		e, err = kv.Get(ctx, relayCursorKey)
	}
	switch {
	case err == nil:
		if c.saved, c.pending, err = decodeCursor(e.Value()); err != nil {
			return nil, err
		}
		c.record = string(e.Value())
		// A bucket newer than the event stream (a store put back from
		// copies of different times, or the stream made again on an
		// operator's NATS) names a cursor past the stream's end: started
		// there, the relay would pass over every message recorded up to
		// it, answered 202 and never delivered (helper-82). It starts at
		// the end instead; what it owed past there is gone with the events.
		end, err := log.LastSeq(ctx)
		if err != nil {
			return nil, fmt.Errorf("relay: where the event stream ends: %w", err)
		}
		if c.saved > end {
			lg.Warn("relay: the saved cursor is past the event stream's end; starting at the end, and the messages it owed past there are not delivered",
				"cursor", c.saved, "stream_end", end)
			c.saved = end
			c.pending = slices.DeleteFunc(c.pending, func(p pendingRetry) bool { return p.Seq > end })
		}
		return c, nil
	case !errors.Is(err, jetstream.ErrKeyNotFound):
		return nil, fmt.Errorf("relay: cursor: %w", err)
	}
	start := log.Published()
	legacy := false
	if cons, err := js.Consumer(ctx, log.Stream(), legacyRelayConsumer); err == nil {
		if info, err := cons.Info(ctx); err == nil {
			start, legacy = info.AckFloor.Stream, true
			lg.Info("relay: taking over the position of the former relay consumer", "seq", start)
		}
		if err := js.DeleteConsumer(ctx, log.Stream(), legacyRelayConsumer); err != nil {
			lg.Warn("relay: deleting the former relay consumer", "err", err)
		}
	}
	if !legacy && start > 0 {
		// A first start on an existing log, or a store restored without
		// its KV_AGLX_RELAY stream: either way, what was recorded before
		// is not delivered, and an operator should hear it (helper-61).
		lg.Warn("relay: no saved cursor; starting at the log's end: messages recorded before it are not delivered (a backup must keep KV_AGLX_RELAY with the streams)", "seq", start)
	}
	if err := c.save(start, nil); err != nil {
		return nil, err
	}
	return c, nil
}

// save writes seq as the cursor, with the messages below it still owed.
func (c *relayCursor) save(seq uint64, pending []pendingRetry) error {
	rec := encodeCursor(seq, pending)
	if rec == c.record {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), relayCursorTimeout)
	defer cancel()
	if _, err := c.kv.Put(ctx, relayCursorKey, []byte(rec)); err != nil {
		return fmt.Errorf("relay: saving the cursor: %w", err)
	}
	c.saved, c.pending, c.record = seq, pending, rec
	return nil
}
