package testkit

import (
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/otlpgate/otlpgate/internal/freeport"
)

// Listener names as otlpgate's start log reports them ("<name> listening" addr=...), for
// WaitAddrs and ListenAddrs.
const (
	ListenGRPC  = "grpc intake"
	ListenHTTP  = "http intake"
	ListenAdmin = "admin"
	ListenKafka = "kafka telemetry"
	ListenPprof = "pprof"
)

// ListenAddrs returns the bound address of every TCP listener that the log text of an otlpgate
// process reports, keyed by listener name. It reads the text format (msg="grpc intake
// listening" addr=127.0.0.1:41234) and the JSON format of -log.format; other lines are ignored.
// A name reported twice keeps its last address.
func ListenAddrs(log string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(log, "\n") {
		if name, addr, ok := listenLine(line); ok {
			out[name] = addr
		}
	}
	return out
}

// listenLine parses one "<name> listening" log line.
func listenLine(line string) (name, addr string, ok bool) {
	const suffix = " listening"
	if strings.HasPrefix(line, "{") {
		var rec struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal([]byte(line), &rec) != nil || !strings.HasSuffix(rec.Msg, suffix) || rec.Addr == "" {
			return "", "", false
		}
		return strings.TrimSuffix(rec.Msg, suffix), rec.Addr, true
	}
	_, rest, found := strings.Cut(line, ` msg="`)
	if !found {
		return "", "", false
	}
	msg, rest, found := strings.Cut(rest, `"`)
	if !found || !strings.HasSuffix(msg, suffix) {
		return "", "", false
	}
	_, rest, found = strings.Cut(rest, " addr=")
	if !found {
		return "", "", false
	}
	addr, _, _ = strings.Cut(rest, " ")
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return "", "", false
	}
	return strings.TrimSuffix(msg, suffix), addr, true
}

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
		got := ListenAddrs(log())
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
			if got := ListenAddrs(log()); len(got) >= len(names) && hasAll(got, names) {
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
