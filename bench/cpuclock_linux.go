//go:build linux

package bench

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// ProcCPU is a process's CPU time, user and system together, to the nanosecond: the reading of
// the process's CPU-time clock (what clock_getcpuclockid(3) returns: the pid inverted, shifted
// by three bits, with the scheduler clock's number 2), which sums every thread the process ran,
// ended ones too. /proc/PID/stat (ProcUsage) holds the same sum in 10 ms ticks: a floor that
// spends 50 ms in a cell would be measured to 20%.
func ProcCPU(pid int) (time.Duration, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(int32(^pid)<<3|2, &ts); err != nil {
		return 0, fmt.Errorf("bench: cannot read the CPU clock of pid %d: %w", pid, err)
	}
	return time.Duration(ts.Nano()), nil
}
