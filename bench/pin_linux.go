//go:build linux

package bench

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// AllowedCPUs returns the processors this process may run on, in increasing order.
func AllowedCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("bench: cannot read this process's CPU affinity: %w", err)
	}
	var out []int
	for c := range len(set) * 64 {
		if set.IsSet(c) {
			out = append(out, c)
		}
	}
	return out, nil
}

func cpuSet(cpus []int) (unix.CPUSet, error) {
	var set unix.CPUSet
	for _, c := range cpus {
		if c < 0 || c >= len(set)*64 {
			return set, fmt.Errorf("bench: no CPU %d", c)
		}
		set.Set(c)
	}
	if set.Count() == 0 {
		return set, errors.New("bench: an empty CPU set")
	}
	return set, nil
}

// PinSelf restricts every thread of this process to cpus. A thread started later inherits the
// restriction from the thread that starts it, so one that a pass misses because it started
// during the pass is caught by the second.
func PinSelf(cpus []int) error {
	set, err := cpuSet(cpus)
	if err != nil {
		return err
	}
	for range 2 {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return err
		}
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil {
				continue
			}
			// A thread that ended since the listing is no error.
			if err := unix.SchedSetaffinity(tid, &set); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("bench: cannot pin thread %d: %w", tid, err)
			}
		}
	}
	return nil
}

// StartPinnedProc is StartProc with the child held to cpus from its first instruction on. A
// child inherits the affinity of the thread that forks it, and os/exec forks on the calling
// goroutine's thread: that thread is locked and pinned to cpus for the fork, then given its
// own set back. Pinning the child after it started would miss the threads it started first.
func StartPinnedProc(name, bin string, args, env []string, logPath string, cpus []int) (*Proc, error) {
	set, err := cpuSet(cpus)
	if err != nil {
		return nil, err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var own unix.CPUSet
	if err := unix.SchedGetaffinity(0, &own); err != nil {
		return nil, fmt.Errorf("bench: cannot read the thread's CPU affinity: %w", err)
	}
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("bench: cannot pin to CPUs %v: %w", cpus, err)
	}
	p, err := StartProc(name, bin, args, env, logPath)
	if rerr := unix.SchedSetaffinity(0, &own); rerr != nil {
		if p != nil {
			p.Stop()
		}
		return nil, fmt.Errorf("bench: cannot restore the thread's CPU affinity: %w", rerr)
	}
	return p, err
}

// ProcCPUs is the list of processors a process may run on, as the kernel writes it in
// /proc/PID/status (Cpus_allowed_list: "1", "0-3,6").
func ProcCPUs(pid int) (string, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("bench: no Cpus_allowed_list for pid %d", pid)
}
