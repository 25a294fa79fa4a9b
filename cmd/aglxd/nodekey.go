package main

import (
	"crypto"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/aglx/ledger/bridge"
	"github.com/aglx/ledger/protocol"
)

// loadNodeKey reads the node's signing key, or makes an Ed25519 one on
// first start. The node signs what only it may say with this key
// (auth.response, issuance, credit.adjust), and `aglx mint` reads it from
// the same file. A key it makes is only in memory (made is true): the
// caller keeps it with keepNodeKey once the store has been found to be
// this node's, so that a start refused for another owner's store leaves
// no new key behind for the operator to clear away before restoring the
// old one.
func loadNodeKey(path string) (k crypto.Signer, made bool, err error) {
	b, err := os.ReadFile(path)
	if err == nil {
		k, err := protocol.ParsePrivateKey(b)
		if err != nil {
			return nil, false, fmt.Errorf("node key %s: %w", path, err)
		}
		return k, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, false, fmt.Errorf("node key: %w", err)
	}
	if k, err = protocol.GenerateKey(protocol.KeyEd25519); err != nil {
		return nil, false, err
	}
	return k, true, nil
}

// keepNodeKey writes a key loadNodeKey made, once, mode 0600, via a rename
// so that a crash never leaves half a key.
func keepNodeKey(path string, k crypto.Signer) error {
	pemBytes, err := protocol.MarshalPrivateKey(k)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("node key: %w", err)
	}
	if err := bridge.WriteFileDurable(path, pemBytes, 0o600); err != nil {
		return fmt.Errorf("node key: %w", err)
	}
	return nil
}
