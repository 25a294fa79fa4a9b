package main

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"runtime"
	"time"

	"github.com/aglx/ledger/bridge"
	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/projections"
	"github.com/aglx/ledger/protocol"
)

// benchAgents is how many agents the signed run spreads its transfers over.
const benchAgents = 64

// signedFrame builds a frame from its parts and signs it with key.
func signedFrame(key crypto.Signer, from, to, typ, body string) ([]byte, error) {
	f := &protocol.Frame{Transport: protocol.TransportTCP, Body: []byte(body), Headers: []protocol.Header{
		{Name: protocol.HeaderFrom, Value: from}, {Name: protocol.HeaderTo, Value: to}, {Name: protocol.HeaderType, Value: typ},
	}}
	if err := protocol.SignFrame(key, f); err != nil {
		return nil, err
	}
	return protocol.Encode(f), nil
}

// verifyTimes are the signature check's costs, each measured on one core.
type verifyTimes struct {
	ceiling float64       // checks per second on all cores, one at a time: the goal's ceiling
	single  time.Duration // the node's check of one signature, canonical form included
	stdlib  time.Duration // the same with crypto/ed25519's verification, for reference
	batch   time.Duration // per signature, in batches of verifyBatchBench, as the workers check under load
}

// verifyBatchBench is the batch size timed for reference: the validation
// workers' largest.
const verifyBatchBench = 128 // signatures

// verifyCeiling measures the signature check on one core and returns what
// all cores could check per second one at a time: the ceiling the signed
// goal is judged against, as raw JetStream's publish is the ingest goal's
// ceiling though the node groups its writes. It also times, for
// reference, the same steps with crypto/ed25519 (the library the node used
// before curve25519-voi) and the node's check in batches of
// verifyBatchBench of the given frames and keys.
func verifyCeiling(frames [][]byte, keys []crypto.PublicKey) (verifyTimes, error) {
	pub, ok := keys[0].(ed25519.PublicKey)
	if !ok {
		return verifyTimes{}, fmt.Errorf("the bench's keys must be Ed25519, not %T", keys[0])
	}
	checks := make([]protocol.SigCheck, len(frames))
	for i, b := range frames {
		f, err := protocol.NewDecoder(bytes.NewReader(b), protocol.DecoderOptions{}).Decode()
		if err != nil {
			return verifyTimes{}, err
		}
		checks[i] = protocol.SigCheck{Key: keys[i], From: f.From(), To: f.To(), Type: f.Type(), Body: f.Body}
	}
	// Each figure is the fastest of several timed rounds: on a shared
	// machine a neighbour only ever makes a round slower, so the fastest
	// is the nearest to what the check costs, and the ceiling drawn from
	// it the highest, the hardest for the node to reach.
	const rounds, calls = 6, 500
	timed := func(check func() error) (time.Duration, error) {
		best := time.Duration(0)
		for range rounds {
			start := time.Now()
			for range calls {
				if err := check(); err != nil {
					return 0, err
				}
			}
			if d := time.Since(start) / calls; best == 0 || d < best {
				best = d
			}
		}
		return best, nil
	}
	var vt verifyTimes
	var err error
	c := checks[0]
	if vt.single, err = timed(func() error { return protocol.Verify(c.Key, c.From, c.To, c.Type, c.Credits, c.Body) }); err != nil {
		return verifyTimes{}, err
	}
	var input, sig []byte
	prepare, err := timed(func() error {
		text, _, err := protocol.SignatureOf(c.Body)
		if err != nil {
			return err
		}
		if _, sig, err = protocol.ParseSignature(text); err != nil {
			return err
		}
		input, err = protocol.SigningInput(c.From, c.To, c.Type, c.Credits, c.Body)
		return err
	})
	if err != nil {
		return verifyTimes{}, err
	}
	stdlib, err := timed(func() error {
		if !ed25519.Verify(pub, input, sig) {
			return errors.New("crypto/ed25519 refused a signature the node accepted")
		}
		return nil
	})
	if err != nil {
		return verifyTimes{}, err
	}
	vt.stdlib = prepare + stdlib
	errs := make([]error, len(checks))
	batches, err := timed(func() error {
		new(protocol.SigBatcher).VerifyBatch(checks, errs)
		return errors.Join(errs...)
	})
	if err != nil {
		return verifyTimes{}, err
	}
	vt.batch = batches / time.Duration(len(checks))
	vt.ceiling = float64(runtime.NumCPU()) / vt.single.Seconds()
	return vt, nil
}

