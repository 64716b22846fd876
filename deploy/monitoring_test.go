package deploy

import (
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// The alert rules parse and each alert fires on the failure it names (promtool test rules).
func TestPrometheusRules(t *testing.T) {
	promtool := needTool(t, "promtool")
	for _, args := range [][]string{
		{"check", "rules", "prometheus/alerts.yaml"},
		{"test", "rules", "prometheus/alerts_test.yaml"},
	} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "SUCCESS") {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

var metricName = regexp.MustCompile(`otlpgate_[a-z0-9_]+`)

// registered returns the metric names of docs/metrics.md, which TestReferenceDocs keeps equal to
// what the packages linked into otlpgate register.
func registered(t *testing.T) map[string]bool {
	b, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "| `otlpgate_") {
			names[strings.Trim(strings.Fields(l)[1], "`")] = true
		}
	}
	if len(names) < 50 {
		t.Fatalf("docs/metrics.md lists %d metrics", len(names))
	}
	return names
}

// Every metric the dashboard and the alert rules name exists, so a renamed metric cannot leave
// a panel empty or an alert silent.
func TestMonitoringNamesRealMetrics(t *testing.T) {
	names := registered(t)
	for _, path := range []string{"prometheus/alerts.yaml", "prometheus/alerts_test.yaml", "grafana/otlpgate.json"} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		found := 0
		for _, m := range metricName.FindAllString(string(b), -1) {
			base := m
			for _, suf := range []string{"_bucket", "_sum", "_count"} {
				if strings.HasSuffix(m, suf) && names[strings.TrimSuffix(m, suf)] {
					base = strings.TrimSuffix(m, suf)
				}
			}
			if !names[base] {
				t.Errorf("%s names %s, which otlpgate does not register", path, m)
			}
			found++
		}
		if found < 5 {
			t.Errorf("%s names %d metrics", path, found)
		}
	}
}

// The dashboard is valid JSON with panels that query something, and every alert has a runbook
// section.
func TestDashboardAndRunbook(t *testing.T) {
	b, err := os.ReadFile("grafana/otlpgate.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("grafana/otlpgate.json: %v", err)
	}
	if len(d.Panels) < 8 {
		t.Errorf("%d panels", len(d.Panels))
	}
	for _, p := range d.Panels {
		if len(p.Targets) == 0 || p.Targets[0].Expr == "" {
			t.Errorf("panel %q queries nothing", p.Title)
		}
	}
	rules, err := os.ReadFile("prometheus/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	runbook, err := os.ReadFile("../docs/runbook.md")
	if err != nil {
		t.Fatal(err)
	}
	alerts := regexp.MustCompile(`(?m)^\s+- alert: (\w+)$`).FindAllStringSubmatch(string(rules), -1)
	if len(alerts) < 8 {
		t.Fatalf("%d alerts", len(alerts))
	}
	for _, a := range alerts {
		if !strings.Contains(string(runbook), "\n## "+a[1]+"\n") {
			t.Errorf("alert %s has no section in docs/runbook.md", a[1])
		}
		if !strings.Contains(string(rules), "runbook_url: docs/runbook.md#"+strings.ToLower(a[1])) {
			t.Errorf("alert %s has no runbook_url", a[1])
		}
	}
}
