package main

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/otlpgate/otlpgate/internal/testkit"
)

func TestDescriptorWarning(t *testing.T) {
	cfg := defaultConfig()
	cfg.grpc.Listen, cfg.http.Listen, cfg.kafka.Listen, cfg.uds.Listen = "a:1", "a:2", "", ""
	cfg.grpc.MaxConnections, cfg.http.MaxConnections, cfg.kafka.MaxConnections = 1000, 500, 100000
	if got := descriptorDemand(&cfg); got != 1000+500+descriptorReserve {
		t.Errorf("demand %d with kafka and uds off", got)
	}
	if w := descriptorWarning(&cfg, 1000+500+descriptorReserve); w != "" {
		t.Errorf("warned at exactly the limit: %s", w)
	}
	w := descriptorWarning(&cfg, 1024)
	if !strings.Contains(w, "1756") || !strings.Contains(w, "1024") || !strings.Contains(w, "max-connections") {
		t.Errorf("warning %q", w)
	}
}

// The binary, started with a descriptor limit below what its caps need, says so at start.
func TestDescriptorWarningAtStart(t *testing.T) {
	bin := buildBinary(t)
	cmd := exec.Command("/bin/sh", "-c", `ulimit -n 512 && exec "$0" "$@"`, bin, "-grpc.listen", anyPort,
		"-http.listen", anyPort, "-admin.listen", "", "-uds.listen", "", "-file.path", t.TempDir()+"/o.jsonl")
	out := &testkit.LockedBuffer{}
	cmd.Stderr = out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), "otlpgate starting") {
		if time.Now().After(deadline) {
			t.Fatalf("no start within 30 s:\n%s", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if s := out.String(); !strings.Contains(s, "RLIMIT_NOFILE) is 512") {
		t.Errorf("no descriptor warning at start:\n%s", s)
	}
}
