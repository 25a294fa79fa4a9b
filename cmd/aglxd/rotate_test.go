package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/protocol"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// runOnce runs a node with cfg and stops it, returning what the run and
// the stop said: a start that is refused, or a maintenance run.
func runOnce(cfg Config) (run, stop error) {
	n := NewMain(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	run = n.Run(context.Background())
	return run, n.Close(context.Background())
}

// rotateKey runs aglxd --rotate-node-key with the flags the node ran
// with, and returns its error.
func rotateKey(t *testing.T, cfg Config) error {
	t.Helper()
	cfg.RotateNodeKey = true
	err, stop := runOnce(cfg)
	if err == nil {
		err = stop
	}
	return err
}

// TestRotateNodeKey: aglxd --rotate-node-key gives the node a new key
// without voiding what the old one signed. Before it, the only way to a
// new key was --take-over-store, after which every earlier mint was
// refused on replay and its balance gone. After the rotation the mint made
// under the old key still counts, the new key mints, the old one no longer
// does, and the audit agrees and lists both keys.
func TestRotateNodeKey(t *testing.T) {
	dir := t.TempDir()
	m := startNode(t, dir)
	cfg := m.cfg
	oldKey := m.key
	s := lfNewSession(t, m)
	lfExpect(t, s.transfer(t, lfParty{uri: m.cfg.Name, key: oldKey}, "agent://w.local", "5", "mint-old"), "ack", 200)
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	oldFile, err := os.ReadFile(cfg.NodeKeyPath())
	if err != nil {
		t.Fatal(err)
	}
	// A rotation refused before it changed anything (here: under
	// another --name) leaves nothing behind that would stop a start.
	wrong := cfg
	wrong.Name = "registry://other.local"
	if err := rotateKey(t, wrong); err == nil || !strings.Contains(err.Error(), "nothing was rotated") {
		t.Fatalf("a rotation under another name: %v; want a refusal", err)
	}
	if _, err := os.Stat(cfg.NodeKeyPath() + nextKeySuffix); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a refused rotation left a next key file: %v", err)
	}
	// Nor one pointed at the wrong store: an empty --data beside the
	// real key file made empty streams, rotated their "log", and replaced
	// the node's key (helper-115).
	stray := cfg
	stray.DataDir = t.TempDir()
	stray.NodeKey = cfg.NodeKeyPath()
	if err := rotateKey(t, stray); err == nil || !strings.Contains(err.Error(), "holds no node's store") {
		t.Fatalf("a rotation with --data where no store is: %v; want a refusal", err)
	}
	if entries, _ := os.ReadDir(stray.DataDir); len(entries) != 0 {
		t.Fatalf("a rotation refused for want of a store left %d files in --data", len(entries))
	}
	// ... nor where one mistaken start under the right key left an empty
	// log (helper-117).
	startNodeWith(t, stray.DataDir, func(c *Config) { c.NodeKey = cfg.NodeKeyPath() }).Close(context.Background())
	if err := rotateKey(t, stray); err == nil || !strings.Contains(err.Error(), "or an empty one") {
		t.Fatalf("a rotation of an empty log: %v; want a refusal", err)
	}
	if now, err := os.ReadFile(cfg.NodeKeyPath()); err != nil || !bytes.Equal(now, oldFile) {
		t.Fatalf("a rotation refused for want of a log changed the key file (%v)", err)
	}

	if err := rotateKey(t, cfg); err != nil {
		t.Fatalf("--rotate-node-key: %v", err)
	}
	newFile, err := os.ReadFile(cfg.NodeKeyPath())
	if err != nil || bytes.Equal(newFile, oldFile) {
		t.Fatalf("after the rotation the key file is the old one (%v)", err)
	}
	if _, err := os.Stat(cfg.NodeKeyPath() + nextKeySuffix); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the rotation left its next key file: %v", err)
	}
	// The old key is kept (a rotation against the wrong store is undone
	// with it), and no start removes it: the operator does.
	retired := retiredKeyPath(cfg.NodeKeyPath(), protocol.KeyID(oldKey.Public()))
	if got, err := os.ReadFile(retired); err != nil || !bytes.Equal(got, oldFile) {
		t.Fatalf("the rotation did not keep the old key in %s (%v)", retired, err)
	}

	m = startNode(t, dir)
	if _, err := os.Stat(retired); err != nil {
		t.Fatalf("a start removed the old key: %v", err)
	}
	if protocol.KeyID(m.key.Public()) == protocol.KeyID(oldKey.Public()) {
		t.Fatal("the node started with its old key after the rotation")
	}
	s = lfNewSession(t, m)
	lfExpect(t, s.transfer(t, lfParty{uri: m.cfg.Name, key: oldKey}, "agent://w.local", "100", "mint-retired"), "error", 401)
	lfExpect(t, s.transfer(t, lfParty{uri: m.cfg.Name, key: m.key}, "agent://w.local", "2", "mint-new"), "ack", 200)
	s.query(t, lfParty{uri: "agent://w.local"})
	lfExpectAccount(t, m, "agent://w.local", s.last, "7", "7", "0")
	rep := auditNode(t, m, s.last)
	if len(rep.Problems) != 0 || len(rep.NodeKeys) != 2 || rep.NodeKeys[1].KeyID != protocol.KeyID(m.key.Public()) {
		t.Fatalf("audit after the rotation: problems %q, node keys %+v; want none, and the old and the new key", rep.Problems, rep.NodeKeys)
	}
}

