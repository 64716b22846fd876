package deploy

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/otlpgate/otlpgate/internal/listenlog"
	"github.com/otlpgate/otlpgate/internal/testkit"
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
			if m == runbookLabel {
				continue
			}
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

// The external label that points the alerts' runbook links at a team's own copy.
const runbookLabel = "otlpgate_runbook_url"

// The runbook the links reach when Prometheus has no otlpgate_runbook_url label.
const defaultRunbook = "https://github.com/otlpgate/otlpgate/blob/main/docs/runbook.md"

// Every alert links its section of docs/runbook.md with an absolute URL, so that the link works
// where Alertmanager shows it (a relative path resolves against nothing there): the base from
// Prometheus' external label, else the repository's runbook, then the section's anchor. The
// promtool tests (alerts_test.yaml) render both forms.
func TestRunbookLinks(t *testing.T) {
	rules, err := os.ReadFile("prometheus/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	runbook, err := os.ReadFile("../docs/runbook.md")
	if err != nil {
		t.Fatal(err)
	}
	if u, err := url.Parse(defaultRunbook); err != nil || u.Scheme != "https" || u.Host == "" {
		t.Fatalf("the default runbook %q is not an absolute https URL", defaultRunbook)
	}
	// GitHub, GitLab and most Markdown sites derive a heading's anchor by lower-casing it: the
	// sections are single CamelCase words, so every site gives the same anchor.
	anchors := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^## (\w+)$`).FindAllStringSubmatch(string(runbook), -1) {
		anchors[strings.ToLower(m[1])] = true
	}
	alerts := regexp.MustCompile(`(?m)^\s+- alert: (\w+)$`).FindAllStringSubmatch(string(rules), -1)
	if len(alerts) < 8 {
		t.Fatalf("%d alerts", len(alerts))
	}
	links := regexp.MustCompile(`(?m)^\s+runbook_url: (.*)$`).FindAllStringSubmatch(string(rules), -1)
	if len(links) != len(alerts) {
		t.Fatalf("%d alerts, %d runbook_url annotations", len(alerts), len(links))
	}
	for i, a := range alerts {
		anchor := strings.ToLower(a[1])
		if !anchors[anchor] {
			t.Errorf("alert %s has no section in docs/runbook.md", a[1])
		}
		want := fmt.Sprintf(`'{{ or $externalLabels.%s %q }}#%s'`, runbookLabel, defaultRunbook, anchor)
		if links[i][1] != want {
			t.Errorf("alert %s: runbook_url: %s\nwant %s", a[1], links[i][1], want)
		}
	}
}

// dashboard is the part of the Grafana dashboard the checks read.
type dashboard struct {
	Templating struct {
		List []struct {
			Name, Type, Query, AllValue string
			IncludeAll                  bool
		}
	}
	Panels []struct {
		Title   string
		Targets []struct{ Expr string }
	}
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile("grafana/otlpgate.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("grafana/otlpgate.json: %v", err)
	}
	return d
}

// The dashboard is valid JSON; its panels query something, under the cluster, namespace and pod
// variables, each chained to the one before.
func TestDashboard(t *testing.T) {
	d := readDashboard(t)
	if len(d.Panels) < 10 {
		t.Errorf("%d panels", len(d.Panels))
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Query
		// "All" must also match series without the label (a Prometheus with no cluster
		// label, otlpgate outside Kubernetes): .* does, Grafana's default alternation does not.
		if v.Type == "query" && (!v.IncludeAll || v.AllValue != ".*") {
			t.Errorf("variable %s: includeAll %v allValue %q, want true and .*", v.Name, v.IncludeAll, v.AllValue)
		}
	}
	for name, want := range map[string]string{
		"cluster":   `label_values(otlpgate_build_info, cluster)`,
		"namespace": `label_values(otlpgate_build_info{cluster=~"$cluster"}, namespace)`,
		"pod":       `label_values(otlpgate_build_info{cluster=~"$cluster", namespace=~"$namespace"}, pod)`,
	} {
		if vars[name] != want {
			t.Errorf("variable %s: query %q, want %q", name, vars[name], want)
		}
	}
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q queries nothing", p.Title)
		}
		for _, q := range p.Targets {
			for _, v := range []string{`cluster=~"$cluster"`, `namespace=~"$namespace"`, `pod=~"$pod"`} {
				if !strings.Contains(q.Expr, v) {
					t.Errorf("panel %q: %s does not select %s", p.Title, q.Expr, v)
				}
			}
		}
	}
}

