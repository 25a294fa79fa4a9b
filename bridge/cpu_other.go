//go:build !unix

package bridge

import "time"

// ProcessCPU is 0 where getrusage is missing: load tests then report no
// CPU per frame.
func ProcessCPU() time.Duration { return 0 }
