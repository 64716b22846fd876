//go:build !race

package h2

import "testing"

func TestParseFramesAllocs(t *testing.T) {
	data := connectionBytes(t)
	if n, err := parseAll(data); err != nil || n != 11 {
		t.Fatalf("%d frames, err %v", n, err)
	}
	// Refusals are pre-made errors: an attacker's frames cost no allocation either.
	bad := raw(0x8, 0, 1, 0, 0, 0, 0)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := parseAll(data); err != nil {
			t.Fatal(err)
		}
		if _, err := parseAll(bad); err == nil {
			t.Fatal("a zero window increment passed")
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per connection's frames", allocs)
	}
}
