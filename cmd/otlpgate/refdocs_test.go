package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/otlpgate/otlpgate/client"
)

// The reference pages are generated from what the code already knows, so that a default or a
// metric name is written in one place only: docs/configuration.md from the flag set,
// docs/metrics.md from the metrics registered by the packages linked into otlpgate, the key
// tables of docs/destinations.md from client's table of -dest keys (the rest of that page is
// written by hand). `make docs` rewrites them (go test -run TestReferenceDocs -update); this
// test fails when they are stale.
var updateDocs = flag.Bool("update", false, "rewrite docs/configuration.md, docs/metrics.md and the -dest keys of docs/destinations.md")

func TestReferenceDocs(t *testing.T) {
	for _, page := range []struct {
		path string
		gen  func(t *testing.T) []byte
	}{
		{"../../docs/configuration.md", configurationPage},
		{"../../docs/metrics.md", metricsPage},
		{"../../docs/destinations.md", destinationsPage},
	} {
		want := page.gen(t)
		if *updateDocs {
			if err := os.WriteFile(page.path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(page.path)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run make docs and commit it", filepath.Base(page.path))
		}
	}
}

// flagGroups names the sections of docs/configuration.md by flag prefix.
var flagGroups = map[string]string{
	"grpc": "OTLP/gRPC intake", "http": "OTLP/HTTP intake", "uds": "OpenCensus daemon intake (unix socket)",
	"kafka": "Kafka KIP-714 intake", "intake": "Intake limiter (every intake)", "auth": "Authentication",
	"queue": "Queue and batching", "batch": "Queue and batching", "ack": "Queue and batching",
	"compression": "Queue and batching", "dest": "Destinations", "file": "File destination", "spool": "Spool", "admin": "Operating",
	"pprof": "Operating", "log": "Operating", "net": "Operating", "shutdown": "Operating", "status": "Operating",
	"resource": "Processing", "drop": "Processing", "sample": "Processing",
	// Tenant flags outside the -tenant.* prefix are named whole.
	"intake.headers": "Tenants", "intake.headers.default": "Tenants", "intake.max-tenants": "Tenants",
	"intake.max-tenants-per-peer": "Tenants", "intake.tenant-idle": "Tenants",
	"tenant":  "Tenants",
	"version": "Command line", "check": "Command line", "config": "Command line", "secrets": "Destinations",
}

func configurationPage(t *testing.T) []byte {
	cfg := defaultConfig()
	fs := flag.NewFlagSet("otlpgate", flag.ContinueOnError)
	registerFlags(fs, &cfg)
	sections := map[string][]*flag.Flag{}
	fs.VisitAll(func(f *flag.Flag) {
		prefix, _, _ := strings.Cut(f.Name, ".")
		g, ok := flagGroups[f.Name]
		if !ok {
			g, ok = flagGroups[prefix]
		}
		if !ok {
			t.Errorf("flag -%s has no section in flagGroups (refdocs_test.go)", f.Name)
			g = "Other"
		}
		sections[g] = append(sections[g], f)
	})
	var order []string
	for g := range sections {
		order = append(order, g)
	}
	sort.Strings(order)
	var b bytes.Buffer
	b.WriteString("# Configuration reference\n\n")
	b.WriteString("Generated from otlpgate's flag set by `make docs`; do not edit by hand. Every flag is also\n")
	b.WriteString("printed by `otlpgate -help`. Sizes accept KiB, MiB and GiB suffixes; durations Go's syntax\n")
	b.WriteString("(`250ms`, `5m`). Every value may hold `${env:NAME}` and `${file:PATH}` (the file's content, trimmed;\n")
	b.WriteString("`$${` is a literal `${`: see [destinations.md](destinations.md#secrets-and-values-from-the-environment-and-files)).\n")
	b.WriteString("Destinations (`-dest`) are described in [destinations.md](destinations.md),\n")
	b.WriteString("the processing steps (`-resource.*`, `-drop`, `-sample.*`) in [processing.md](processing.md).\n")
	b.WriteString(configFileSection)
	b.WriteString("\nThe tables list every flag; each is also a key of the config file, its name without the dash\n")
	b.WriteString("(`-grpc.listen` is `grpc.listen:`), except `-config`, `-check` and `-version`.\n")
	for _, g := range order {
		fmt.Fprintf(&b, "\n## %s\n\n| flag | default | meaning |\n| --- | --- | --- |\n", g)
		fl := sections[g]
		sort.Slice(fl, func(i, j int) bool { return fl[i].Name < fl[j].Name })
		for _, f := range fl {
			_, usage := flag.UnquoteUsage(f)
			def := f.DefValue
			if m := funcDefault.FindStringSubmatch(usage); def == "" && m != nil {
				// A flag set by a function (fs.Func) has no default of its own: its usage
				// ends with it.
				def = m[1]
			}
			if def == "" || def == "empty" {
				def = "(empty)"
			}
			fmt.Fprintf(&b, "| `-%s` | `%s` | %s |\n", f.Name, cell(def), cell(usage))
		}
	}
	return b.Bytes()
}

// funcDefault is the "(default X)" a function flag's usage ends with.
var funcDefault = regexp.MustCompile(`\(default ([^()]+)\)$`)

// configFileSection describes the config file (-config, configfile.go) in
// docs/configuration.md.
const configFileSection = `
## The config file (` + "`-config`" + `)

` + "`otlpgate -config otlpgate.yaml`" + ` reads the flags from a YAML file, one document. Each key is a flag's name without the
dash, with the value the flag takes, written as on the command line (sizes with their suffix,
durations in Go's syntax, ` + "`true`/`false`" + `); a dotted name may also be written nested
(` + "`grpc: {listen: ...}`" + ` is ` + "`grpc.listen`" + `). A repeatable flag (` + "`-dest`, `-resource.set`" + `, ...) takes a list, or
one value. Each destination of ` + "`dest`" + ` is either a ` + "`-dest`" + ` value or a mapping of ` + "`-dest`" + ` keys,
which otlpgate writes into a ` + "`-dest`" + ` value for the same parser, so that every key of
[destinations.md](destinations.md) works in both forms; in a mapping, ` + "`header`" + ` and ` + "`header-file`" + ` may be
mappings of header names to values (or files), ` + "`signals`, `forward-headers`" + ` and ` + "`endpoints`" + ` lists, and a
value may hold commas (otlpgate quotes it as the ` + "`-dest`" + ` syntax does).

` + "```yaml" + `
grpc.listen: 0.0.0.0:4317
http:
  listen: 0.0.0.0:4318
queue.max-bytes: 512MiB
resource.set:
  - k8s.node.name=${env:NODE_NAME}
dest:
  - name=gateway,endpoint=otlpgate-gateway:4317,protocol=otep
  - name: vendor
    endpoint: https://otlp.vendor.example
    signals: [traces, logs]
    header:
      x-api-key: ${env:VENDOR_API_KEY}
    header-file:
      authorization: /etc/otlpgate/vendor-basic-auth
` + "```" + `

` + "`${env:NAME}` and `${file:PATH}`" + ` are resolved in every value, as in flag values; an unset variable or an
unreadable file stops the start and ` + "`-check`" + `, naming it; ` + "`$${`" + ` is a literal ` + "`${`" + `. Flags given on the
command line override the file's keys (a list on the command line replaces the file's list). An
unknown key, a key given twice, a list where one value is taken and a value the flag refuses
stop the start, and ` + "`-check`" + `, with exit status 2 and a message naming the file, the line and the key.

On SIGHUP, and when a change is seen by reading the file every ` + "`-config.poll-interval`" + `, the file is
read again, and what changed is applied while otlpgate runs: a changed ` + "`dest`" + ` list as ` + "`-dest.file`" + ` is
(new destinations start, removed ones drain, changed ones are replaced, unchanged ones keep
running, and each destination keeps its ` + "`match-header`" + ` and ` + "`match=resource`" + ` routes wherever it now stands in the list); the processing steps (` + "`resource.*`, `drop`, `sample.*`" + `), each request running through the old
steps or the new ones, whole; the tenants' rate (` + "`tenant.rate`, `tenant.burst`" + `, with ` + "`intake.headers`" + ` given at the
start), each tenant's bucket filling at the new rate from then on. The files the configuration
names are read again as on SIGHUP without a config file. A changed key that
takes a restart is logged by name (` + "`config file: a changed key is not applied: it takes a restart`" + `) and
not applied. An invalid file is logged (` + "`cannot reload the config file`" + `), counted in
` + "`otlpgate_config_reload_failures_total`" + `, and keeps the running configuration.
[deploy/kubernetes/configmap.yaml](../deploy/kubernetes/configmap.yaml) holds the edge's configuration
as a file in a ConfigMap, with how to mount it.
`

// destKeysRegion is a generated table of -dest keys in docs/destinations.md: the marker that
// opens it names the table's section (client.DestKey.Section, "main" for ""), the marker that
// closes it ends it. What lies between is rewritten.
var destKeysRegion = regexp.MustCompile(`(?s)(<!-- -dest keys \(([a-z]+)\): generated by make docs[^\n]*-->\n).*?(<!-- end of the generated -dest keys -->)`)

// destinationsPage is docs/destinations.md with each generated region holding the keys of its
// section, in the order of client's table. Every section must have exactly one region.
func destinationsPage(t *testing.T) []byte {
	page, err := os.ReadFile("../../docs/destinations.md")
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string][]client.DestKey{}
	for _, k := range client.DestKeys() {
		s := k.Section
		if s == "" {
			s = "main"
		}
		sections[s] = append(sections[s], k)
	}
	regions := map[string]int{}
	out := destKeysRegion.ReplaceAllFunc(page, func(m []byte) []byte {
		sub := destKeysRegion.FindSubmatch(m)
		name := string(sub[2])
		regions[name]++
		var b bytes.Buffer
		b.Write(sub[1])
		b.WriteString("| key | value | default | meaning |\n| --- | --- | --- | --- |\n")
		for _, k := range sections[name] {
			takes := k.Takes
			if k.Repeatable {
				takes += ", repeatable"
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", k.Name, cell(takes), cell(k.Default), cell(k.Help))
		}
		b.Write(sub[3])
		return b.Bytes()
	})
	for name := range sections {
		if regions[name] != 1 {
			t.Errorf("docs/destinations.md has %d generated tables of the -dest keys of section %q, want 1", regions[name], name)
		}
	}
	for name := range regions {
		if sections[name] == nil {
			t.Errorf("docs/destinations.md has a generated table of section %q, which no -dest key has", name)
		}
	}
	return out
}

func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}

