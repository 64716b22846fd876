package main

import (
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/otlpgate/otlpgate/client"
	"github.com/otlpgate/otlpgate/fastpath"
)

// With a spool, destinations retry without a budget: data on disk is never given up for it.
func TestSpoolConfigRetriesWithoutBudget(t *testing.T) {
	cfg := defaultConfig()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	registerFlags(fs, &cfg)
	if err := fs.Parse([]string{"-spool.dir", "/d", "-spool.sync", "none", "-dest", "name=a,endpoint=x:1"}); err != nil {
		t.Fatal(err)
	}
	if err := finishConfig(&cfg); err != nil {
		t.Fatal(err)
	}
	if got := allDests(t, cfg)[0].RetryMaxElapsed; got != 0 {
		t.Errorf("RetryMaxElapsed = %v with a spool, want 0 (no limit)", got)
	}
	if cfg.spool.Sync.String() != "none" || cfg.spool.Dir != "/d" {
		t.Errorf("spool config %+v", cfg.spool)
	}
}

// allDests is the destinations the gateway runs for cfg.
func allDests(t *testing.T, cfg config) []client.Config {
	t.Helper()
	d, err := cfg.gw.AllDestinations()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestFinishConfig(t *testing.T) {
	f := func(args []string, wantErr string) {
		t.Helper()
		cfg := defaultConfig()
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		registerFlags(fs, &cfg)
		if err := fs.Parse(args); err != nil {
			if wantErr == "" || !strings.Contains(err.Error(), wantErr) {
				t.Errorf("%v: parse: %v", args, err)
			}
			return
		}
		err := finishConfig(&cfg)
		switch {
		case wantErr == "" && err != nil:
			t.Errorf("%v: %v", args, err)
		case wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)):
			t.Errorf("%v: error %v, want one containing %q", args, err, wantErr)
		}
	}
	f(nil, "")
	f([]string{"-dest", "name=gw,endpoint=127.0.0.1:4317,protocol=otep,mode=stream,streams=4,window=64"}, "")
	f([]string{"-dest", "name=a,endpoint=x:1", "-dest", "name=a,endpoint=y:1"}, "two destinations are named")
	f([]string{"-dest", "name=a,endpoint=x:1,frobnicate=1"}, "frobnicate")
	f([]string{"-dest", "name=new,endpoint=x:1,spool-id=old", "-dest", "name=old,endpoint=y:1"}, "have the same spool-id")
	f([]string{"-dest", "name=a,endpoint=x:1,spool-id=old", "-dest", "name=b,endpoint=y:1,spool-id=old"}, "have the same spool-id")
	f([]string{"-dest", "name=new,endpoint=x:1,spool-id=old", "-dest", "name=b,endpoint=y:1"}, "")
	f([]string{"-queue.max-bytes", "64MiB", "-dest", "name=a,endpoint=x:1,queue-bytes=64MiB", "-dest", "name=b,endpoint=y:1"}, "must be below -queue.max-bytes")
	f([]string{"-queue.max-bytes", "1GiB", "-dest", "name=a,endpoint=x:1", "-dest", "name=b,endpoint=y:1"}, "")
	f([]string{"-dest", "name=gws,protocol=otep,mode=stream,resolver=static,endpoints=10.0.0.1:4317|10.0.0.2:4317,balance=trace_id"}, "")
	f([]string{"-dest", "name=gws,resolver=dns,endpoint=gateways:4317,resolve-interval=10s,eject-after=1m,balance=service"}, "")
	f([]string{"-dest", "name=gws,resolver=file,endpoints-file=/etc/otlpgate/gateways,balance=resource"}, "")
	f([]string{"-dest", "name=gws,resolver=file"}, "endpoints-file")
	f([]string{"-ack", "sometimes"}, "unknown ack mode")
	f([]string{"-grpc.scan-depth", "deep"}, "unknown scan depth")
	f([]string{"-uds.mode", "999"}, "bad -uds.mode")
	f([]string{"-batch.max-bytes", "2GiB"}, "exceeds queue max bytes")
	f([]string{"-shutdown.timeout", "0s"}, "must be positive")
	f([]string{"-kafka.default-metrics", "org.apache.kafka.,librdkafka."}, "")
	f([]string{"-http.listen", "nohost"}, "http: bad listen address")
	f([]string{"-http.cors.allowed-origins", "https://*.*.example.com"}, "bad CORS origin")
	f([]string{"-http.traces-path", "/v1/logs"}, "share the path")
	f([]string{"-http.tls.cert", "c.pem"}, "http: TLS needs both")
	f([]string{"-kafka.tls.cert", "c.pem"}, "kafka: TLS needs both")
	f([]string{"-kafka.tls.client-ca", "ca.pem"}, "kafka: a client CA (mTLS) needs a server certificate")
	f([]string{"-kafka.max-client-id-bytes", "0"}, "kafka: max client id bytes 0")
	f([]string{"-kafka.max-software-bytes", "40000"}, "kafka: max software bytes 40000")
	f([]string{"-kafka.max-instance-bytes", "1KiB"}, "kafka: max instance bytes 1024 below")
	f([]string{"-kafka.max-client-id-bytes", "64", "-kafka.max-software-bytes", "32", "-kafka.max-instance-bytes", "1MiB"}, "")
	f([]string{"-spool.dir", "/var/lib/otlpgate", "-spool.sync", "always", "-spool.full", "drop-oldest", "-dest", "name=a,endpoint=x:1"}, "")
	f([]string{"-spool.dir", "/d", "-spool.sync", "sometimes"}, "unknown sync mode")
	f([]string{"-spool.dir", "/d", "-spool.full", "shrug"}, "unknown full policy")
	f([]string{"-spool.dir", "/d", "-spool.segment-bytes", "64MiB", "-spool.max-bytes", "100MiB"},
		"-spool.max-bytes 100MiB is below two segments of -spool.segment-bytes 64MiB: raise -spool.max-bytes to 128MiB or more, or lower -spool.segment-bytes to 50MiB or less")
	f([]string{"-spool.dir", "/d", "-ack", "upstream"}, "cannot be combined with -spool.dir")
	f([]string{"-spool.dir", "/d", "-dest", "name=a,endpoint=x:1,retry-max-elapsed=1m"}, "retry-max-elapsed cannot be combined")
	f([]string{"-spool.sync", "sometimes"}, "") // not read while the spool is off
}

