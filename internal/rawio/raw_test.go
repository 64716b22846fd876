//go:build !race

package rawio

import "testing"

// TestRawCalls runs the package's tests in the build where the calls are raw: under -race they
// go through package syscall (sys_race.go), so the race-free pass of make test is where the raw
// calls themselves are proven.
func TestRawCalls(t *testing.T) {
	t.Run("ReadWriteBothWays", TestReadWriteBothWays)
	t.Run("WriteBuffersInOrder", TestWriteBuffersInOrder)
	t.Run("EndsAndErrorsAsTheSocket", TestEndsAndErrorsAsTheSocket)
	t.Run("CloseWakesABlockedRead", TestCloseWakesABlockedRead)
	t.Run("UnixSocket", TestUnixSocket)
}