type metricDoc struct {
	name, kind, help, pkg string
	labels                []string
}

func metricsPage(t *testing.T) []byte {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}} {{.Dir}} {{join .GoFiles \",\"}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	mod := "github.com/otlpgate/otlpgate/"
	seen := map[string]metricDoc{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || !strings.HasPrefix(f[0], mod) {
			continue
		}
		for _, file := range strings.Split(f[2], ",") {
			for _, m := range metricsIn(t, filepath.Join(f[1], file), strings.TrimPrefix(f[0], mod)) {
				old, ok := seen[m.name]
				switch {
				case ok && m.help == "":
					// An unregistered local view of a registered metric (no Help of its own).
				case ok && old.help != "" && old.help != m.help:
					t.Errorf("metric %s defined twice with different help (%s, %s)", m.name, old.pkg, m.pkg)
				default:
					seen[m.name] = m
				}
			}
		}
	}
	var names []string
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	var b bytes.Buffer
	b.WriteString("# Metrics reference\n\n")
	b.WriteString("Generated by `make docs` from the metrics the packages linked into otlpgate register; do not\n")
	b.WriteString("edit by hand. All are served on the admin listener's `/metrics` (`-admin.listen`), with the\n")
	b.WriteString("Go runtime's and the process's own series.\n\n")
	b.WriteString("| metric | type | labels | package | meaning |\n| --- | --- | --- | --- | --- |\n")
	for _, n := range names {
		m := seen[n]
		fmt.Fprintf(&b, "| `%s` | %s | %s | `%s` | %s |\n", m.name, m.kind, cell(strings.Join(m.labels, ", ")), m.pkg, cell(m.help))
	}
	return b.Bytes()
}

// metricsIn finds the metric definitions of one source file: prometheus.*Opts literals (with the
// label list of the call that takes them) and prometheus.NewDesc calls.
func metricsIn(t *testing.T, path, pkg string) []metricDoc {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	var out []metricDoc
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if x, ok := sel.X.(*ast.Ident); ok && x.Name == "prometheus" && sel.Sel.Name == "NewDesc" && len(call.Args) >= 3 {
			name, kind := str(t, path, call.Args[0]), "gauge"
			if strings.HasSuffix(name, "_total") {
				kind = "counter" // a collector's counter, emitted as prometheus.CounterValue
			}
			out = append(out, metricDoc{name: name, help: str(t, path, call.Args[1]),
				kind: kind, labels: strs(t, path, call.Args[2]), pkg: pkg})
			return true
		}
		if len(call.Args) == 0 {
			return true
		}
		lit, ok := call.Args[0].(*ast.CompositeLit)
		if !ok {
			return true
		}
		typ, ok := lit.Type.(*ast.SelectorExpr)
		if !ok || !strings.HasSuffix(typ.Sel.Name, "Opts") {
			return true
		}
		kind := strings.ToLower(strings.TrimSuffix(typ.Sel.Name, "Opts"))
		m := metricDoc{kind: kind, pkg: pkg}
		for _, e := range lit.Elts {
			kv, ok := e.(*ast.KeyValueExpr)
			if !ok {
				continue
			}
			switch kv.Key.(*ast.Ident).Name {
			case "Name":
				m.name = str(t, path, kv.Value)
			case "Help":
				m.help = str(t, path, kv.Value)
			}
		}
		if len(call.Args) > 1 {
			m.labels = strs(t, path, call.Args[1])
		}
		if m.name != "" {
			out = append(out, m)
		}
		return true
	})
	return out
}

