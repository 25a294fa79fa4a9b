//go:build !unix

package main

import "os"

// lockDataDir does nothing where flock is not available: there, running
// two nodes on one data dir is the operator's to avoid (OPERATIONS.md).
func lockDataDir(dir string) (*os.File, error) { return nil, os.MkdirAll(dir, 0o700) }
