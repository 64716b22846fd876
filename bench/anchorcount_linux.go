//go:build linux

package bench

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ReadProcCounters reads a process's cumulative kernel counters: read- and write-class
// system calls from /proc/PID/io, and context switches summed over the threads in
// /proc/PID/task. Reading them costs the process nothing, and they are exact; a thread that
// ended takes its context switches with it (Go's runtime rarely ends one). GC is left at -1:
// it is the caller's to fill from the process's own metrics.
func ReadProcCounters(pid int) (ProcCounters, error) {
	c := ProcCounters{GC: -1}
	io, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return c, err
	}
	for line := range strings.Lines(string(io)) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ": ")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case "syscr":
			c.SysCR = n
		case "syscw":
			c.SysCW = n
		}
	}
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	if err != nil {
		return c, err
	}
	for _, t := range tasks {
		f, err := os.Open(t)
		if err != nil {
			continue // the thread ended since the listing
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			if !ok {
				continue
			}
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			switch k {
			case "voluntary_ctxt_switches":
				c.Voluntary += n
			case "nonvoluntary_ctxt_switches":
				c.Involuntary += n
			}
		}
		f.Close()
		c.Threads++
	}
	return c, nil
}
