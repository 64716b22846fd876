// Package freeport chooses loopback ports for children that cannot be told to bind
// 127.0.0.1:0 and report the port they got: nginx and haproxy, whose configurations name a
// port; the Collector peer, configured through its environment; otlpbench's forward and relay,
// whose -listen a run names; and upstreams a test points otlpgate at while they are down and
// starts later. otlpgate itself is never given one: it binds 127.0.0.1:0 and logs the address
// (bench.AnyPort, testkit.WaitAddrs).
//
// Between the return and the child's bind another process can take the port; the child then
// fails to start and its log says so. What this package does prevent is the same process
// handing one port out twice: the kernel may offer a port released a moment ago again, and two
// children of one run must never be given the same one.
package freeport

import (
	"errors"
	"net"
	"sync"
)

// ErrExhausted: every port the kernel offered had been handed out before.
var ErrExhausted = errors.New("freeport: no loopback port that was not handed out before")

// handedOut holds every port Addrs returned in this process.
var handedOut struct {
	sync.Mutex
	ports map[string]bool
}

// Addrs returns n distinct loopback addresses nothing listened on when it returned, none of
// them handed out before in this process. Each chosen port stays bound until all n are chosen,
// so that the kernel cannot offer one twice within a call.
func Addrs(n int) ([]string, error) {
	handedOut.Lock()
	defer handedOut.Unlock()
	if handedOut.ports == nil {
		handedOut.ports = map[string]bool{}
	}
	var held []net.Listener
	defer func() {
		for _, ln := range held {
			ln.Close()
		}
	}()
	out := make([]string, 0, n)
	// The kernel seldom repeats a port soon; the bound only stops a broken loop.
	for tries := 0; len(out) < n; tries++ {
		if tries > 100*n+100 {
			return nil, ErrExhausted
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		held = append(held, ln)
		if a := ln.Addr().String(); !handedOut.ports[a] {
			handedOut.ports[a] = true
			out = append(out, a)
		}
	}
	return out, nil
}

// Addr is Addrs for one address.
func Addr() (string, error) {
	a, err := Addrs(1)
	if err != nil {
		return "", err
	}
	return a[0], nil
}
