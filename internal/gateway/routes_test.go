package gateway

import (
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/otlpgate/otlpgate/fastpath/pipeline"
)

// match=resource is read by the gateway, not the client: it reaches the pipeline's Router,
// and every configuration it cannot work with stops the start with an error that says why,
// in -dest and in -dest.file alike.
func TestResourceRoutesConfig(t *testing.T) {
	a, b := startUpstream(t), startUpstream(t)
	cfg := testConfig()
	cfg.Dests = []string{destSpec("a", a.addr, "match=resource:service.name=checkout"), destSpec("b", b.addr)}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	g, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if g.cfg.Pipeline.Router == nil {
		t.Error("no router built")
	}
	g.release()

	for _, c := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"malformed", func(c *Config) { c.Dests[0] = destSpec("a", a.addr, "match=service.name=checkout") }, "want resource:KEY=VALUE"},
		{"empty", func(c *Config) { c.Dests[0] = destSpec("a", a.addr, "match=") }, "want resource:KEY=VALUE"},
		{"twice", func(c *Config) { c.Dests[0] = destSpec("a", a.addr, "match=resource:a=b,match=resource:a=c") }, "given twice"},
		{"ack upstream", func(c *Config) { c.Pipeline.Ack = pipeline.AckUpstream }, "-ack=upstream cannot be combined with match=resource"},
		{"ack upstream in the file", func(c *Config) {
			c.Dests = nil
			c.Pipeline.Ack = pipeline.AckUpstream
			c.DestFile = filepath.Join(t.TempDir(), "dests")
			writeFile(t, c.DestFile, destSpec("c", b.addr, "match=resource:a=b"))
		}, "-ack=upstream cannot be combined with match=resource"},
	} {
		bad := cfg
		bad.Dests = append([]string(nil), cfg.Dests...)
		c.edit(&bad)
		_, err := New(bad, slog.New(slog.DiscardHandler))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
}
