package client

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"time"
)

// HostResolver looks up the addresses of a host: net.DefaultResolver in production, a fake in
// tests, so that resolver=dns is tested without a network.
type HostResolver interface {
	LookupHost(ctx context.Context, host string) ([]string, error)
}

// resolver yields the backends of a Fleet: a sorted, duplicate-free list of host:port.
// force asks for a fresh answer even when nothing seems changed (SIGHUP). Called by one
// goroutine at a time (the Fleet serialises resolutions).
type resolver interface {
	resolve(ctx context.Context, force bool) ([]string, error)
}

func newResolver(cfg Config) (resolver, error) {
	switch cfg.Resolver {
	case ResolverStatic:
		return staticResolver(normalize(cfg.Endpoints)), nil
	case ResolverDNS:
		host, port, err := net.SplitHostPort(cfg.Endpoint)
		if err != nil {
			return nil, err
		}
		lk := cfg.Lookup
		if lk == nil {
			lk = net.DefaultResolver
		}
		return &dnsResolver{host: host, port: port, lookup: lk}, nil
	case ResolverFile:
		return &fileResolver{path: cfg.EndpointsFile}, nil
	}
	return nil, fmt.Errorf("client: resolver %q", cfg.Resolver)
}

type staticResolver []string

func (s staticResolver) resolve(context.Context, bool) ([]string, error) { return s, nil }

// dnsResolver asks for the A and AAAA records of host every time.
type dnsResolver struct {
	host, port string
	lookup     HostResolver
}

func (r *dnsResolver) resolve(ctx context.Context, _ bool) ([]string, error) {
	ips, err := r.lookup.LookupHost(ctx, r.host)
	if err != nil {
		return nil, fmt.Errorf("cannot resolve %s: %w", r.host, err)
	}
	out := make([]string, 0, len(ips))
	for _, ip := range ips {
		out = append(out, net.JoinHostPort(ip, r.port))
	}
	return normalize(out), nil
}

// fileResolver re-reads its file when its modification time or size changed, or when forced.
type fileResolver struct {
	path string
	mod  time.Time
	size int64
	last []string
	read bool
}

func (r *fileResolver) resolve(_ context.Context, force bool) ([]string, error) {
	st, err := os.Stat(r.path)
	if err != nil {
		return nil, fmt.Errorf("cannot read endpoints-file: %w", err)
	}
	if r.read && !force && st.ModTime().Equal(r.mod) && st.Size() == r.size {
		return r.last, nil
	}
	b, err := os.ReadFile(r.path)
	if err != nil {
		return nil, fmt.Errorf("cannot read endpoints-file: %w", err)
	}
	addrs, err := parseEndpoints(b)
	if err != nil {
		return nil, fmt.Errorf("endpoints-file %s: %w", r.path, err)
	}
	r.mod, r.size, r.last, r.read = st.ModTime(), st.Size(), addrs, true
	return addrs, nil
}

// parseEndpoints reads one host:port per line; blank lines and lines starting with # are
// skipped. One bad line rejects the file: a half-read list would move keys for nothing.
func parseEndpoints(b []byte) ([]string, error) {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if _, _, err := net.SplitHostPort(line); err != nil {
			return nil, fmt.Errorf("line %d: %q is not host:port", n, line)
		}
		out = append(out, line)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return normalize(out), nil
}

// normalize sorts addrs and drops repeats, so that equal sets compare equal.
func normalize(addrs []string) []string {
	out := slices.Clone(addrs)
	slices.Sort(out)
	return slices.Compact(out)
}
