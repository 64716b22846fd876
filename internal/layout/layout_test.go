package layout

import (
	"os/exec"
	"strings"
	"testing"
)

const mod = "github.com/otlpgate/otlpgate/"

// allowed lists, per package, the otlpgate packages its non-test files may import (a trailing
// "/" allows the subtree), as its doc.go says. Every package must be listed.
var allowed = map[string][]string{
	"pool":                      {},
	"internal/bytesize":         {},
	"internal/credfile":         {},
	"internal/allocattr":        {},
	"internal/protoreg":         {},
	"internal/faultproxy":       {},
	"internal/l7lb":             {"internal/freeport"},
	"internal/freeport":         {},
	"internal/layout":           {},
	"internal/statuspage":       {},
	"internal/statusmetrics":    {},
	"internal/strictsink":       {"codec", "fastpath"},
	"internal/testkit":          {"codec", "fastpath", "fastpath/pipeline", "proto/", "internal/freeport", "internal/listenlog"},
	"internal/listenlog":        {},
	"internal/ziptest":          {},
	"internal/hostile":          {},
	"internal/interop":          {},
	"internal/reliability":      {},
	"internal/zeroalloc":        {},
	"internal/conformance":      {},
	"internal/h2":               {},
	"internal/rawio":            {},
	"proto/":                    {"proto/"},
	"internal/otlpgen":          {"proto/"},
	"codec/kafkacompress":       {},
	"codec/ocdaemon":            {"pool"},
	"codec":                     {"pool", "proto/"},
	"fastpath":                  {"pool", "proto/"},
	"fastpath/pipeline":         {"fastpath", "fastpath/tenant", "pool", "internal/statusmetrics"},
	"fastpath/tenant":           {},
	"fastpath/process":          {"fastpath", "fastpath/pipeline", "pool", "proto/"},
	"internal/admission":        {"fastpath", "fastpath/pipeline", "fastpath/tenant", "pool", "internal/statusmetrics"},
	"spool":                     {"pool", "internal/statusmetrics"},
	"spool/feed":                {"fastpath", "fastpath/pipeline", "fastpath/tenant", "spool", "pool"},
	"client":                    {"fastpath", "fastpath/pipeline", "fastpath/tenant", "fastpath/process", "codec", "pool", "proto/", "internal/credfile", "internal/bytesize", "internal/h2", "internal/rawio", "internal/statusmetrics"},
	"client/filedest":           {"fastpath", "fastpath/pipeline", "proto/", "pool", "client"},
	"client/kafkadest":          {"fastpath", "fastpath/pipeline", "fastpath/tenant", "pool", "client", "client/filedest"},
	"server/admin":              {},
	"server/grpc":               {"fastpath", "fastpath/pipeline", "fastpath/tenant", "codec", "pool", "proto/", "internal/admission", "internal/credfile", "internal/bytesize", "internal/h2", "internal/rawio", "internal/statusmetrics"},
	"server/http":               {"fastpath", "fastpath/pipeline", "fastpath/tenant", "codec", "pool", "proto/", "internal/admission", "internal/credfile", "internal/bytesize", "internal/rawio", "internal/statusmetrics"},
	"server/kafka":              {"fastpath", "fastpath/pipeline", "codec/kafkacompress", "proto/", "pool", "internal/admission", "internal/credfile", "internal/bytesize", "internal/rawio", "internal/statusmetrics"},
	"server/uds":                {"codec/ocdaemon", "fastpath", "fastpath/pipeline", "proto/", "pool", "internal/admission", "internal/rawio", "internal/statusmetrics"},
	"server/kafkaconsume":       {"fastpath", "fastpath/pipeline", "fastpath/tenant", "pool", "internal/admission", "internal/statusmetrics"},
	"internal/gateway":          {"fastpath", "fastpath/pipeline", "fastpath/tenant", "fastpath/process", "client", "client/filedest", "client/kafkadest", "codec", "pool", "spool", "spool/feed", "server/admin", "server/grpc", "server/http", "server/kafka", "server/kafkaconsume", "server/uds", "internal/bytesize", "internal/admission", "internal/credfile", "internal/statusmetrics"},
	"bench":                     {"*"},
	"cmd/otlpbench":             {"*"},
	"cmd/otlpgate":              {"*"},
	"deploy":                    {},
	"fastpath/internal/":        {},
	"fastpath/internal/gen":     {"proto/"},
	"fastpath/internal/walkgen": {"fastpath/internal/gen"},
}

