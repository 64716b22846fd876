package testkit

import (
	"testing"
	"time"

	"github.com/otlpgate/otlpgate/internal/freeport"
	"github.com/otlpgate/otlpgate/internal/listenlog"
)

// WaitAddrs waits until the log of a child otlpgate reports every named listener bound and
// returns their addresses in the order of names. log returns the child's output so far; exited
// is closed when the child has exited (nil if the caller does not know). The test fails, with
// the log, if the child exits first or WaitTimeout passes.
//
// Children are started with their listeners on 127.0.0.1:0 and the test reads the ports here:
// a port chosen by the test, released and handed to a child could be taken by another test
// binary of the same `go test ./...` before the child binds it.
func WaitAddrs(t testing.TB, log func() string, exited <-chan struct{}, names ...string) []string {
	t.Helper()
	deadline := time.Now().Add(WaitTimeout)
	nap := 100 * time.Microsecond
	for {
		got := listenlog.Addrs(log())
		out := make([]string, 0, len(names))
		for _, n := range names {
			if a, ok := got[n]; ok {
				out = append(out, a)
			}
		}
		if len(out) == len(names) {
			return out
		}
		select {
		case <-exited:
			// The output may have been written just before the exit: look once more.
			if got := listenlog.Addrs(log()); len(got) >= len(names) && hasAll(got, names) {
				continue
			}
			t.Fatalf("the process exited before listening on %v:\n%s", names, log())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for listeners %v:\n%s", WaitTimeout, names, log())
		}
		time.Sleep(nap)
		nap = min(2*nap, 10*time.Millisecond)
	}
}

func hasAll(got map[string]string, names []string) bool {
	for _, n := range names {
		if _, ok := got[n]; !ok {
			return false
		}
	}
	return true
}

// FreeAddrs returns n distinct loopback addresses that nothing listened on when it returned,
// none handed out before by FreeAddrs in this process. It holds every chosen listener until all
// n are chosen, so that the kernel cannot give one port twice within a call.
//
// It remains for what cannot be told to bind 127.0.0.1:0 and report the port: third-party
// children (nginx, haproxy, the Collector) whose configuration names a port, and upstreams a
// test starts only later, after otlpgate has been pointed at them while they are down. Between
// the return and that bind another process can still take the port; otlpgate children never
// use it (see WaitAddrs).
func FreeAddrs(t testing.TB, n int) []string {
	t.Helper()
	as, err := freeport.Addrs(n)
	if err != nil {
		t.Fatal(err)
	}
	return as
}

// FreeAddr is FreeAddrs for one address.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return FreeAddrs(t, 1)[0]
}