// TestInterruptedNodeKeyRotation: a rotation stopped at any step is
// finished by running it again, and until then the node does not start
// (it might sign with a key the log no longer names, or make a new key
// where the old one was already replaced). Two points are tried: before
// anything reached the log (a next key file is all there is; the rotation
// takes that key), and after the log and the streams' owner name the new
// key but the key file is still the old one.
func TestInterruptedNodeKeyRotation(t *testing.T) {
	dir := t.TempDir()
	m := startNode(t, dir)
	cfg := m.cfg
	s := lfNewSession(t, m)
	lfExpect(t, s.transfer(t, lfParty{uri: m.cfg.Name, key: m.key}, "agent://w.local", "5", "mint-1"), "ack", 200)
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	path, next := cfg.NodeKeyPath(), cfg.NodeKeyPath()+nextKeySuffix
	refused := func(step string) {
		t.Helper()
		err, _ := runOnce(cfg)
		if !errors.Is(err, errRotationLeft) || !strings.Contains(err.Error(), "--rotate-node-key") {
			t.Fatalf("%s: a start beside %s: %v; want a refusal that says to run --rotate-node-key", step, next, err)
		}
	}

	// Stopped after the next key was written.
	chosen, err := protocol.GenerateKey(protocol.KeyEd25519)
	if err != nil {
		t.Fatal(err)
	}
	firstFile, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := keepNodeKey(next, chosen); err != nil {
		t.Fatal(err)
	}
	refused("a next key and nothing else")
	if err := rotateKey(t, cfg); err != nil {
		t.Fatalf("--rotate-node-key beside a next key: %v", err)
	}
	if k, _, err := loadNodeKey(path); err != nil || protocol.KeyID(k.Public()) != protocol.KeyID(chosen.Public()) {
		t.Fatalf("the rotation did not take the key put in %s: %v", next, err)
	}
	// A next key the node had before would be appended and refused by
	// the fold, at every run (helper-115): refused before the append.
	if err := os.WriteFile(next, firstFile, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := rotateKey(t, cfg); err == nil || !strings.Contains(err.Error(), "had before") {
		t.Fatalf("a rotation to the node's first key again: %v; want a refusal", err)
	}
	if err := os.Remove(next); err != nil {
		t.Fatal(err)
	}

	// Stopped after the streams' owner became the new key's: the key
	// files as they were before the last step.
	second, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := rotateKey(t, cfg); err != nil {
		t.Fatalf("a second rotation: %v", err)
	}
	third, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, second, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(next, third, 0o600); err != nil {
		t.Fatal(err)
	}
	refused("the owner changed, the key file not")
	if err := rotateKey(t, cfg); err != nil {
		t.Fatalf("--rotate-node-key after the owner changed: %v", err)
	}
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, third) {
		t.Fatalf("finishing the rotation did not put the key the log names in place (%v)", err)
	}

	m = startNode(t, dir)
	s = lfNewSession(t, m)
	lfExpect(t, s.transfer(t, lfParty{uri: m.cfg.Name, key: m.key}, "agent://w.local", "1", "mint-3"), "ack", 200)
	s.query(t, lfParty{uri: "agent://w.local"})
	lfExpectAccount(t, m, "agent://w.local", s.last, "6", "6", "0")
	if rep := auditNode(t, m, s.last); len(rep.Problems) != 0 || len(rep.NodeKeys) != 3 {
		t.Fatalf("audit: problems %q, %d node keys; want none, and 3", rep.Problems, len(rep.NodeKeys))
	}
}

