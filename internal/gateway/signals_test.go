package gateway

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A -dest.file reload that changes a destination's signals= applies: traces refused (404)
// while the only destination takes logs, then delivered once it takes traces, with and
// without the spool.
func TestDestFileReloadChangesSignals(t *testing.T) {
	for _, spool := range []bool{false, true} {
		name := "memory"
		if spool {
			name = "spool"
		}
		t.Run(name, func(t *testing.T) {
			a := startUpstream(t)
			dir := t.TempDir()
			path := filepath.Join(dir, "dests")
			cfg := testConfig()
			cfg.DestFile, cfg.DestFilePoll = path, 10*time.Millisecond
			cfg.Pipeline.BatchMaxAge = 2 * time.Millisecond
			if spool {
				cfg.Spool.Dir = filepath.Join(dir, "spool")
			}
			writeFile(t, path, destSpec("a", a.addr, "signals=logs,metrics"))
			g := startGateway(t, cfg)
			if code := post(t, g, traceBody(t, 0, 1)); code != 404 {
				t.Fatalf("traces to a logs and metrics destination: %d, want 404", code)
			}
			reloads := testutil.ToFloat64(configReloads)
			writeFile(t, path, destSpec("a", a.addr, "signals=traces"))
			eventually(t, func() string { return "the change was not applied" }, func() bool {
				return testutil.ToFloat64(configReloads) > reloads
			})
			if code := post(t, g, traceBody(t, 0, 2)); code != 200 {
				t.Fatalf("traces after the reload: %d, want 200", code)
			}
			eventually(t, func() string { return "span 2 missing" }, func() bool { return a.count(2) == 1 })
			if a.count(1) != 0 {
				t.Errorf("the refused span 1 arrived")
			}
		})
	}
}
