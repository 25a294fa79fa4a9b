package events

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"github.com/aglx/ledger/protocol"
	"github.com/nats-io/nats-server/v2/server"
)

// ServerConfig describes the embedded nats-server.
type ServerConfig struct {
	// DataDir holds the JetStream store (in DataDir/jetstream).
	DataDir string
	// Listen is the client address other NATS clients (analytics consumers,
	// `aglx tail`) connect to, host:port. Port 0 picks a free one; "" means
	// no network listener at all (in-process clients only).
	Listen string
	// SyncInterval is how often the store is flushed to disk. Zero means
	// fsync after every write: an acknowledged event survives power loss.
	SyncInterval time.Duration
	// MaxPayload bounds one NATS message; it must hold the largest event.
	MaxPayload int32
}

// EventSyncInterval is how often the event stream, which is written only
// from batches already synced to the write-ahead stream, is flushed to disk.
// The write-ahead stream must hold far more than this much ingest.
const EventSyncInterval = time.Second

// serverReadyTimeout bounds the wait for the embedded server to start.
const serverReadyTimeout = 30 * time.Second

// StartServer starts an embedded nats-server with JetStream. The caller owns
// it and must Shutdown it.
func StartServer(cfg ServerConfig) (*server.Server, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("events: server: no data dir")
	}
	opts := &server.Options{
		ServerName: "aglxd",
		JetStream:  true,
		StoreDir:   filepath.Join(cfg.DataDir, "jetstream"),
		NoSigs:     true,
		MaxPayload: cfg.MaxPayload,
	}
	if opts.MaxPayload <= 0 {
		opts.MaxPayload = protocol.BodySizeMaxLimit + envelopeOverhead
	}
	if cfg.SyncInterval <= 0 {
		opts.SyncAlways = true
		// Streams in asynchronous persist mode (the event stream) ignore
		// SyncAlways and flush on this interval instead.
		opts.SyncInterval = EventSyncInterval
	} else {
		opts.SyncInterval = cfg.SyncInterval
	}
	if cfg.Listen == "" {
		opts.DontListen = true
	} else {
		host, port, err := net.SplitHostPort(cfg.Listen)
		if err != nil {
			return nil, fmt.Errorf("events: server: listen address %q: %w", cfg.Listen, err)
		}
		p, err := strconv.Atoi(port)
		if err != nil {
			return nil, fmt.Errorf("events: server: listen port %q: %w", port, err)
		}
		opts.Host, opts.Port = host, p
		if p == 0 {
			opts.Port = server.RANDOM_PORT
		}
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("events: server: %w", err)
	}
	go s.Start()
	if !s.ReadyForConnections(serverReadyTimeout) {
		s.Shutdown()
		return nil, fmt.Errorf("events: server: not ready after %s (is %s already in use?)", serverReadyTimeout, cfg.Listen)
	}
	return s, nil
}
