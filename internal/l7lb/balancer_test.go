package l7lb

import (
	"errors"
	"os"
	"testing"
)

// kinds are the balancers under test.
var kinds = []struct {
	name  string
	start func(deployDir, dir string, backends []string, opts Options) (Balancer, error)
}{
	{"nginx", StartNginx},
	{"haproxy", StartHAProxy},
}

// startBalancer starts a balancer of kind k with the deployed configuration; a missing binary
// skips the test, except under CI=true, where it fails it: CI installs both.
func startBalancer(t *testing.T, k int, backends []string, opts Options) Balancer {
	t.Helper()
	lb, err := kinds[k].start("../../deploy", t.TempDir(), backends, opts)
	if errors.Is(err, ErrNoTool) {
		if os.Getenv("CI") != "" {
			t.Fatalf("%v; .ci/run installs it", err)
		}
		t.Skipf("%v; skipping the balancer test", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lb.Stop)
	return lb
}
