//go:build !linux

package bench

import (
	"errors"
	"runtime"
)

// errNoPinning: processor affinity is set through Linux system calls only.
var errNoPinning = errors.New("bench: pinning to CPUs needs Linux")

// AllowedCPUs returns the processors this process may run on: without affinity calls, all.
func AllowedCPUs() ([]int, error) {
	out := make([]int, runtime.NumCPU())
	for i := range out {
		out[i] = i
	}
	return out, nil
}

// PinSelf is not available outside Linux.
func PinSelf([]int) error { return errNoPinning }

// StartPinnedProc is not available outside Linux.
func StartPinnedProc(string, string, []string, []string, string, []int) (*Proc, error) {
	return nil, errNoPinning
}

// ProcCPUs is not available outside Linux.
func ProcCPUs(int) (string, error) { return "", errNoPinning }
