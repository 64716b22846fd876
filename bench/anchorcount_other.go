//go:build !linux

package bench

import "errors"

// ReadProcCounters needs Linux's /proc.
func ReadProcCounters(pid int) (ProcCounters, error) {
	return ProcCounters{GC: -1}, errors.New("bench: process counters need Linux")
}
