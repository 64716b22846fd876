package bytesize

import "testing"

func TestParse(t *testing.T) {
	f := func(in string, limit, want int64, ok bool) {
		t.Helper()
		got, err := Parse(in, limit)
		if (err == nil) != ok || got != want {
			t.Errorf("Parse(%q, %d) = %d, %v; want %d, ok=%v", in, limit, got, err, want, ok)
		}
	}
	const big = 1 << 62
	f("4MiB", big, 4<<20, true)
	f("512KiB", big, 512<<10, true)
	f("1GiB", big, 1<<30, true)
	f("2MB", big, 2_000_000, true)
	f("3KB", big, 3000, true)
	f("1000", big, 1000, true)
	f("10B", big, 10, true)
	f(" 3 MiB ", big, 3<<20, true)
	f("-1", big, 0, false)
	f("MiB", big, 0, false)
	f("4XB", big, 0, false)
	f("5TiB", big, 0, false)
	f("99999999999GiB", big, 0, false)
	f("2GiB", 1<<31-1, 0, false)
	f("1GiB", 1<<31-1, 1<<30, true)
}

func TestFormatRoundTrip(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{{0, "0"}, {1, "1"}, {1000, "1000"}, {1024, "1KiB"}, {4 << 20, "4MiB"}, {3 << 30, "3GiB"}, {1536, "1536"}, {1536 << 10, "1536KiB"}} {
		got := Format(c.n)
		if got != c.want {
			t.Errorf("Format(%d) = %q, want %q", c.n, got, c.want)
		}
		if back, err := Parse(got, 1<<62); err != nil || back != c.n {
			t.Errorf("Parse(Format(%d)) = %d, %v", c.n, back, err)
		}
	}
}
