package main

import "testing"

func TestParseSize(t *testing.T) {
	f := func(in string, want int64, ok bool) {
		t.Helper()
		got, err := parseSize(in)
		if (err == nil) != ok || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d, ok=%v", in, got, err, want, ok)
		}
	}
	f("4MiB", 4<<20, true)
	f("512KiB", 512<<10, true)
	f("1GiB", 1<<30, true)
	f("2MB", 2_000_000, true)
	f("1000", 1000, true)
	f("10B", 10, true)
	f(" 3 MiB ", 3<<20, true)
	f("-1", 0, false)
	f("MiB", 0, false)
	f("4XB", 0, false)
	f("99999999999GiB", 0, false)
	for _, n := range []int64{0, 1, 1024, 4 << 20, 3 << 30, 1000} {
		if got, err := parseSize(formatSize(n)); err != nil || got != n {
			t.Errorf("round trip of %d: %d, %v", n, got, err)
		}
	}
}
