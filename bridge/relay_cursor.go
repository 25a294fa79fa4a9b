package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	// legacyRelayConsumer is the durable consumer through which earlier
	// versions followed the log. Its acknowledged floor seeds the cursor
	// once; then it is deleted, so the server stops keeping it up to date.
	legacyRelayConsumer = events.LegacyRelayConsumer
	relayCursorTimeout  = 5 * time.Second
)

// relayCursor is the relay's persistent position: every message at or
// below it is settled.
type relayCursor struct {
	kv    jetstream.KeyValue
	saved uint64
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
		if c.saved, err = strconv.ParseUint(string(e.Value()), 10, 64); err != nil {
			return nil, fmt.Errorf("relay: cursor %q: %w", e.Value(), err)
		}
		return c, nil
	case !errors.Is(err, jetstream.ErrKeyNotFound):
		return nil, fmt.Errorf("relay: cursor: %w", err)
	}
	start := log.Published()
	if cons, err := js.Consumer(ctx, log.Stream(), legacyRelayConsumer); err == nil {
		if info, err := cons.Info(ctx); err == nil {
			start = info.AckFloor.Stream
			lg.Info("relay: taking over the position of the former relay consumer", "seq", start)
		}
		if err := js.DeleteConsumer(ctx, log.Stream(), legacyRelayConsumer); err != nil {
			lg.Warn("relay: deleting the former relay consumer", "err", err)
		}
	}
	if err := c.save(start); err != nil {
		return nil, err
	}
	return c, nil
}

// save writes seq as the cursor.
func (c *relayCursor) save(seq uint64) error {
	ctx, cancel := context.WithTimeout(context.Background(), relayCursorTimeout)
	defer cancel()
	if _, err := c.kv.Put(ctx, relayCursorKey, strconv.AppendUint(nil, seq, 10)); err != nil {
		return fmt.Errorf("relay: saving the cursor: %w", err)
	}
	c.saved = seq
	return nil
}
