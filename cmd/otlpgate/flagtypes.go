package main

import (
	"fmt"
	"strconv"
	"strings"
)

// byteSize is a flag value that accepts sizes with binary (KiB, MiB, GiB) or decimal (KB, MB,
// GB) suffixes, or a plain number of bytes.
type byteSize struct{ p *int64 }

var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
	{"KB", 1000}, {"MB", 1000 * 1000}, {"GB", 1000 * 1000 * 1000},
	{"B", 1},
}

func parseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("bad size %q (want e.g. 4MiB, 512KiB, 1000000)", s)
	}
	if n > (1<<62)/mult {
		return 0, fmt.Errorf("size %q too large", s)
	}
	return n * mult, nil
}

func formatSize(n int64) string {
	for _, u := range []struct {
		s string
		m int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.m && n%u.m == 0 {
			return strconv.FormatInt(n/u.m, 10) + u.s
		}
	}
	return strconv.FormatInt(n, 10)
}

func (b byteSize) String() string {
	if b.p == nil {
		return "0"
	}
	return formatSize(*b.p)
}

func (b byteSize) Set(s string) error {
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	*b.p = n
	return nil
}

// intSize and int32Size adapt byteSize to fields of other widths.
type intSize struct{ p *int }

func (b intSize) String() string {
	if b.p == nil {
		return "0"
	}
	return formatSize(int64(*b.p))
}

func (b intSize) Set(s string) error {
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	if n > int64(^uint32(0)>>1)*4 {
		return fmt.Errorf("size %q too large", s)
	}
	*b.p = int(n)
	return nil
}

type int32Size struct{ p *int32 }

func (b int32Size) String() string {
	if b.p == nil {
		return "0"
	}
	return formatSize(int64(*b.p))
}

func (b int32Size) Set(s string) error {
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	if n > int64(^uint32(0)>>1) {
		return fmt.Errorf("size %q exceeds 2GiB", s)
	}
	*b.p = int32(n)
	return nil
}

// multiFlag collects every occurrence of a repeated flag.
type multiFlag struct{ p *[]string }

func (m multiFlag) String() string {
	if m.p == nil {
		return ""
	}
	return strings.Join(*m.p, " ")
}

func (m multiFlag) Set(s string) error {
	*m.p = append(*m.p, s)
	return nil
}
