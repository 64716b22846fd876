package kafka

import (
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/otlpgate/otlpgate/internal/testkit"
)

func TestParseSubscriptions(t *testing.T) {
	yamlDoc := `
subscriptions:
  - name: producers
    metrics: [org.apache.kafka.producer., org.apache.kafka.producer.node.]
    interval: 30s
    match:
      client_software_name: librdkafka
      client_id: "payments-.*"
  - name: everything
    metrics: ["*"]
`
	jsonDoc := `{"subscriptions": [
  {"name": "producers", "metrics": ["org.apache.kafka.producer.", "org.apache.kafka.producer.node."], "interval": "30s",
   "match": {"client_software_name": "librdkafka", "client_id": "payments-.*"}},
  {"name": "everything", "metrics": ["*"]}
]}`
	for _, tc := range []struct{ name, doc string }{{"subs.yaml", yamlDoc}, {"subs.json", jsonDoc}, {"subs.yml", jsonDoc}} {
		entries, err := parseSubscriptions(tc.name, []byte(tc.doc))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		cfg := testConfig()
		subs, err := buildSubscriptions(&cfg, entries)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if len(subs) != 3 || subs[0].name != "producers" || subs[1].name != "everything" || subs[2].name != defaultSubscriptionName {
			t.Fatalf("%s: %+v", tc.name, subs)
		}
		p := subs[0]
		if p.all || p.interval != 30*time.Second || !slices.Equal(p.prefixes, []string{"org.apache.kafka.producer.", "org.apache.kafka.producer.node."}) || len(p.match) != 2 {
			t.Fatalf("%s: producers %+v", tc.name, p)
		}
		if e := subs[1]; !e.all || e.interval != cfg.DefaultInterval || len(e.match) != 0 {
			t.Fatalf("%s: everything %+v", tc.name, e)
		}
	}
}

func TestSubscriptionErrors(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{"unknown field", "subscriptions:\n  - name: a\n    metrics: [x]\n    intervall: 1s\n", "intervall"},
		{"unknown top-level field", "subs: []\n", "subs"},
		{"no name", "subscriptions:\n  - metrics: [x]\n", "without a name"},
		{"duplicate name", "subscriptions:\n  - {name: a, metrics: [x]}\n  - {name: a, metrics: [y]}\n", "defined twice"},
		{"no metrics", "subscriptions:\n  - {name: a}\n", "no metrics"},
		{"empty prefix", "subscriptions:\n  - {name: a, metrics: [\"\"]}\n", "empty"},
		{"interval too short", "subscriptions:\n  - {name: a, metrics: [x], interval: 99ms}\n", "outside"},
		{"interval too long", "subscriptions:\n  - {name: a, metrics: [x], interval: 61m}\n", "outside"},
		{"interval not a duration", "subscriptions:\n  - {name: a, metrics: [x], interval: soon}\n", "interval"},
		{"interval past the idle timeout", "subscriptions:\n  - {name: a, metrics: [x], interval: 10m}\n", "idle timeout"},
		{"unknown selector", "subscriptions:\n  - {name: a, metrics: [x], match: {client_rack: r1}}\n", "unknown selector"},
		{"bad regex", "subscriptions:\n  - {name: a, metrics: [x], match: {client_id: \"(\"}}\n", "selector client_id"},
		{"not yaml", "subscriptions: [\n", "YAML"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.SubscriptionsFile = filepath.Join(t.TempDir(), "subs.yaml")
			writeFile(t, cfg.SubscriptionsFile, tc.doc)
			_, err := loadSubscriptions(&cfg, 1)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one mentioning %q", err, tc.want)
			}
		})
	}
	cfg := testConfig()
	cfg.SubscriptionsFile = filepath.Join(t.TempDir(), "missing.yaml")
	if _, err := loadSubscriptions(&cfg, 1); err == nil {
		t.Fatal("missing file accepted")
	}
}