// str evaluates a string literal or a concatenation of them.
func str(t *testing.T, path string, e ast.Expr) string {
	switch e := e.(type) {
	case *ast.BasicLit:
		s, err := strconv.Unquote(e.Value)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return s
	case *ast.BinaryExpr:
		return str(t, path, e.X) + str(t, path, e.Y)
	}
	t.Errorf("%s: a metric name or help that is not a string literal (%T): the reference cannot show it", path, e)
	return ""
}

// strs evaluates a []string{...} literal; anything else (nil, a function's value) gives none.
func strs(t *testing.T, path string, e ast.Expr) []string {
	lit, ok := e.(*ast.CompositeLit)
	if !ok {
		return nil
	}
	var out []string
	for _, x := range lit.Elts {
		out = append(out, str(t, path, x))
	}
	return out
}

// Every -dest key is in docs/destinations.md's reference, a row of its own: the key tables
// are generated (TestReferenceDocs), and a section whose table was left out of the page would
// leave its keys undocumented.
func TestDestKeysInReference(t *testing.T) {
	page, err := os.ReadFile("../../docs/destinations.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range client.DestKeys() {
		if !bytes.Contains(page, []byte("\n| `"+k.Name+"` |")) {
			t.Errorf("docs/destinations.md has no row for the -dest key %q", k.Name)
		}
	}
}