// benchSigned binds benchAgents Ed25519 keys, funds them, and then sends n
// signed credit.transfers among them: the full path of a value-moving
// message, signature check and ledger included.
func benchSigned(ctx context.Context, dir string, n, conns int) (signedResult, error) {
	node, err := startBenchNode(ctx, dir, 0)
	if err != nil {
		return signedResult{}, err
	}
	defer node.close()
	keys := make([]crypto.Signer, benchAgents)
	uri := func(i int) string { return fmt.Sprintf("agent://a%02d.bench", i%benchAgents) }
	now := time.Now().UTC().Format(time.RFC3339)
	var setup []byte
	for i := range keys {
		if keys[i], err = protocol.GenerateKey(protocol.KeyEd25519); err != nil {
			return signedResult{}, err
		}
		pub, _ := protocol.MarshalPublicKey(keys[i].Public())
		auth, err := signedFrame(keys[i], uri(i), node.name, protocol.TypeAuthRequest,
			fmt.Sprintf(`{"agent_id": "a%02d", "public_key": %q, "timestamp": %q}`, i, pub, now))
		if err != nil {
			return signedResult{}, err
		}
		mint, err := signedFrame(node.key, node.name, uri(i), protocol.TypeCreditTransfer,
			fmt.Sprintf(`{"amount": "1000000000", "currency": "AGLX", "timestamp": %q, "transaction_id": "mint-%02d"}`, now, i))
		if err != nil {
			return signedResult{}, err
		}
		setup = append(append(setup, auth...), mint...)
	}
	c, err := bridge.Dial(ctx, node.addr)
	if err != nil {
		return signedResult{}, err
	}
	c.Write(setup)
	c.CloseWrite()
	for range 2 * benchAgents {
		r, err := c.ReadReply()
		if err != nil {
			c.Close()
			return signedResult{}, fmt.Errorf("setup: %w", err)
		}
		if r.Type() == "error" {
			c.Close()
			return signedResult{}, fmt.Errorf("setup refused: %s", r.Body)
		}
	}
	c.Close()
	var frames frameSet
	for i := range n {
		f, err := signedFrame(keys[i%benchAgents], uri(i), uri(i+1), protocol.TypeCreditTransfer,
			fmt.Sprintf(`{"amount": "1", "currency": "AGLX", "timestamp": %q, "transaction_id": "tx-%08d"}`, now, i))
		if err != nil {
			return signedResult{}, err
		}
		frames.add(f)
	}
	var sr signedResult
	batchFrames, batchKeys := make([][]byte, verifyBatchBench), make([]crypto.PublicKey, verifyBatchBench)
	for i := range batchFrames {
		batchFrames[i], batchKeys[i] = frames.at(i), keys[i%benchAgents].Public()
	}
	if sr.verify, err = verifyCeiling(batchFrames, batchKeys); err != nil {
		return signedResult{}, err
	}
	before := protocol.Ed25519Counters()
	if sr.load, err = timedLoad(ctx, filepath.Base(dir), bridge.Load{Addr: node.addr, Conns: conns, Frames: n, Frame: frames.at}); err != nil {
		return signedResult{}, err
	}
	after := protocol.Ed25519Counters()
	sr.checks = protocol.Ed25519Stats{Lone: after.Lone - before.Lone, Batches: after.Batches - before.Batches,
		Batched: after.Batched - before.Batched, FailedBatches: after.FailedBatches - before.FailedBatches}
	sr.replay, err = benchReplay(ctx, node)
	return sr, err
}

// replayResult is how long a cold rebuild of the folds took, and what the
// start from a saved state costs instead: saving the rebuilt folds (as a
// clean stop does) and loading them into fresh ones (as the next start
// does).
type replayResult struct {
	events     uint64
	elapsed    time.Duration
	stateBytes int
	saved      time.Duration
	loaded     time.Duration
}

// signedResult is the signed run: the load, the check times verifyCeiling
// measured, and the cold replay of the log it wrote.
type signedResult struct {
	load   bridge.LoadResult
	verify verifyTimes
	checks protocol.Ed25519Stats // the node's Ed25519 checks during the load
	replay replayResult
}

// batching describes how the signed run's checks were made.
func (sr signedResult) batching() string {
	c := sr.checks
	if c.Batches == 0 {
		return fmt.Sprintf("%d checks, none in batches", c.Lone)
	}
	return fmt.Sprintf("%d checks, %.0f%% in %d batches of %.1f on average, %d failed", c.Lone+c.Batched,
		100*float64(c.Batched)/float64(c.Lone+c.Batched), c.Batches, float64(c.Batched)/float64(c.Batches), c.FailedBatches)
}

// benchReplay rebuilds the node's folds (projections.NewFolds) from the whole log, as
// a restarted node does: through a consumer, with no verdicts cached, so
// every signature is checked again, by the prefetcher on every core.
func benchReplay(ctx context.Context, node *benchNode) (replayResult, error) {
	var res replayResult
	l, err := events.Attach(ctx, node.nc, events.StreamNameDefault)
	if err != nil {
		return res, err
	}
	if res.events, err = l.LastSeq(ctx); err != nil {
		return res, err
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	cache := projections.NewVerdictCache()
	cfg := projections.RegistryConfig{NodeURI: node.name, NodeKey: node.key, Verdicts: cache, Outbox: projections.NewOutbox()}
	folds := projections.NewFolds(cfg)
	registry := folds.Registry
	r := projections.NewRunner(l, quiet, folds.All()...)
	r.Prefetcher = &projections.IngestVerifier{Registry: registry, Cache: cache}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	go r.Run(runCtx)
	select {
	case <-r.Ready():
	case <-ctx.Done():
		return res, ctx.Err()
	}
	res.elapsed = time.Since(start)

	var b []byte
	start = time.Now()
	r.View(func(applied uint64) {
		b, err = projections.EncodeState(projections.StateHeader{Seq: applied}, folds, cfg.Outbox)
	})
	if err != nil {
		return res, err
	}
	res.saved, res.stateBytes = time.Since(start), len(b)
	cfg.Outbox = projections.NewOutbox()
	start = time.Now()
	if _, err := projections.LoadState(b, projections.NewFolds(cfg), cfg.Outbox); err != nil {
		return res, err
	}
	res.loaded = time.Since(start)
	return res, nil
}
