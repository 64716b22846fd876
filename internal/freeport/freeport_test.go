package freeport

import (
	"net"
	"testing"
)

// Many calls in one process never hand out one port twice, and each port was free: it can be
// bound at once.
func TestAddrsDistinctAndFree(t *testing.T) {
	seen := map[string]bool{}
	for range 200 {
		as, err := Addrs(3)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range as {
			if seen[a] {
				t.Fatalf("%s handed out twice", a)
			}
			seen[a] = true
		}
	}
	a, err := Addr()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", a)
	if err != nil {
		t.Fatalf("the chosen %s cannot be bound: %v", a, err)
	}
	ln.Close()
}