// -auth.token-file serves both network intakes unless one names its own; -grpc.scan-depth sets
// the depth of both; the CORS lists are split.
func TestSharedIntakeFlags(t *testing.T) {
	parse := func(args ...string) config {
		t.Helper()
		cfg := defaultConfig()
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		registerFlags(fs, &cfg)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		if err := finishConfig(&cfg); err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	c := parse("-auth.token-file", "/t", "-grpc.scan-depth", "resource", "-http.cors.allowed-origins", "https://a.test, *.b.test", "-http.cors.allowed-headers", "X-Tenant")
	if c.grpc.AuthTokenFile != "/t" || c.http.AuthTokenFile != "/t" || c.http.ScanDepth != fastpath.DepthResource ||
		len(c.http.CORSAllowedOrigins) != 2 || c.http.CORSAllowedOrigins[1] != "*.b.test" || c.http.CORSAllowedHeaders[0] != "X-Tenant" {
		t.Errorf("%+v", c.http)
	}
	c = parse("-auth.token-file", "/t", "-http.auth.token-file", "/h")
	if c.grpc.AuthTokenFile != "/t" || c.http.AuthTokenFile != "/h" {
		t.Errorf("grpc %q, http %q", c.grpc.AuthTokenFile, c.http.AuthTokenFile)
	}
	if c := parse("-grpc.stream-workers", "3"); c.grpc.StreamWorkers != 3 {
		t.Errorf("stream workers %d", c.grpc.StreamWorkers)
	}
	if c := parse(); c.grpc.StreamWorkers != 16 {
		t.Errorf("grpc defaults: %+v", c.grpc)
	}
	if c := parse(); c.http.Listen != "127.0.0.1:4318" || c.http.AuthTokenFile != "" || c.http.CORSAllowedOrigins != nil {
		t.Errorf("defaults: %+v", c.http)
	}
}

// A destination's queue defaults to the pipeline's whole budget when it is the only one, and to
// half of it when there are several; an explicit queue-bytes wins, with a warning when it could
// refuse acknowledged batches.
func TestDestinationQueueDefaults(t *testing.T) {
	parse := func(args ...string) config {
		t.Helper()
		cfg := defaultConfig()
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		registerFlags(fs, &cfg)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		if err := finishConfig(&cfg); err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	one := parse("-queue.max-bytes", "100MiB", "-dest", "name=a,endpoint=x:1")
	if q := allDests(t, one)[0].QueueBytes; q != 100<<20 || len(one.gw.Warnings()) != 0 {
		t.Errorf("single destination: queue %d, warnings %v", q, one.gw.Warnings())
	}
	two := parse("-queue.max-bytes", "100MiB", "-dest", "name=a,endpoint=x:1", "-dest", "name=b,endpoint=y:1")
	if allDests(t, two)[0].QueueBytes != 50<<20 || allDests(t, two)[1].QueueBytes != 50<<20 {
		t.Errorf("two destinations: %d, %d", allDests(t, two)[0].QueueBytes, allDests(t, two)[1].QueueBytes)
	}
	set := parse("-queue.max-bytes", "100MiB", "-dest", "name=a,endpoint=x:1,queue.bytes=10MiB")
	if allDests(t, set)[0].QueueBytes != 10<<20 || len(set.gw.Warnings()) != 1 {
		t.Errorf("explicit queue-bytes: %d, warnings %v", allDests(t, set)[0].QueueBytes, set.gw.Warnings())
	}
}

// The group-readable flags reach the spool's file system and the file destination; both are
// off by default.
func TestGroupReadableFlags(t *testing.T) {
	parse := func(args ...string) config {
		t.Helper()
		cfg := defaultConfig()
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		registerFlags(fs, &cfg)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	if c := parse(); c.spoolGroupReadable || c.file.GroupReadable {
		t.Errorf("group-readable by default: spool %v, file %v", c.spoolGroupReadable, c.file.GroupReadable)
	}
	if c := parse("-spool.group-readable", "-file.group-readable"); !c.spoolGroupReadable || !c.file.GroupReadable {
		t.Errorf("flags not applied: spool %v, file %v", c.spoolGroupReadable, c.file.GroupReadable)
	}
}