func TestResolve(t *testing.T) {
	cfg := testConfig()
	cfg.DefaultMetrics = nil
	cfg.DefaultInterval = time.Minute
	entries, err := parseSubscriptions("s.yaml", []byte(`
subscriptions:
  - name: rdkafka
    metrics: [org.apache.kafka.producer.node., org.apache.kafka.consumer.]
    interval: 30s
    match: {client_software_name: librdkafka, client_software_version: "2\\..*"}
  - name: payments
    metrics: [org.apache.kafka.producer.]
    interval: 10s
    match: {client_id: payments}
  - name: port
    metrics: ["*"]
    interval: 5s
    match: {client_source_port: "9999", client_source_address: "10\\.0\\..*", client_instance_id: "AAAA.*"}
`))
	if err != nil {
		t.Fatal(err)
	}
	subs, err := buildSubscriptions(&cfg, entries)
	if err != nil {
		t.Fatal(err)
	}
	set := &subscriptionSet{gen: 1, subs: subs, idleInterval: cfg.DefaultInterval}
	vals := func(id, clientID, name, version, addr, port string) *[len(labelNames)]string {
		return &[len(labelNames)]string{id, clientID, name, version, addr, port}
	}
	for _, tc := range []struct {
		name      string
		vals      *[len(labelNames)]string
		requested []string
		interval  time.Duration
	}{
		{"none match", vals("x", "other", "librdkafka", "1.9.0", "127.0.0.1", "1"), nil, time.Minute},
		{"one", vals("x", "other", "librdkafka", "2.15.1", "127.0.0.1", "1"), []string{"org.apache.kafka.consumer.", "org.apache.kafka.producer.node."}, 30 * time.Second},
		{"anchored, not a substring", vals("x", "payments-2", "java", "1", "127.0.0.1", "1"), nil, time.Minute},
		{"union drops covered prefixes, smallest interval", vals("x", "payments", "librdkafka", "2.0", "127.0.0.1", "1"), []string{"org.apache.kafka.consumer.", "org.apache.kafka.producer."}, 10 * time.Second},
		{"all selectors must match", vals("AAAAbc", "x", "x", "x", "10.0.0.1", "9998"), nil, time.Minute},
		{"everything", vals("AAAAbc", "payments", "x", "x", "10.0.3.4", "9999"), []string{""}, 5 * time.Second},
	} {
		p := set.resolve(tc.vals)
		if !slices.Equal(p.requested, tc.requested) || p.interval != tc.interval {
			t.Errorf("%s: requested %q every %v, want %q every %v", tc.name, p.requested, p.interval, tc.requested, tc.interval)
		}
	}
}

func TestPlanKeep(t *testing.T) {
	p := &plan{prefixes: minimalPrefixes([]string{"b.x.", "a.", "b.", "c.d"})}
	if !slices.Equal(p.prefixes, []string{"a.", "b.", "c.d"}) {
		t.Fatalf("prefixes %q", p.prefixes)
	}
	keep := func(name string, want bool) {
		t.Helper()
		if got := p.keep(name); got != want {
			t.Errorf("keep(%q) = %v, want %v", name, got, want)
		}
	}
	keep("a.", true)
	keep("a.b", true)
	keep("a", false)
	keep("b.x.y", true)
	keep("ba", false)
	keep("c.d", true)
	keep("c.de", true)
	keep("c.", false)
	keep("", false)
	keep("zzz", false)
	if !(&plan{all: true}).keep("anything") {
		t.Error("all keeps nothing")
	}
	if (&plan{}).keep("anything") {
		t.Error("an empty plan keeps something")
	}
}