// waitAgent waits until m's registry lists agent, as a peer's push makes
// it.
func waitAgent(t *testing.T, m *Main, agent string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); agentIDs(t, m)[agent] == ""; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s never listed %s", m.cfg.Name, agent)
		}
	}
}

// TestRotatedNodeKeyReachesItsPeers: a peer that takes this node's
// registry.sync checks each push against the key it bound for the node,
// and only the old key can tell it of a new one. So the rotation sends
// each --sync-to peer a key.rotate signed with the old key, and the pushes
// after it are taken. A peer that is away keeps the old key in place
// (node.key.retired) and leaves a frame to send once it is back; the
// rotation says so with exit status 3 (errPeersLeft).
func TestRotatedNodeKeyReachesItsPeers(t *testing.T) {
	dirB, addrB := t.TempDir(), freeAddr(t)
	startB := func() *Main {
		return startNodeWith(t, dirB, func(c *Config) {
			c.Name, c.TLSListen, c.SyncFrom = "registry://backup.local", addrB, []string{"registry://main.local"}
		})
	}
	b := startB()
	dirA := t.TempDir()
	withPeer := func(c *Config) {
		c.Name = "registry://main.local"
		c.SyncTo = []string{"registry://backup.local@" + addrB + "?ca=" + filepath.Join(dirB, "tls", "cert.pem")}
		c.SyncInterval = 100 * time.Millisecond
	}
	a := startNodeWith(t, dirA, withPeer)
	cfgA := a.cfg
	bindPeer(t, b, a)
	register(t, a, "agent://one.local")
	waitAgent(t, b, "agent://one.local")
	a.Close(context.Background())

	before, err := os.ReadFile(cfgA.NodeKeyPath())
	if err != nil {
		t.Fatal(err)
	}
	if err := rotateKey(t, cfgA); err != nil {
		t.Fatalf("--rotate-node-key with its peer up: %v", err)
	}
	// Run again as if stopped before its last step: the peer, which took
	// the rotation, refuses it now (401, not signed with the key it has),
	// and the run finds that the peer has the new key and is done.
	after, err := os.ReadFile(cfgA.NodeKeyPath())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgA.NodeKeyPath()+nextKeySuffix, after, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgA.NodeKeyPath(), before, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := rotateKey(t, cfgA); err != nil {
		t.Fatalf("--rotate-node-key run again after its peer took the rotation: %v", err)
	}
	if frames := framesBefore(cfgA.NodeKeyPath(), ""); len(frames) != 0 {
		t.Fatalf("a run that found the peer up to date left frames for it: %v", frames)
	}
	a = startNodeWith(t, dirA, withPeer)
	register(t, a, "agent://two.local")
	waitAgent(t, b, "agent://two.local")
	a.Close(context.Background())

	// The peer is away for the next rotation.
	b.Close(context.Background())
	current, _, err := loadNodeKey(cfgA.NodeKeyPath())
	if err != nil {
		t.Fatal(err)
	}
	err = rotateKey(t, cfgA)
	if !errors.Is(err, errPeersLeft) {
		t.Fatalf("--rotate-node-key with its peer away: %v; want errPeersLeft", err)
	}
	retiredPath := retiredKeyPath(cfgA.NodeKeyPath(), protocol.KeyID(current.Public()))
	retired, _, err := loadNodeKey(retiredPath)
	if err != nil {
		t.Fatalf("the old key was not kept for the peer that is away: %v", err)
	}
	// A second rotation would leave the peer two rotations behind, which
	// the frames cannot tell it in order (helper-115): refused until the
	// frames are dealt with.
	if err := rotateKey(t, cfgA); err == nil || !strings.Contains(err.Error(), "have yet to take") {
		t.Fatalf("a rotation while the last one's frames are left: %v; want a refusal", err)
	}
	// Nor does a start remove the old key the frames need.
	startNodeWith(t, dirA, withPeer).Close(context.Background())
	if _, err := os.Stat(retiredPath); err != nil {
		t.Fatalf("a start removed the old key the peers' frames need: %v", err)
	}
	rotated, _, err := loadNodeKey(cfgA.NodeKeyPath())
	if err != nil {
		t.Fatal(err)
	}
	frameFile := framePath(cfgA.NodeKeyPath(), protocol.KeyID(rotated.Public()), "registry://backup.local")
	raw, err := os.ReadFile(frameFile)
	if err != nil {
		t.Fatalf("no frame left for the peer: %v", err)
	}
	b = startB()
	// What the operator does with aglx send --key node.key.retired: stamp
	// the frame, sign it with the old key, send it over TLS.
	f, err := protocol.NewDecoder(bytes.NewReader(raw), protocol.DecoderOptions{BodySizeMax: protocol.BodySizeMaxLimit}).Decode()
	if err != nil {
		t.Fatal(err)
	}
	f.Body = bytes.Replace(f.Body, []byte("{"), []byte(`{"timestamp":"`+lfNow()+`",`), 1)
	if err := protocol.SignFrame(retired, f); err != nil {
		t.Fatal(err)
	}
	c := dialTLS(t, b)
	if err := c.WriteFrame(f); err != nil || c.Flush() != nil {
		t.Fatal("sending the rotation failed")
	}
	if r, _ := readReply(t, c); r.Type() != protocol.TypeAck {
		t.Fatalf("the peer's answer to the rotation left for it: %s %s", r.Type(), r.Body)
	}
	a = startNodeWith(t, dirA, withPeer)
	register(t, a, "agent://three.local")
	waitAgent(t, b, "agent://three.local")
}