// importers lists packages only some may import (tests of any package aside, unless strict).
var importers = map[string]struct {
	by     []string // packages whose non-test files may import it
	strict bool     // tests of other packages may not import it either
}{
	"bench":                 {by: []string{"cmd/otlpbench"}},
	"internal/gateway":      {by: []string{"cmd/otlpgate", "bench"}},
	"internal/faultproxy":   {},
	"internal/l7lb":         {by: []string{"bench"}},
	"internal/freeport":     {by: []string{"bench", "internal/l7lb", "internal/testkit"}}, // ports for children that cannot bind :0
	"internal/conformance":  {strict: true},
	"internal/reliability":  {strict: true},
	"internal/zeroalloc":    {strict: true},
	"internal/hostile":      {strict: true},
	"internal/interop":      {strict: true},
	"internal/layout":       {strict: true},
	"internal/statuspage":   {strict: true},
	"internal/strictsink":   {},
	"internal/testkit":      {}, // the shared test kit: tests only
	"internal/protoreg":     {},
	"fastpath/internal/gen": {by: []string{"fastpath/internal/walkgen"}},
	"cmd/otlpgate":          {strict: true},
	"cmd/otlpbench":         {strict: true},
}

func match(rule, pkg string) bool {
	if rule == "*" {
		return true
	}
	if strings.HasSuffix(rule, "/") {
		return strings.HasPrefix(pkg, rule) || pkg == strings.TrimSuffix(rule, "/")
	}
	return pkg == rule
}

// rulesFor returns the most specific entry of allowed for pkg.
func rulesFor(pkg string) ([]string, bool) {
	if r, ok := allowed[pkg]; ok {
		return r, true
	}
	best, found := "", false
	for k := range allowed {
		if strings.HasSuffix(k, "/") && match(k, pkg) && len(k) > len(best) {
			best, found = k, true
		}
	}
	return allowed[best], found
}

func TestImportRules(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}|{{join .Imports \",\"}}|{{join .TestImports \",\"}}|{{join .XTestImports \",\"}}", mod+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 20 {
		t.Fatalf("go list found %d packages", len(lines))
	}
	for _, l := range lines {
		f := strings.Split(l, "|")
		pkg := strings.TrimPrefix(f[0], mod)
		rules, ok := rulesFor(pkg)
		if !ok {
			t.Errorf("%s: no import rule (add its doc.go rule to layout_test.go)", pkg)
			continue
		}
		check := func(list string, test bool) {
			for _, imp := range strings.Split(list, ",") {
				if !strings.HasPrefix(imp, mod) {
					continue
				}
				dep := strings.TrimPrefix(imp, mod)
				if imp2, ok := importers[dep]; ok {
					okBy := test && !imp2.strict
					for _, b := range imp2.by {
						okBy = okBy || match(b, pkg)
					}
					if !okBy && dep != pkg {
						t.Errorf("%s imports %s, which only %v may import", pkg, dep, imp2.by)
					}
				}
				if test || dep == pkg {
					continue
				}
				okRule := false
				for _, r := range rules {
					okRule = okRule || match(r, dep)
				}
				if !okRule {
					t.Errorf("%s imports %s; its doc.go allows %v", pkg, dep, rules)
				}
			}
		}
		check(f[1], false)
		check(f[2], true)
		check(f[3], true)
	}
}
