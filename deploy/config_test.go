package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// configMapFile returns the otlpgate.yaml that kubernetes/configmap.yaml holds.
func configMapFile(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("kubernetes/configmap.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Kind string            `yaml:"kind"`
		Data map[string]string `yaml:"data"`
	}
	if err := yaml.Unmarshal(raw, &cm); err != nil {
		t.Fatalf("kubernetes/configmap.yaml: %v", err)
	}
	if cm.Kind != "ConfigMap" || cm.Data["otlpgate.yaml"] == "" {
		t.Fatalf("kubernetes/configmap.yaml: a %s without otlpgate.yaml", cm.Kind)
	}
	return cm.Data["otlpgate.yaml"]
}

// The ConfigMap's otlpgate.yaml is a configuration otlpgate takes: the real binary's -check
// reads it, with the environment the comments tell the pod to have, and exits 0, naming the
// file's intakes, destinations and spool (so that the file, not a default, was read). The
// destination left commented out is checked too, uncommented.
func TestConfigMapConfigFile(t *testing.T) {
	bin := otlpgateBinary(t)
	file := configMapFile(t)
	const marker = "# - name: vendor"
	i := strings.Index(file, marker)
	if i < 0 {
		t.Fatalf("otlpgate.yaml has no commented-out vendor destination (%q)", marker)
	}
	var vendor strings.Builder
	vendor.WriteString(file[:i])
	for _, l := range strings.SplitAfter(file[i:], "\n") {
		vendor.WriteString(strings.Replace(l, "# ", "", 1))
	}
	dir := t.TempDir()
	for _, c := range []struct {
		name, body, dests string
	}{
		{"as written", file, "destinations gateways;"},
		{"with the vendor", vendor.String(), "destinations gateways, vendor;"},
	} {
		path := filepath.Join(dir, "otlpgate.yaml")
		if err := os.WriteFile(path, []byte(c.body), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "-check", "-config", path)
		cmd.Env = append(os.Environ(), "POD_IP=10.0.0.7", "NODE_NAME=node-1", "VENDOR_API_KEY=k3y")
		out, err := cmd.CombinedOutput()
		want := "otlpgate: configuration OK: intakes grpc :4317, http :4318, uds /var/run/otlpgate/oc-daemon.sock; " + c.dests + " spool /var/lib/otlpgate/spool; ack accept\n"
		if err != nil || string(out) != want {
			t.Errorf("%s: otlpgate -check -config: %v\n%s\nwant %s", c.name, err, out, want)
		}
	}
}
