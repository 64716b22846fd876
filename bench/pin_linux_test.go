//go:build linux

package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A child started pinned runs on the CPU it was given from the start, threads it started
// included, and the thread that started it gets its own CPUs back.
func TestStartPinnedProc(t *testing.T) {
	cpus, err := AllowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	if len(cpus) < 2 {
		t.Skipf("one CPU (%v): nothing to pin apart", cpus)
	}
	last := cpus[len(cpus)-1]
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// A shell that starts a child of its own: the child's affinity comes from the shell's.
	p, err := StartPinnedProc("sh", "/bin/sh", []string{"-c", "sleep 30 & wait"}, nil, filepath.Join(t.TempDir(), "sh.log"), []int{last})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	if got, err := ProcCPUs(p.Pid()); err != nil || got != strconv.Itoa(last) {
		t.Fatalf("child on CPUs %q (%v), want %d", got, err, last)
	}
	var sleepPid int
	for deadline := time.Now().Add(10 * time.Second); sleepPid == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(p.Pid()) + "/task/" + strconv.Itoa(p.Pid()) + "/children")
		sleepPid, _ = strconv.Atoi(string(bytes.TrimSpace(b)))
	}
	if sleepPid == 0 {
		t.Fatal("the shell never started its child")
	}
	defer syscall.Kill(sleepPid, syscall.SIGKILL) // the shell's end would leave it running
	if got, err := ProcCPUs(sleepPid); err != nil || got != strconv.Itoa(last) {
		t.Fatalf("grandchild on CPUs %q (%v), want %d", got, err, last)
	}
	var own unix.CPUSet
	if err := unix.SchedGetaffinity(0, &own); err != nil {
		t.Fatal(err)
	}
	for _, c := range cpus {
		if !own.IsSet(c) {
			t.Fatalf("the starting thread lost CPU %d of %v", c, cpus)
		}
	}
}
