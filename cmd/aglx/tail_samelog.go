package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/aglx/ledger/events"
	"github.com/nats-io/nats.go"
)

// errAnotherLog ends a read whose address came back serving another log.
var errAnotherLog = errors.New("the log changed")

// logCheckWait bounds how long, after a reconnection, tail asks whether
// the stream is still the one it read (JetStream may take a moment to be
// back after its server), and logCheckEvery how often it asks meanwhile.
const (
	logCheckWait  = 30 * time.Second
	logCheckEvery = 100 * time.Millisecond
)

// logRecheckEvery is how often tail asks anyway, connected all along: on
// an operator's NATS the stream may be deleted and made again while the
// server stays up, and the read's consumer then goes on in the new stream
// from the old one's sequence with no reconnection to tell. Events of the
// new stream printed meanwhile are at most this old when tail ends.
const logRecheckEvery = 10 * time.Second

// sameLog checks, once after each reconnection, that the stream behind
// the address was made when the one the read began on was: a node
// started on another store behind the same port has another. The read
// resumes by sequence, so it would otherwise wait in silence until the
// new log passed the old one's end, and then print another log's events
// as if they followed on. It checks at once when the connection is back
// (watch), so that a new log shorter than the old one is noticed, and
// again before each event it prints (check), so that none from the new
// log is printed before the answer.
type sameLog struct {
	nc      *nats.Conn
	lg      *events.Log
	url     string
	created time.Time

	mu      sync.Mutex
	checked uint64 // the connection's reconnections checked so far
}

// watch checks after each reconnection, and every logRecheckEvery, and
// ends the read, through stop, on another log.
func (s *sameLog) watch(ctx context.Context, reconnected <-chan struct{}, stop context.CancelCauseFunc) {
	tick := time.NewTicker(logRecheckEvery)
	defer tick.Stop()
	for {
		var err error
		select {
		case <-ctx.Done():
			return
		case <-reconnected:
			err = s.check(ctx)
		case <-tick.C:
			err = s.recheck(ctx)
		}
		if errors.Is(err, errAnotherLog) {
			stop(err)
			return
		}
	}
}

// recheck asks once, with the connection up, whether the stream is the
// one read so far. No answer is no news: an outage is check's to handle.
func (s *sameLog) recheck(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, logCheckWait)
	defer cancel()
	now, err := s.lg.Created(ctx)
	if err != nil || now.Equal(s.created) {
		return nil
	}
	return s.another(now)
}

// another says that the stream made at now is not the one read so far.
func (s *sameLog) another(now time.Time) error {
	return fmt.Errorf("%w: the node at %s now serves a log made at %s, not the one read so far (made at %s), and this read would go on from the old one's sequence; start aglx tail again to read the new one (--seq or --since pick where)",
		errAnotherLog, s.url, now.UTC().Format(time.RFC3339Nano), s.created.UTC().Format(time.RFC3339Nano))
}

// check returns errAnotherLog if the connection came back since the last
// check and the stream behind it is not the one read so far. A question
// that gets no answer within logCheckWait is reported and read past.
func (s *sameLog) check(ctx context.Context) error {
	n := s.nc.Stats().Reconnects
	s.mu.Lock()
	defer s.mu.Unlock()
	if n == s.checked {
		return nil
	}
	now, err := createdOnceBack(ctx, s.lg)
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		fmt.Fprintf(os.Stderr, "aglx tail: could not check that %s still serves the log read so far (%v); reading on\n", s.url, err)
	case !now.Equal(s.created):
		return s.another(now)
	}
	s.checked = n
	return nil
}

// createdOnceBack asks when the stream was made until it gets an answer or
// logCheckWait passes.
func createdOnceBack(ctx context.Context, lg *events.Log) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, logCheckWait)
	defer cancel()
	for {
		at, err := lg.Created(ctx)
		if err == nil {
			return at, nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, err
		case <-time.After(logCheckEvery):
		}
	}
}
