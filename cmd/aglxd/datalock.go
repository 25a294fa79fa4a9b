//go:build unix

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// dataLockName is the file in the data dir that one running node holds an
// exclusive lock on.
const dataLockName = "aglxd.lock"

// lockDataDir takes the data dir for this process alone, or says which
// process has it. Two nodes on one data dir each run an embedded server
// over the same store, and each promises the same sequences to its own
// clients: one of them loses acknowledged events. The lock is the
// kernel's (flock), so it goes with the process, however that ends.
func lockDataDir(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("--data %s: %w", dir, err)
	}
	path := filepath.Join(dir, dataLockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("--data %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("--data %s is in use by another aglxd (pid %s); two nodes on one data dir would both hand out the same sequences and lose acknowledged events: stop it, or give this one another --data",
				dir, strings.TrimSpace(string(holder)))
		}
		return nil, fmt.Errorf("--data %s: locking %s: %w", dir, path, err)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}