// TestSubscriptionIDChanges: the id changes with the matching set, the prefixes and the
// interval, and stays put when a reload changes nothing for the client.
func TestSubscriptionIDChanges(t *testing.T) {
	id := newID()
	vals := &[len(labelNames)]string{idString(id), "c", "librdkafka", "2", "127.0.0.1", "1"}
	subID := func(doc string) int32 {
		t.Helper()
		cfg := testConfig()
		cfg.DefaultMetrics = nil
		entries, err := parseSubscriptions("s.yaml", []byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		subs, err := buildSubscriptions(&cfg, entries)
		if err != nil {
			t.Fatal(err)
		}
		return subscriptionID((&subscriptionSet{subs: subs, idleInterval: time.Minute}).resolve(vals), id)
	}
	base := subID("subscriptions: [{name: a, metrics: [x.], interval: 1s}]")
	if got := subID("subscriptions: [{name: a, metrics: [x.], interval: 1s}, {name: other, metrics: [y.], match: {client_id: nobody}}]"); got != base {
		t.Error("a subscription that does not match changed the id")
	}
	for name, doc := range map[string]string{
		"interval":     "subscriptions: [{name: a, metrics: [x.], interval: 2s}]",
		"prefixes":     "subscriptions: [{name: a, metrics: [x., y.], interval: 1s}]",
		"all":          "subscriptions: [{name: a, metrics: [\"*\"], interval: 1s}]",
		"matching set": "subscriptions: [{name: a, metrics: [x.], interval: 1s}, {name: b, metrics: [x.], interval: 1s}]",
		"none":         "subscriptions: [{name: a, metrics: [x.], interval: 1s, match: {client_id: nobody}}]",
	} {
		if got := subID(doc); got == base {
			t.Errorf("changing the %s kept the subscription id", name)
		}
	}
	other := newID()
	p := (&subscriptionSet{}).resolve(vals)
	if subscriptionID(p, id) == subscriptionID(p, other) {
		t.Error("two instances share a subscription id")
	}
}

// TestReloadKeepsOldSetOnError: a broken file leaves the previous subscriptions in force.
func TestReloadKeepsOldSetOnError(t *testing.T) {
	cfg := testConfig()
	cfg.DefaultMetrics = nil
	cfg.SubscriptionsFile = filepath.Join(t.TempDir(), "subs.json")
	writeFile(t, cfg.SubscriptionsFile, `{"subscriptions": [{"name": "a", "metrics": ["x."], "interval": "1s"}]}`)
	s, err := New(cfg, &testkit.Recorder{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	set := s.subs.Load()
	writeFile(t, cfg.SubscriptionsFile, `{"subscriptions": [{"name": "a", "metrics": ["x."], "interval": "1s"}`)
	before := counterValue(t, reloadsError)
	if err := s.Reload(); err == nil {
		t.Fatal("broken file reloaded")
	}
	if s.subs.Load() != set || counterValue(t, reloadsError)-before != 1 {
		t.Fatal("a failed reload replaced the subscriptions")
	}
	writeFile(t, cfg.SubscriptionsFile, `{"subscriptions": [{"name": "b", "metrics": ["y."], "interval": "2s"}]}`)
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := s.subs.Load(); got.gen != set.gen+1 || got.subs[0].name != "b" {
		t.Fatalf("reloaded set: gen %d, %+v", got.gen, got.subs)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for name, mutate := range map[string]func(*Config){
		"bad listen":                  func(c *Config) { c.Listen = "nope" },
		"bad advertised":              func(c *Config) { c.AdvertisedAddress = "host" },
		"advertised port 0":           func(c *Config) { c.AdvertisedAddress = "host:0" },
		"advertised without host":     func(c *Config) { c.AdvertisedAddress = ":9093" },
		"telemetry max tiny":          func(c *Config) { c.TelemetryMaxBytes = 10 },
		"request below telemetry max": func(c *Config) { c.MaxRequestBytes = c.TelemetryMaxBytes },
		"idle timeout":                func(c *Config) { c.IdleTimeout = 0 },
		"write timeout":               func(c *Config) { c.WriteTimeout = 0 },
		"read timeout":                func(c *Config) { c.ReadTimeout = 0 },
		"max connections":             func(c *Config) { c.MaxConnections = 0 },
		"max instances":               func(c *Config) { c.MaxInstances = 0 },
		"interval too short":          func(c *Config) { c.DefaultInterval = time.Millisecond },
		"interval past idle timeout":  func(c *Config) { c.DefaultInterval = 20 * time.Minute },
		"empty default prefix":        func(c *Config) { c.DefaultMetrics = []string{""} },
	} {
		cfg := DefaultConfig()
		mutate(&cfg)
		if err := cfg.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
		if _, err := New(cfg, &testkit.Recorder{}, nil); err == nil {
			t.Errorf("%s: New accepted", name)
		}
	}
	cfg := DefaultConfig()
	cfg.AdvertisedAddress = "[::1]:9093"
	if err := cfg.Validate(); err != nil {
		t.Errorf("IPv6 advertised address: %v", err)
	}
}
