package fastpath

import (
	"syscall"
	"time"
	"unsafe"
)

// threadCPU returns the CPU time of the calling thread (CLOCK_THREAD_CPUTIME_ID): on a shared
// machine the wall time of a benchmark counts the time other processes held the core, its
// thread's CPU time does not.
func threadCPU() time.Duration {
	const clockThreadCPUTime = 3
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return 0
	}
	return time.Duration(ts.Nano())
}
