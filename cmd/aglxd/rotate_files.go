package main

import (
	"crypto"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aglx/ledger/bridge"
	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/protocol"
)

// The files a node key rotation leaves beside the node key, all named
// after the key file (two nodes may keep their keys in one directory):
//
//	NODE-KEY.next                          the new key, during a rotation
//	NODE-KEY.retired-HEX                   an old key, HEX its key id's hex
//	NODE-KEY.rotation-HEX-to-PEER.aglx     the rotation to HEX, unsigned,
//	                                       for a peer that did not take it
//
// They are found by listing the directory, never by a glob, since a key
// path may hold a glob's special characters.

// retiredKeyInfix names an old key's file beside the node key. It is kept
// from the rotation on: a rotation run against the wrong store (a
// mistaken --data beside the right --node-key) is undone by putting it
// back, and peers that did not take the rotation can be told only with
// it. Nothing removes it: no start can tell the right store from one a
// mistake rotated (helper-119), so the operator does, once the node runs
// on its store.
const retiredKeyInfix = ".retired-"

// keyHex is a key id's hex part.
func keyHex(id string) string { return strings.TrimPrefix(id, "sha256:") }

// retiredKeyPath is where a rotation keeps the key oldID.
func retiredKeyPath(path, oldID string) string { return path + retiredKeyInfix + keyHex(oldID) }

// framePath is the frame a rotation to newID leaves for peer, named by
// the peer's URI as a subject token (events.URIToken), which no two URIs
// share: a name two peers shared had one peer's frame removed when the
// other took the rotation (helper-121).
func framePath(path, newID, peer string) string {
	return path + ".rotation-" + keyHex(newID) + "-to-" + events.URIToken(peer) + ".aglx"
}

// besideKey lists the regular files beside the key file path whose names
// begin with its name and infix and end with suffix.
func besideKey(path, infix, suffix string) []string {
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		return nil
	}
	prefix := filepath.Base(path) + infix
	var out []string
	for _, e := range entries {
		if n := e.Name(); e.Type().IsRegular() && strings.HasPrefix(n, prefix) && strings.HasSuffix(n, suffix) {
			out = append(out, filepath.Join(filepath.Dir(path), n))
		}
	}
	return out
}

// retiredKeys lists the old keys kept beside the key file path.
func retiredKeys(path string) []string {
	var out []string
	for _, f := range besideKey(path, retiredKeyInfix, "") {
		if hex := strings.TrimPrefix(filepath.Base(f), filepath.Base(path)+retiredKeyInfix); isKeyHex(hex) {
			out = append(out, f)
		}
	}
	return out
}

// keyIDHexDigits is how many hex digits protocol.KeyID gives.
const keyIDHexDigits = 32

