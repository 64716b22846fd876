package main

import (
	"strings"
	"time"

	"github.com/otlpgate/otlpgate/internal/bytesize"
)

// byteSize is a flag value that accepts sizes with binary (KiB, MiB, GiB) or decimal (KB, MB,
// GB) suffixes, or a plain number of bytes.
type byteSize struct{ p *int64 }

func (b byteSize) String() string {
	if b.p == nil {
		return "0"
	}
	return bytesize.Format(*b.p)
}

func (b byteSize) Set(s string) error {
	n, err := bytesize.Parse(s, 1<<62)
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
	return bytesize.Format(int64(*b.p))
}

func (b intSize) Set(s string) error {
	n, err := bytesize.Parse(s, 1<<40)
	if err != nil {
		return err
	}
	*b.p = int(n)
	return nil
}

type int32Size struct{ p *int32 }

func (b int32Size) String() string {
	if b.p == nil {
		return "0"
	}
	return bytesize.Format(int64(*b.p))
}

func (b int32Size) Set(s string) error {
	n, err := bytesize.Parse(s, 1<<31-1)
	if err != nil {
		return err
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

// givenDuration is a duration flag that records whether it was given (on the command line or
// in the config file), for a default that depends on another flag.
type givenDuration struct {
	d     *time.Duration
	given *bool
}

func (g givenDuration) String() string {
	if g.d == nil {
		return "0s"
	}
	return g.d.String()
}

func (g givenDuration) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*g.d, *g.given = d, true
	return nil
}
