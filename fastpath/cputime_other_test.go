//go:build !linux

package fastpath

import "time"

// threadCPU is not measured here: the benchmarks then report wall-clock figures only.
func threadCPU() time.Duration { return 0 }
