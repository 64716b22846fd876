package testkit

import (
	"net"
	"reflect"
	"sync"
	"testing"

	"github.com/otlpgate/otlpgate/internal/listenlog"
)

// WaitAddrs returns once every named listener has been reported, in the order asked, however
// the output arrives; lines of listeners not asked for do not count.
func TestWaitAddrs(t *testing.T) {
	var mu sync.Mutex
	var out string
	log := func() string { mu.Lock(); defer mu.Unlock(); return out }
	write := func(s string) { mu.Lock(); out += s; mu.Unlock() }
	done := make(chan []string)
	go func() { done <- WaitAddrs(t, log, nil, listenlog.HTTP, listenlog.GRPC) }()
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