// The CPU and memory panels show otlpgate's processes and only them: the process_* series of
// other programs Prometheus scrapes are left out, those of otlpgate are summed per pod. Every
// query of the dashboard is evaluated by promtool on series shaped as a scrape of otlpgate gives
// them, with the variables at "All".
func TestDashboardQueries(t *testing.T) {
	promtool := needTool(t, "promtool")
	d := readDashboard(t)
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	exprs := map[string]string{}
	n := 0
	for _, p := range d.Panels {
		for _, q := range p.Targets {
			e := strings.NewReplacer("$__rate_interval", "2m", "$cluster", ".*", "$namespace", ".*", "$pod", ".*", "$instance", ".*").Replace(q.Expr)
			n++
			record := fmt.Sprintf("panel_%d", n)
			exprs[p.Title] += record + " "
			fmt.Fprintf(&rules, "      - record: %s\n        expr: %q\n", record, e)
		}
	}
	cpu, rss := strings.Fields(exprs["CPU"]), strings.Fields(exprs["Resident memory"])
	if len(cpu) != 1 || len(rss) != 2 {
		t.Fatalf("want a CPU panel with one query and a Resident memory panel with two (RSS, GOMEMLIMIT); have %v", exprs)
	}
	// Two otlpgate pods and a Go program of another job on the same node; otlpgate-b runs
	// without GOMEMLIMIT (math.MaxInt64), which the panel leaves out rather than draw.
	const tests = `rule_files: [rules.yaml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'otlpgate_build_info{job="otlpgate",instance="10.0.0.7:8888",namespace="observability",pod="otlpgate-a",version="v1",commit="c",goversion="go"}'
        values: '1x10'
      - series: 'otlpgate_build_info{job="otlpgate",instance="10.0.0.8:8888",namespace="observability",pod="otlpgate-b",version="v1",commit="c",goversion="go"}'
        values: '1x10'
      - series: 'process_cpu_seconds_total{job="otlpgate",instance="10.0.0.7:8888",namespace="observability",pod="otlpgate-a"}'
        values: '0+30x10'
      - series: 'process_cpu_seconds_total{job="otlpgate",instance="10.0.0.8:8888",namespace="observability",pod="otlpgate-b"}'
        values: '0+6x10'
      - series: 'process_cpu_seconds_total{job="other",instance="10.0.0.9:9090",namespace="apps",pod="other"}'
        values: '0+60x10'
      - series: 'process_resident_memory_bytes{job="otlpgate",instance="10.0.0.7:8888",namespace="observability",pod="otlpgate-a"}'
        values: '100000000x10'
      - series: 'process_resident_memory_bytes{job="other",instance="10.0.0.9:9090",namespace="apps",pod="other"}'
        values: '900000000x10'
      - series: 'go_gc_gomemlimit_bytes{job="otlpgate",instance="10.0.0.7:8888",namespace="observability",pod="otlpgate-a"}'
        values: '471859200x10'
      - series: 'go_gc_gomemlimit_bytes{job="otlpgate",instance="10.0.0.8:8888",namespace="observability",pod="otlpgate-b"}'
        values: '9223372036854775807x10'
    promql_expr_test:
      - expr: CPU
        eval_time: 5m
        exp_samples:
          - labels: 'CPU{namespace="observability",pod="otlpgate-a",instance="10.0.0.7:8888"}'
            value: 0.5
          - labels: 'CPU{namespace="observability",pod="otlpgate-b",instance="10.0.0.8:8888"}'
            value: 0.1
      - expr: RSS
        eval_time: 5m
        exp_samples:
          - labels: 'RSS{namespace="observability",pod="otlpgate-a",instance="10.0.0.7:8888"}'
            value: 100000000
      - expr: GOMEMLIMIT
        eval_time: 5m
        exp_samples:
          - labels: 'GOMEMLIMIT{namespace="observability",pod="otlpgate-a",instance="10.0.0.7:8888"}'
            value: 471859200
`
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	r := strings.NewReplacer("expr: CPU", "expr: "+cpu[0], "CPU{", cpu[0]+"{",
		"expr: RSS", "expr: "+rss[0], "RSS{", rss[0]+"{", "expr: GOMEMLIMIT", "expr: "+rss[1], "GOMEMLIMIT{", rss[1]+"{")
	if err := os.WriteFile(filepath.Join(dir, "test.yaml"), []byte(r.Replace(tests)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"check", "rules", "rules.yaml"}, {"test", "rules", "test.yaml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s\nrules:\n%s", strings.Join(args, " "), err, out, rules.String())
		}
	}
}

// The dashboard's series that otlpgate does not name itself (the process and Go runtime
// collectors') are in what otlpgate serves on /metrics: a scrape of the real binary.
func TestDashboardSeriesServed(t *testing.T) {
	d := readDashboard(t)
	want := map[string]bool{}
	for _, p := range d.Panels {
		for _, q := range p.Targets {
			for _, m := range regexp.MustCompile(`\b(?:process|go)_[a-z0-9_]+`).FindAllString(q.Expr, -1) {
				want[m] = true
			}
		}
	}
	if len(want) < 3 {
		t.Fatalf("the dashboard names %v: where are the CPU and memory panels?", want)
	}
	metrics := scrape(t)
	for m := range want {
		if !regexp.MustCompile(`(?m)^` + m + `[{ ]`).MatchString(metrics) {
			t.Errorf("the dashboard names %s, which otlpgate's /metrics does not serve", m)
		}
	}
}

// scrape starts otlpgate with only its admin listener, on 127.0.0.1:0, and returns /metrics.
func scrape(t *testing.T) string {
	t.Helper()
	log, exited := startOtlpgate(t, []string{"-grpc.listen=", "-http.listen=", "-uds.listen=",
		"-admin.listen=127.0.0.1:0", "-file.path=" + filepath.Join(t.TempDir(), "otlp.jsonl")}, nil)
	admin := testkit.WaitAddrs(t, log.String, exited, listenlog.Admin)[0]
	// No keep-alive: the connection, and its goroutines, end with the response.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %v %s", err, resp.Status)
	}
	return string(b)
}
