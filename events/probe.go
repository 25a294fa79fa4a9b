package events

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// RawResult is what a raw JetStream publish run measured.
type RawResult struct {
	Msgs     int
	Elapsed  time.Duration
	PerSec   float64
	P50, P99 time.Duration
}

// ProbeRaw measures plain JetStream async publishes of size-byte messages
// to a fresh file stream, window at a time in flight: the ceiling the log
// is compared with. Latency runs from publish to acknowledgement.
func ProbeRaw(ctx context.Context, nc *nats.Conn, msgs, size, window int) (RawResult, error) {
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(window+1))
	if err != nil {
		return RawResult{}, err
	}
	const name = "AGLX_PROBE"
	_ = js.DeleteStream(ctx, name)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{"aglx.probe.>"}, Storage: jetstream.FileStorage}); err != nil {
		return RawResult{}, fmt.Errorf("probe stream: %w", err)
	}
	defer js.DeleteStream(context.Background(), name)
	payload := make([]byte, size)
	type inflight struct {
		at  time.Time
		fut jetstream.PubAckFuture
	}
	fifo := make([]inflight, 0, window)
	lat := make([]time.Duration, 0, msgs)
	reap := func() error {
		f := fifo[0]
		fifo = fifo[1:]
		select {
		case <-f.fut.Ok():
			lat = append(lat, time.Since(f.at))
			return nil
		case err := <-f.fut.Err():
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	start := time.Now()
	for i := 0; i < msgs; i++ {
		if len(fifo) == window {
			if err := reap(); err != nil {
				return RawResult{}, err
			}
		}
		fut, err := js.PublishAsync(fmt.Sprintf("aglx.probe.%d", i%100), payload)
		if err != nil {
			return RawResult{}, err
		}
		fifo = append(fifo, inflight{time.Now(), fut})
	}
	for len(fifo) > 0 {
		if err := reap(); err != nil {
			return RawResult{}, err
		}
	}
	r := RawResult{Msgs: msgs, Elapsed: time.Since(start)}
	r.PerSec = float64(msgs) / r.Elapsed.Seconds()
	slices.Sort(lat)
	r.P50, r.P99 = lat[len(lat)/2], lat[len(lat)*99/100]
	return r, nil
}
