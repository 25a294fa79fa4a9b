package main

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/aglx/ledger/bridge"
)

// tokenKeySize is the size of the secret zone session tokens derive from.
const tokenKeySize = 32 // bytes

// loadOrCreateSecret reads a random secret from path, or makes one on first
// start. The zone session tokens are derived from it, so that a replay of
// the log derives the same tokens while none is ever stored.
// made says it was made now.
func loadOrCreateSecret(path string) (b []byte, made bool, err error) {
	b, err = os.ReadFile(path)
	if err == nil {
		if len(b) != tokenKeySize {
			return nil, false, fmt.Errorf("%s: want %d bytes, found %d", path, tokenKeySize, len(b))
		}
		return b, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, false, err
	}
	b = make([]byte, tokenKeySize)
	rand.Read(b)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, false, err
	}
	return b, true, bridge.WriteFileDurable(path, b, 0o600)
}
