//go:build !unix

package bridge

import "time"

// processCPU is 0 where getrusage is missing: load tests then report no
// CPU per frame.
func processCPU() time.Duration { return 0 }
