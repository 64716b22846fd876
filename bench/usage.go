package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Usage is CPU time consumed: user plus system, as the kernel accounts it.
type Usage struct {
	User, Sys time.Duration
}

// Total is user plus system time.
func (u Usage) Total() time.Duration { return u.User + u.Sys }

// Sub is the usage between two readings.
func (u Usage) Sub(v Usage) Usage { return Usage{u.User - v.User, u.Sys - v.Sys} }

// SelfUsage reads this process's CPU time (all threads).
func SelfUsage() Usage {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return Usage{}
	}
	return Usage{
		User: time.Duration(ru.Utime.Nano()),
		Sys:  time.Duration(ru.Stime.Nano()),
	}
}

// clockTicks is USER_HZ, the unit of the times in /proc/PID/stat; 100 on every Linux
// architecture Go supports.
const clockTicks = 100

// ProcUsage reads another process's CPU time from /proc/PID/stat.
func ProcUsage(pid int) (Usage, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Usage{}, err
	}
	// The command name (field 2) may hold spaces and parentheses: the fields after it start
	// after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return Usage{}, fmt.Errorf("bench: malformed /proc/%d/stat", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return Usage{}, fmt.Errorf("bench: short /proc/%d/stat", pid)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return Usage{}, fmt.Errorf("bench: bad times in /proc/%d/stat", pid)
	}
	return Usage{
		User: time.Duration(ut) * time.Second / clockTicks,
		Sys:  time.Duration(st) * time.Second / clockTicks,
	}, nil
}

// PeakRSS is a process's resident-set high-water mark (VmHWM) in bytes.
func PeakRSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("bench: bad VmHWM %q", v)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("bench: no VmHWM for pid %d", pid)
}
