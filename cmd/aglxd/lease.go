package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"time"

	"github.com/aglx/ledger/events"
	"github.com/nats-io/nats.go/jetstream"
)

// takeLease takes the writer's lease on an operator's NATS, where the data
// dir's lock keeps out only nodes on this machine (events.AcquireLease).
func (m *Main) takeLease(ctx context.Context) error {
	js, err := jetstream.New(m.nc)
	if err != nil {
		return err
	}
	host, _ := os.Hostname()
	holder := events.LeaseHolder{Node: m.cfg.Name, Host: host, PID: os.Getpid(), Run: rand.Text(), Since: time.Now().UTC()}
	lease, err := events.AcquireLease(ctx, js, m.cfg.Replicas, m.cfg.leaseTTL, holder, m.lg)
	if err != nil {
		return fmt.Errorf("--nats-url %s: %w", redactURLs(m.cfg.NATSURL), err)
	}
	m.lease = lease
	m.lg.Info("writer's lease taken", "bucket", events.LeaseBucket, "run", holder.Run)
	return nil
}
