package main

import (
	"flag"
	"strings"
	"testing"
)

// The scan depth defaults to full, the one depth that keeps a malformed request out of shared
// batches, and -help says what the shallower ones cost: an operator who picks them for speed
// must read that one client's bad request can lose the batch it joins.
func TestScanDepthHelp(t *testing.T) {
	cfg := defaultConfig()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	registerFlags(fs, &cfg)
	f := fs.Lookup("grpc.scan-depth")
	if f == nil {
		t.Fatal("no -grpc.scan-depth flag")
	}
	if f.DefValue != "full" {
		t.Fatalf("default %q, want full", f.DefValue)
	}
	for _, want := range []string{"Collector's decoder", "resource and top", "refuses that whole batch", `reason="invalid"`} {
		if !strings.Contains(f.Usage, want) {
			t.Fatalf("-grpc.scan-depth help does not say %q: %s", want, f.Usage)
		}
	}
}
