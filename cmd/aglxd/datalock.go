//go:build unix

package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
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
			return nil, fmt.Errorf("--data %s is in use: %s; two nodes on one data dir would both hand out the same sequences and lose acknowledged events: stop it, or give this one another --data",
				dir, lockHolder(strings.TrimSpace(string(holder))))
		}
		return nil, fmt.Errorf("--data %s: locking %s: %w", dir, path, err)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// lockHolder says who holds the data dir's lock, from the pid in the file,
// which is the last node's to start there: the file keeps it after that
// node has ended, and whatever holds the lock now (a backup copying the
// store under flock, as OPERATIONS.md does it) writes nothing. Named as
// "another aglxd (pid N)" without a look, it sent an operator to kill a
// process that was not the holder, or no process at all (helper-93).
// Where /proc is not there to look, it says only what the file says.
func lockHolder(pid string) string {
	n, err := strconv.Atoi(pid)
	if err != nil || n <= 0 {
		return "another process holds its lock"
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", n))
	switch {
	case err == nil && bytes.Contains(cmdline, []byte("aglxd")):
		return fmt.Sprintf("another aglxd holds it (pid %d)", n)
	case err == nil:
		return fmt.Sprintf("another process holds its lock (pid %d, the last aglxd to start there, is now another program: a backup's copy, say)", n)
	case errors.Is(err, fs.ErrNotExist) && procMounted():
		return fmt.Sprintf("another process holds its lock (pid %d, the last aglxd to start there, has ended: a backup's copy, say)", n)
	default:
		return fmt.Sprintf("another process holds its lock (the last aglxd to start there was pid %d)", n)
	}
}

// procMounted reports whether /proc can tell which processes run.
func procMounted() bool {
	_, err := os.Stat("/proc/self/cmdline")
	return err == nil
}
