package client

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeDNS answers LookupHost from a table the test changes.
type fakeDNS struct {
	mu    sync.Mutex
	addrs map[string][]string
	err   error
	calls int
}

func (f *fakeDNS) LookupHost(_ context.Context, host string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	return f.addrs[host], nil
}

func (f *fakeDNS) set(host string, addrs []string, err error) {
	f.mu.Lock()
	f.addrs[host], f.err = addrs, err
	f.mu.Unlock()
}

// resolver=dns: A and AAAA answers become host:port backends (IPv6 bracketed), re-resolved
// on Reload and every resolve-interval; a failed lookup keeps the current set.
func TestFleetDNSResolver(t *testing.T) {
	dns := &fakeDNS{addrs: map[string][]string{"gateways.internal": {"10.0.0.2", "10.0.0.1", "fd00::1"}}}
	cfg := fleetConfig(t, "fleet_dns")
	cfg.Resolver, cfg.Endpoint, cfg.Lookup = ResolverDNS, "gateways.internal:4317", dns
	cfg.ResolveInterval = time.Hour
	f, err := NewFleet(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.Start()
	defer f.Shutdown(context.Background())
	want := []string{"10.0.0.1:4317", "10.0.0.2:4317", "[fd00::1]:4317"}
	if got := f.Backends(); !slices.Equal(got, want) {
		t.Fatalf("backends %v, want %v", got, want)
	}
	dns.set("gateways.internal", []string{"10.0.0.3", "10.0.0.1"}, nil)
	if err := f.Reload(); err != nil {
		t.Fatal(err)
	}
	want = []string{"10.0.0.1:4317", "10.0.0.3:4317"}
	if got := f.Backends(); !slices.Equal(got, want) {
		t.Fatalf("backends after the change %v, want %v", got, want)
	}
	dns.set("gateways.internal", nil, errors.New("SERVFAIL"))
	if err := f.Reload(); err == nil || !strings.Contains(err.Error(), "SERVFAIL") {
		t.Fatalf("reload with a failing lookup: %v", err)
	}
	if got := f.Backends(); !slices.Equal(got, want) {
		t.Fatalf("backends after a failed lookup %v, want %v kept", got, want)
	}
}

// The periodic re-resolution runs every resolve-interval without a Reload.
func TestFleetDNSInterval(t *testing.T) {
	dns := &fakeDNS{addrs: map[string][]string{"gw": {"10.0.0.1"}}}
	cfg := fleetConfig(t, "fleet_dns_interval")
	cfg.Resolver, cfg.Endpoint, cfg.Lookup = ResolverDNS, "gw:4317", dns
	cfg.ResolveInterval = 20 * time.Millisecond
	f, err := NewFleet(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.Start()
	defer f.Shutdown(context.Background())
	dns.set("gw", []string{"10.0.0.1", "10.0.0.9"}, nil)
	for deadline := time.Now().Add(waitFor); len(f.Backends()) != 2 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if got, want := f.Backends(), []string{"10.0.0.1:4317", "10.0.0.9:4317"}; !slices.Equal(got, want) {
		t.Fatalf("backends %v, want %v", got, want)
	}
}

func TestEndpointsFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "eps")
	r := &fileResolver{path: path}
	if _, err := r.resolve(context.Background(), false); err == nil {
		t.Fatal("a missing file resolved")
	}
	os.WriteFile(path, []byte("# fleet\n\nb:2\n a:1 \nb:2\n"), 0o600)
	got, err := r.resolve(context.Background(), false)
	if err != nil || !slices.Equal(got, []string{"a:1", "b:2"}) {
		t.Fatalf("got %v, %v", got, err)
	}
	os.WriteFile(path, []byte("a:1\nnot an address\n"), 0o600)
	if _, err := r.resolve(context.Background(), true); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("a bad line: %v", err)
	}
}

func TestParseFleetKeys(t *testing.T) {
	c, err := ParseDest("name=gws,resolver=static,endpoints=10.0.0.1:4317|10.0.0.2:4317,balance=service,eject-after=10s,resolve-interval=1s,streams=4", DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if c.Resolver != ResolverStatic || !slices.Equal(c.Endpoints, []string{"10.0.0.1:4317", "10.0.0.2:4317"}) ||
		c.Balance != "service" || c.EjectAfter != 10*time.Second || c.ResolveInterval != time.Second || c.Streams != 4 {
		t.Fatalf("parsed %+v", c)
	}
	for spec, want := range map[string]string{
		"name=x,resolver=static":                               "resolver=static takes endpoints",
		"name=x,resolver=dns,endpoints=a:1":                    "resolver=dns takes endpoint",
		"name=x,resolver=file":                                 "resolver=file takes endpoints-file",
		"name=x,resolver=zk,endpoint=a:1":                      "resolver \"zk\"",
		"name=x,resolver=static,endpoints=a:1,balance=span_id": "balance \"span_id\"",
		"name=x,endpoint=a:1,endpoints=b:1":                    "need resolver",
		"name=x,resolver=static,endpoints=nope":                "not host:port",
	} {
		if _, err := ParseDest(spec, DefaultConfig()); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", spec, err, want)
		}
	}
	if _, err := New(c, nil); err == nil {
		t.Error("New accepted a fleet configuration")
	}
}
