//go:build !linux

package bench

import "time"

// ProcCPU is a process's CPU time, user and system together; see the Linux version. Elsewhere
// it is what ProcUsage reads.
func ProcCPU(pid int) (time.Duration, error) {
	u, err := ProcUsage(pid)
	return u.Total(), err
}
