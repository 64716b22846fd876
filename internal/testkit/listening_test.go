package testkit

import (
	"net"
	"reflect"
	"sync"
	"testing"
)

// The start log of an otlpgate process, text and JSON, as it is written: the parser finds each
// listener's bound address and ignores the other lines (the UDS intake says "listening" with a
// socket, not an addr).
func TestListenAddrs(t *testing.T) {
	text := `time=2026-11-26T04:05:41.295Z level=INFO msg="otlpgate starting" gomaxprocs=2 go=go1.26.8
time=2026-11-26T04:05:41.296Z level=INFO msg="admin listening" addr=127.0.0.1:40001
time=2026-11-26T04:05:41.296Z level=INFO msg="pprof listening" addr=127.0.0.1:44133
time=2026-11-26T04:05:41.296Z level=INFO msg="grpc intake listening" addr=127.0.0.1:42643 tls=false mtls=false
time=2026-11-26T04:05:41.296Z level=INFO msg="http intake listening" addr=[::1]:38133 tls=false mtls=false cors=false
time=2026-11-26T04:05:41.296Z level=INFO msg="kafka telemetry listening" addr=127.0.0.1:38439 subscriptions=1
time=2026-11-26T04:05:41.297Z level=INFO msg=listening intake=uds socket=/tmp/s mode=-rw-rw----
time=2026-11-26T04:05:41.297Z level=ERROR msg="grpc intake listening" addr=notanaddress
`
	want := map[string]string{ListenAdmin: "127.0.0.1:40001", ListenPprof: "127.0.0.1:44133", ListenGRPC: "127.0.0.1:42643",
		ListenHTTP: "[::1]:38133", ListenKafka: "127.0.0.1:38439"}
	if got := ListenAddrs(text); !reflect.DeepEqual(got, want) {
		t.Errorf("text: got %v, want %v", got, want)
	}
	js := `{"time":"2026-11-26T04:05:41.295Z","level":"INFO","msg":"otlpgate starting"}
{"time":"2026-11-26T04:05:41.296Z","level":"INFO","msg":"grpc intake listening","addr":"127.0.0.1:42643","tls":false}
{"time":"2026-11-26T04:05:41.296Z","level":"INFO","msg":"listening","intake":"uds","socket":"/tmp/s"}
{"time":"2026-11-26T04:05:41.296Z","level":"INFO","msg":"admin listening","addr":"127.0.0.1:40001"}`
	want = map[string]string{ListenGRPC: "127.0.0.1:42643", ListenAdmin: "127.0.0.1:40001"}
	if got := ListenAddrs(js); !reflect.DeepEqual(got, want) {
		t.Errorf("json: got %v, want %v", got, want)
	}
}

// WaitAddrs returns once every named listener has been reported, in the order asked, however
// the output arrives; lines of listeners not asked for do not count.
func TestWaitAddrs(t *testing.T) {
	var mu sync.Mutex
	var out string
	log := func() string { mu.Lock(); defer mu.Unlock(); return out }
	write := func(s string) { mu.Lock(); out += s; mu.Unlock() }
	done := make(chan []string)
	go func() { done <- WaitAddrs(t, log, nil, ListenHTTP, ListenGRPC) }()
	write(`level=INFO msg="grpc intake listening" addr=127.0.0.1:1`)
	write(" tls=false\nlevel=INFO msg=\"admin listening\" addr=127.0.0.1:3\n")
	write("level=INFO msg=\"http intake listening\" addr=127.0.0.1:2\n")
	if got, want := <-done, []string{"127.0.0.1:2", "127.0.0.1:1"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// FreeAddrs never gives one port twice in a process, within a call or across calls.
func TestFreeAddrs(t *testing.T) {
	seen := map[string]bool{}
	for range 20 {
		for _, a := range FreeAddrs(t, 5) {
			if seen[a] {
				t.Fatalf("port %s handed out twice", a)
			}
			seen[a] = true
			if _, _, err := net.SplitHostPort(a); err != nil {
				t.Fatal(err)
			}
		}
	}
}
