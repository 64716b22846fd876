package bytesize

import (
	"fmt"
	"strconv"
	"strings"
)

var units = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
	{"KB", 1000}, {"MB", 1000 * 1000}, {"GB", 1000 * 1000 * 1000},
	{"B", 1},
}

// Parse reads a size such as 4MiB, 512KiB, 2MB or 1000000, refusing negative numbers and
// sizes above limit.
func Parse(s string, limit int64) (int64, error) {
	s = strings.TrimSpace(s)
	num, mult := s, int64(1)
	for _, u := range units {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			num, mult = strings.TrimSpace(v), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("bad size %q (want e.g. 4MiB, 512KiB, 1000000)", s)
	}
	if n > limit/mult {
		return 0, fmt.Errorf("size %q above %d bytes", s, limit)
	}
	return n * mult, nil
}

// Format writes n with the largest binary unit that divides it exactly.
func Format(n int64) string {
	for i := 2; i >= 0; i-- { // GiB, MiB, KiB
		if u := units[i]; n >= u.mult && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}