// isKeyHex reports whether s is a key id's hex part (protocol.KeyID).
func isKeyHex(s string) bool {
	if len(s) != keyIDHexDigits {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// framesOf lists the frames the rotation to newID left beside path.
func framesOf(path, newID string) []string {
	var out []string
	own := filepath.Base(path) + ".rotation-" + keyHex(newID) + "-to-"
	for _, f := range besideKey(path, ".rotation-", ".aglx") {
		if strings.HasPrefix(filepath.Base(f), own) {
			out = append(out, f)
		}
	}
	return out
}

// sendTrust is the aglx send flags that reach peer p: its address and
// trust as --sync-to gives them, or, for a plain-TCP peer, a place for its
// TLS port (key.rotate is a security message, which a peer takes over TLS
// only).
func sendTrust(p bridge.Peer) string {
	if p.Plain {
		return "--addr PEER-HOST:PEER-TLS-PORT --ca PEER-DATA/tls/cert.pem"
	}
	out := "--addr " + shellQuote(p.Addr)
	if p.CA != "" {
		out += " --ca " + shellQuote(p.CA)
	}
	if p.Pin != "" {
		out += " --pin " + shellQuote(p.Pin)
	}
	return out
}

// shellQuote quotes s for a POSIX shell where it needs it.
func shellQuote(s string) string {
	safe := s != ""
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-_./:=@%+,", c) >= 0) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// framesBefore lists the frames rotations left beside the key file path
// for peers, except those of the rotation to nextID ("": none), which a
// stopped run of that rotation left and its next run writes again.
func framesBefore(path, nextID string) []string {
	var out []string
	own := filepath.Base(path) + ".rotation-" + keyHex(nextID) + "-to-"
	for _, f := range besideKey(path, ".rotation-", ".aglx") {
		if nextID == "" || !strings.HasPrefix(filepath.Base(f), own) {
			out = append(out, f)
		}
	}
	return out
}

// noteRetiredKeys says at start what a rotation left beside the key:
// frames for peers that have yet to take it (until each is sent, signed
// with the old key, the peer refuses this node's pushes), and old keys,
// which the operator removes once the node runs on its store.
func (m *Main) noteRetiredKeys() {
	path := m.cfg.NodeKeyPath()
	retired := retiredKeys(path)
	if frames := framesBefore(path, ""); len(frames) > 0 {
		m.lg.Warn("a node key rotation left frames for peers that did not take it: send each with aglx send --key and the old key, then remove the frames (docs/ROTATION.md)",
			"frames", strings.Join(frames, ", "), "retired_keys", strings.Join(retired, ", "))
		return
	}
	if len(retired) > 0 {
		m.lg.Info("old node keys are kept beside the node key: if this --data is the node's store, which its rotation was meant for, remove them (the log keeps their public keys)",
			"retired_keys", strings.Join(retired, ", "))
	}
}

// retiredKeyHint is a word for a start refused as another owner's when an
// old key kept beside the key file is the owner the log names: a rotation
// was run against another store (a mistaken --data), and this store still
// needs that key.
func retiredKeyHint(path, name string, err error) string {
	var other *events.OtherOwnerError
	if !errors.As(err, &other) {
		return ""
	}
	for _, f := range retiredKeys(path) {
		hex := strings.TrimPrefix(filepath.Base(f), filepath.Base(path)+retiredKeyInfix)
		if other.Was == name+" sha256:"+hex {
			return fmt.Sprintf(". This store's owner is the old key kept in %s: either this --data is not the store the key was rotated on, or a rotation was run against another store (a mistaken --data). Then rotate this store to the key %s holds now: move %s to %s, copy %s to %s, and run --rotate-node-key with this store's flags (docs/ROTATION.md)",
				f, path, path, path+nextKeySuffix, f, path)
		}
	}
	return ""
}

// writeRotationFrame writes the node's key.rotate to `to` as an unsigned
// frame without a timestamp, which aglx send adds when it signs: a frame
// signed now would be stale by the time the peer is back.
func (m *Main) writeRotationFrame(file, to string, old, next crypto.Signer) error {
	body, err := bridge.KeyRotationBody(old.Public(), next.Public(), time.Time{})
	if err != nil {
		return err
	}
	var v map[string]json.RawMessage
	if err := json.Unmarshal(body, &v); err != nil {
		return err
	}
	delete(v, "timestamp")
	if body, err = json.Marshal(v); err != nil {
		return err
	}
	fr := &protocol.Frame{Transport: protocol.TransportTCP, Body: body, Headers: []protocol.Header{
		{Name: protocol.HeaderFrom, Value: m.cfg.Name},
		{Name: protocol.HeaderTo, Value: to},
		{Name: protocol.HeaderType, Value: protocol.TypeKeyRotate},
		{Name: protocol.HeaderContentType, Value: "application/json"},
	}}
	if err := bridge.WriteFileDurable(file, protocol.Encode(fr), 0o600); err != nil {
		return fmt.Errorf("writing the rotation for %s: %w", to, err)
	}
	return nil
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
