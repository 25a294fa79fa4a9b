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

// loadOrCreateNodeKey reads the node's signing key, or makes an Ed25519 one
// on first start. The node signs what only it may say with this key
// (auth.response, issuance, credit.adjust), and `aglx mint` reads it from
// the same file. The file is written once, mode 0600, via a rename so that
// a crash never leaves half a key.
func loadOrCreateNodeKey(path string) (crypto.Signer, bool, error) {
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
	k, err := protocol.GenerateKey(protocol.KeyEd25519)
	if err != nil {
		return nil, false, err
	}
	pemBytes, err := protocol.MarshalPrivateKey(k)
	if err != nil {
		return nil, false, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, false, fmt.Errorf("node key: %w", err)
	}
	if err := bridge.WriteFileDurable(path, pemBytes, 0o600); err != nil {
		return nil, false, fmt.Errorf("node key: %w", err)
	}
	return k, true, nil
}