// TestStartRefusesAKeyTheLogNoLongerNames: a rotation stopped after the
// log took it but before the streams' owner changed, whose node.key.next
// was then removed by hand, left the old key in node.key and nothing to
// stop a start: the node served with a key whose mints the log refuses.
// The start now folds the node's own rotations first and refuses,
// naming the key the log has.
func TestStartRefusesAKeyTheLogNoLongerNames(t *testing.T) {
	dir := t.TempDir()
	m := startNode(t, dir)
	cfg := m.cfg
	lfExpect(t, lfNewSession(t, m).transfer(t, lfParty{uri: m.cfg.Name, key: m.key}, "agent://w.local", "5", "mint-1"), "ack", 200)
	oldOwner := m.cfg.Name + " " + protocol.KeyID(m.key.Public())
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(cfg.NodeKeyPath())
	if err != nil {
		t.Fatal(err)
	}
	if err := rotateKey(t, cfg); err != nil {
		t.Fatal(err)
	}
	// Back to the state of a rotation stopped before its third step:
	// the streams name the old owner, the key file is the old key.
	ns, err := events.StartServer(events.ServerConfig{DataDir: dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	nc, err := ns.Connect("test")
	if err != nil {
		ns.Shutdown()
		t.Fatal(err)
	}
	ctx := context.Background()
	lg, err := events.Open(ctx, nc, events.Config{}, nil)
	if err == nil {
		err = lg.SetOwner(ctx, oldOwner, "")
		lg.Close(ctx)
	}
	nc.Close()
	ns.Shutdown()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg.NodeKeyPath(), before, 0o600); err != nil {
		t.Fatal(err)
	}
	err, _ = runOnce(cfg)
	if err == nil || !strings.Contains(err.Error(), "the log's node key is") || !strings.Contains(err.Error(), "rotation at seq") {
		t.Fatalf("a start with the key the log retired: %v; want a refusal naming the log's key", err)
	}
}

// TestTakeOverToARetiredKeyChangesNothing: a take-over of a rotated
// store under the key it rotated from is refused, since the log's
// rotations lead past that key; but the take-over had been recorded
// before the refusal (the first key dropped from the streams), and with it
// went every mint made before the rotation (helper-117), also when the
// event stream had been moved aside to be rebuilt (helper-118). A
// take-over is now recorded only once the key fits: the key the log names
// still starts the node, and the mint still counts.
func TestTakeOverToARetiredKeyChangesNothing(t *testing.T) {
	for _, aside := range []bool{false, true} {
		name := "the event stream in place"
		if aside {
			name = "the event stream moved aside to be rebuilt"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			m := startNode(t, dir)
			cfg := m.cfg
			lfExpect(t, lfNewSession(t, m).transfer(t, lfParty{uri: m.cfg.Name, key: m.key}, "agent://w.local", "5", "mint-old"), "ack", 200)
			streamDir := m.ns.StreamDir(events.StreamNameDefault)
			if err := m.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			oldFile := mustReadFile(t, cfg.NodeKeyPath())
			if err := rotateKey(t, cfg); err != nil {
				t.Fatal(err)
			}
			newFile := mustReadFile(t, cfg.NodeKeyPath())
			if aside {
				if err := os.Rename(streamDir, filepath.Join(t.TempDir(), "aside")); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(cfg.NodeKeyPath(), oldFile, 0o600); err != nil {
				t.Fatal(err)
			}
			takeOver := cfg
			takeOver.TakeOverStore = true
			if err, _ := runOnce(takeOver); !errors.Is(err, errKeyNotTheLogs) {
				t.Fatalf("a take-over under the retired key: %v; want a refusal for a key the log moved past", err)
			}
			if err := os.WriteFile(cfg.NodeKeyPath(), newFile, 0o600); err != nil {
				t.Fatal(err)
			}
			m = startNode(t, dir)
			s := lfNewSession(t, m)
			s.query(t, lfParty{uri: "agent://w.local"})
			lfExpectAccount(t, m, "agent://w.local", s.last, "5", "5", "0")
		})
	}
}

// mustReadFile is os.ReadFile that fails the test.
func mustReadFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// withStore runs fn on a connection to an embedded server over dir, with
// no node running on it.
func withStore(t *testing.T, dir string, fn func(js jetstream.JetStream, nc *nats.Conn)) {
	t.Helper()
	ns, err := events.StartServer(events.ServerConfig{DataDir: dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	nc, err := ns.Connect("test")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	fn(js, nc)
}

// TestStartAfterARotationTheEventStreamLost: the event stream is flushed
// every 100 ms, the write-ahead stream on every batch, so a power loss
// right after a rotation can leave the rotation in the write-ahead stream
// only, which Open copies back. A check of the key against the event
// stream before that repair refused every start for good, naming a key
// the rotation had removed (helper-118); the check reads the log as Open
// repaired it.
func TestStartAfterARotationTheEventStreamLost(t *testing.T) {
	dir := t.TempDir()
	m := startNode(t, dir)
	cfg := m.cfg
	lfExpect(t, lfNewSession(t, m).transfer(t, lfParty{uri: m.cfg.Name, key: m.key}, "agent://w.local", "5", "mint-old"), "ack", 200)
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := rotateKey(t, cfg); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Simulate the lost tail: the event stream as it was before its last
	// message (the rotation), same config and metadata.
	withStore(t, dir, func(js jetstream.JetStream, nc *nats.Conn) {
		s, err := js.Stream(ctx, events.StreamNameDefault)
		if err != nil {
			t.Fatal(err)
		}
		info, _ := s.Info(ctx)
		sc := info.Config
		last := info.State.LastSeq
		var msgs []*jetstream.RawStreamMsg
		for seq := uint64(1); seq <= last; seq++ {
			rm, err := s.GetMsg(ctx, seq)
			if err != nil {
				t.Fatal(err)
			}
			msgs = append(msgs, rm)
		}
		if err := js.DeleteStream(ctx, events.StreamNameDefault); err != nil {
			t.Fatal(err)
		}
		for k := range sc.Metadata {
			if len(k) > 6 && k[:6] == "_nats." {
				delete(sc.Metadata, k)
			}
		}
		if _, err := js.CreateStream(ctx, sc); err != nil {
			t.Fatal(err)
		}
		for _, rm := range msgs[:last-1] {
			if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: rm.Subject, Header: rm.Header, Data: rm.Data}); err != nil {
				t.Fatal(err)
			}
		}
	})
	n := NewMain(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	err := n.Run(ctx)
	defer n.Close(ctx)
	if err != nil {
		t.Fatalf("a start after a crash that lost the event stream's tail (the rotation), which Open would repair: %v", err)
	}
	s := lfNewSession(t, n)
	s.query(t, lfParty{uri: "agent://w.local"})
	lfExpectAccount(t, n, "agent://w.local", s.last, "5", "5", "0")
}

// TestRotationOfAStrayStoreIsUndone: a rotation run with a mistaken
// --data beside the right --node-key rotates a stray store a mistaken
// start made, and replaces the real node's key file. The old key is kept
// (no start removes it: a start on the stray store cannot tell it from
// the right one, helper-119), the real node's refused start names it and
// what to do: rotate the real store to the key the stray run made, which
// any peer that run told has already (helper-120). The node then starts
// with its mints, under that key.
func TestRotationOfAStrayStoreIsUndone(t *testing.T) {
	dir := t.TempDir()
	m := startNode(t, dir)
	cfg := m.cfg
	oldFile := mustReadFile(t, cfg.NodeKeyPath())
	lfExpect(t, lfNewSession(t, m).transfer(t, lfParty{uri: m.cfg.Name, key: m.key}, "agent://w.local", "5", "mint-real"), "ack", 200)
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	stray := t.TempDir()
	s := startNodeWith(t, stray, func(c *Config) { c.NodeKey = cfg.NodeKeyPath() })
	lfExpect(t, lfNewSession(t, s).transfer(t, lfParty{uri: s.cfg.Name, key: s.key}, "agent://w.local", "1", "mint-stray"), "ack", 200)
	strayCfg := s.cfg
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := rotateKey(t, strayCfg); err != nil {
		t.Fatalf("the rotation of the stray store: %v", err)
	}
	startNodeWith(t, stray, func(c *Config) { c.NodeKey = cfg.NodeKeyPath() }).Close(context.Background())
	strayNew := mustReadFile(t, cfg.NodeKeyPath())

	err, _ := runOnce(cfg)
	retired := retiredKeys(cfg.NodeKeyPath())
	if len(retired) != 1 || err == nil || !strings.Contains(err.Error(), retired[0]) || !strings.Contains(err.Error(), "run --rotate-node-key with this store's flags") {
		t.Fatalf("the real node's start after the stray rotation: %v (kept: %v); want a refusal naming the kept key and the way back", err, retired)
	}
	if got := mustReadFile(t, retired[0]); !bytes.Equal(got, oldFile) {
		t.Fatal("the kept key is not the real node's")
	}
	// What the refusal says to do.
	if err := os.Rename(cfg.NodeKeyPath(), cfg.NodeKeyPath()+nextKeySuffix); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg.NodeKeyPath(), oldFile, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := rotateKey(t, cfg); err != nil {
		t.Fatalf("rotating the real store to the stray run's key: %v", err)
	}
	if got := mustReadFile(t, cfg.NodeKeyPath()); !bytes.Equal(got, strayNew) {
		t.Fatal("the real store was not rotated to the stray run's key")
	}
	m = startNode(t, dir)
	sess := lfNewSession(t, m)
	sess.query(t, lfParty{uri: "agent://w.local"})
	lfExpectAccount(t, m, "agent://w.local", sess.last, "5", "5", "0")
}

// TestRotationStoppedAfterItsFramesFinishes: a run stopped after it left
// frames for a peer that was away, before its last step, was refused on
// its next run for those frames (an earlier rotation's, it took them to
// be), and the start for node.key.next: nothing could finish it
// (helper-119). A run finishes its own rotation's frames: keeps them
// while the peer is away, and removes one once its peer takes the
// rotation (helper-120: it was left, and every start asked for it to be
// sent).
func TestRotationStoppedAfterItsFramesFinishes(t *testing.T) {
	dirA, dirB, addrB := t.TempDir(), t.TempDir(), freeAddr(t)
	startB := func() *Main {
		return startNodeWith(t, dirB, func(c *Config) {
			c.Name, c.TLSListen, c.SyncFrom = "registry://backup.local", addrB, []string{"registry://main.local"}
		})
	}
	withPeer := func(c *Config) {
		c.Name = "registry://main.local"
		c.SyncTo = []string{"registry://backup.local@" + addrB + "?ca=" + filepath.Join(dirB, "tls", "cert.pem")}
		c.SyncInterval = 100 * time.Millisecond
	}
	b := startB()
	a := startNodeWith(t, dirA, withPeer)
	bindPeer(t, b, a)
	register(t, a, "agent://one.local")
	cfgA := a.cfg
	oldID := protocol.KeyID(a.key.Public())
	a.Close(context.Background())
	b.Close(context.Background())
	path := cfgA.NodeKeyPath()
	before := mustReadFile(t, path)
	if err := rotateKey(t, cfgA); !errors.Is(err, errPeersLeft) {
		t.Fatalf("a rotation with its peer away: %v; want errPeersLeft", err)
	}
	after := mustReadFile(t, path)
	stopped := func() { // back to a run stopped after its frames, before its last step
		t.Helper()
		if err := os.WriteFile(path+nextKeySuffix, after, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, before, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(retiredKeyPath(path, oldID)); err != nil {
			t.Fatal(err)
		}
	}
	stopped()
	if err := rotateKey(t, cfgA); !errors.Is(err, errPeersLeft) {
		t.Fatalf("the stopped rotation run again: %v; want it finished, its peer still away (errPeersLeft)", err)
	}
	if got := mustReadFile(t, path); !bytes.Equal(got, after) {
		t.Fatal("the run again did not put the rotation's key in place")
	}
	if _, err := os.Stat(retiredKeyPath(path, oldID)); err != nil {
		t.Fatalf("the run again did not keep the old key its frame needs: %v", err)
	}
	if frames := framesBefore(path, ""); len(frames) != 1 {
		t.Fatalf("frames left for the peer that is away: %v; want one", frames)
	}
	// Run again without naming the peer: its frame is still to be sent,
	// so the run is not done with it (helper-121: it exited 0).
	stopped()
	unnamed := cfgA
	unnamed.SyncTo = nil
	if err := rotateKey(t, unnamed); !errors.Is(err, errPeersLeft) {
		t.Fatalf("the stopped rotation run again without its peer: %v; want errPeersLeft for the frame left", err)
	}

	// Stopped again, and run again with the peer back: it takes the
	// rotation, and its frame goes.
	stopped()
	b = startB()
	if err := rotateKey(t, cfgA); err != nil {
		t.Fatalf("the stopped rotation run again with its peer back: %v", err)
	}
	if frames := framesBefore(path, ""); len(frames) != 0 {
		t.Fatalf("the frame of a peer that took the rotation was left: %v", frames)
	}
	a = startNodeWith(t, dirA, withPeer)
	register(t, a, "agent://two.local")
	waitAgent(t, b, "agent://two.local")
}
