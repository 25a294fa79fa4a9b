//go:build !(linux || darwin)

package events

import "errors"

// freeBytes is not known here: the node does not report or warn about
// free space on this platform.
func freeBytes(string) (uint64, error) { return 0, errors.ErrUnsupported }
