package testkit

import (
	"os"
	"runtime"
	"testing"
)

// OpenFDs returns how many descriptors the process has open (the entries of /proc/self/fd, the
// one ReadDir itself opens included, in every count alike). Where there is no /proc (not
// Linux) it skips the test; on Linux a failure to read it fails the test.
func OpenFDs(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		if runtime.GOOS != "linux" {
			t.Skipf("cannot count descriptors on %s: %v", runtime.GOOS, err)
		}
		t.Fatalf("cannot count descriptors: %v", err)
	}
	return len(ents)
}
