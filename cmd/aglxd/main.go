// Command aglxd runs an AGLX ledger node: an embedded NATS JetStream server
// holding the event log, the AGLX bridge on TCP and UDP, the projections,
// and a small HTTP API. It only wires the packages together.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/aglx/ledger/bridge"
)

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		if errors.Is(err, errVersion) {
			fmt.Println("aglxd", bridge.Version())
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "aglxd:", err)
		os.Exit(2)
	}
	lg := newLogger(cfg.LogLevel, cfg.LogFormat)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	m := NewMain(cfg, lg)
	if cfg.PrepareStateFrom != "" {
		// Not Run, nor Close: the data dir, its lock and its records are
		// the running node's.
		lg.Info("aglxd preparing the fold state", "version", bridge.Version())
		if err := m.prepareState(ctx); err != nil {
			lg.Error("preparing the fold state failed", "err", err)
			os.Exit(1)
		}
		return
	}
	if cfg.RotateNodeKey {
		err := m.Run(ctx)
		if cerr := m.Close(context.Background()); cerr != nil {
			// Everything the rotation changed is durable by now, and a
			// run again would be a second rotation: said, not failed.
			lg.Warn("stopping after the rotation", "err", cerr)
		}
		switch {
		case errors.Is(err, errPeersLeft):
			lg.Warn("node key rotation", "err", err)
			os.Exit(exitPeersLeft)
		case err != nil:
			lg.Error("node key rotation failed", "err", err)
			os.Exit(1)
		}
		return
	}
	if err := m.Run(ctx); err != nil {
		m.Close(context.Background())
		if ctx.Err() != nil {
			// SIGINT or SIGTERM while starting: a stop, not a failure.
			lg.Info("stopped while starting", "err", err)
			return
		}
		lg.Error("start failed", "err", err)
		os.Exit(1)
	}
	<-ctx.Done()
	// A second signal during the stop ends the process at once, as the
	// signal's default would, but says so first: it used to die with 143
	// and no line after "shutting down" (OPERATIONS.md, "Stopping").
	again := make(chan os.Signal, 1)
	signal.Notify(again, os.Interrupt, syscall.SIGTERM)
	stop()
	go stopAtOnce(lg, again)
	lg.Info("shutting down: no new connections; finishing the replies in flight")
	closeCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := m.Close(closeCtx); err != nil {
		lg.Error("shutdown", "err", err)
		os.Exit(1)
	}
	lg.Info("stopped")
}

// stopAtOnce waits for a second SIGINT or SIGTERM during the stop, logs
// what ending now leaves undone, and ends the process by the signal's
// default action, so that a supervisor sees the same death by signal as
// before (systemd counts SIGTERM and SIGINT as a clean stop and does not
// restart the node for it). Where a process cannot signal itself
// (Windows) it exits 1.
func stopAtOnce(lg *slog.Logger, again <-chan os.Signal) {
	sig := <-again
	lg.Warn("a second signal: stopping at once; frames read but not yet answered get no reply (each may or may not be stored: their senders resend with the same ID), and everything acknowledged is on disk; the next start repairs the event stream from the write-ahead stream", "signal", sig.String())
	signal.Reset(os.Interrupt, syscall.SIGTERM)
	if self, err := os.FindProcess(os.Getpid()); err == nil && self.Signal(sig) == nil {
		select {} // the signal's default action ends the process
	}
	os.Exit(1)
}

// shutdownTimeout bounds the wait for in-flight replies on SIGINT/SIGTERM.
const shutdownTimeout = 30 * time.Second

func newLogger(level, format string) *slog.Logger {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		lv = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: lv}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}
