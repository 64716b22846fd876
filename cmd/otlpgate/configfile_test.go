package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/otlpgate/otlpgate/client"
)

// testEnv is the environment of the config file tests.
func testEnv(name string) (string, bool) {
	v, ok := map[string]string{"KEY": "k3y,with comma", "NODE": "node-1", "EMPTY": ""}[name]
	return v, ok
}

func flagSet() *flag.FlagSet {
	cfg := defaultConfig()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	registerFlags(fs, &cfg)
	return fs
}

func TestParseConfigFile(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("  fr0m-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	type kv = map[string][]string
	f := func(body string, want kv) {
		t.Helper()
		got, err := parseConfigFile("c.yaml", []byte(body), flagSet(), testEnv)
		if err != nil {
			t.Errorf("%q: %v", body, err)
			return
		}
		m := kv{}
		for _, s := range got {
			m[s.key] = s.values
		}
		if !reflect.DeepEqual(m, want) {
			t.Errorf("%q:\n got %q\nwant %q", body, m, want)
		}
	}
	f("", kv{})
	f("# nothing set\n", kv{})
	f("grpc.listen: 127.0.0.1:4317\nbatch.max-items: 512\nbatch.eager: true\nqueue.max-bytes: 64MiB\n",
		kv{"grpc.listen": {"127.0.0.1:4317"}, "batch.max-items": {"512"}, "batch.eager": {"true"}, "queue.max-bytes": {"64MiB"}})
	f("grpc.listen: \"\"\n", kv{"grpc.listen": {""}})
	f("-log.level: debug\n", kv{"log.level": {"debug"}}) // a dash is tolerated
	// Nested keys are the dotted name.
	f("grpc:\n  listen: a:1\n  stream:\n    window: 8\nhttp.listen: b:2\n",
		kv{"grpc.listen": {"a:1"}, "grpc.stream.window": {"8"}, "http.listen": {"b:2"}})
	// A repeatable flag takes a list, or one value.
	f("resource.set: [a=1, b=2]\nresource.delete: host.name\n", kv{"resource.set": {"a=1", "b=2"}, "resource.delete": {"host.name"}})
	// References, and $${ for a literal.
	f("resource.set:\n  - node=${env:NODE}\n  - s=${file:"+secret+"}\n  - lit=$${env:NODE}\n  - e=${env:EMPTY}\n",
		kv{"resource.set": {"node=node-1", "s=fr0m-file", "lit=${env:NODE}", "e="}})
	// Destinations: -dest values and mappings of -dest keys, written as -dest values with the
	// values that hold a comma, a quote or a backslash quoted.
	f(`dest:
  - name=a,endpoint=127.0.0.1:1,header=x-api-key:${env:NODE}
  - name: b
    endpoint: http://127.0.0.1:2
    header: {x-api-key: "${env:KEY}", authorization: "Basic ${file:`+secret+`}"}
    header-file: [x-token:`+secret+`]
    signals: [traces, logs]
    forward-headers: [x-scope-orgid, x-region]
    queue-bytes: 4MiB
    match-header: x-scope-orgid:acme
  - name: c
    endpoint: 127.0.0.1:3
    header: ['x-q:say "hi"\now']
`, kv{"dest": {
		"name=a,endpoint=127.0.0.1:1,header=x-api-key:node-1",
		`name=b,endpoint=http://127.0.0.1:2,header="x-api-key:k3y,with comma",header=authorization:Basic fr0m-file,header-file=x-token:` + secret + `,signals="traces,logs",forward-headers=x-scope-orgid|x-region,queue-bytes=4MiB,match-header=x-scope-orgid:acme`,
		`name=c,endpoint=127.0.0.1:3,header="x-q:say \"hi\"\\now"`,
	}})
}

// A destination given as a mapping reaches client.ParseDest with every value as written.
func TestConfigFileDestMappingParses(t *testing.T) {
	got, err := parseConfigFile("c.yaml", []byte(`dest:
  - name: b
    endpoint: http://127.0.0.1:2
    header: {x-api-key: "${env:KEY}", x-q: 'say "hi" \ now'}
    signals: [traces, logs]
    forward-headers: [x-scope-orgid, x-region]
`), flagSet(), testEnv)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.ParseDest(got[0].values[0], client.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if c.Headers["x-api-key"] != "k3y,with comma" || c.Headers["x-q"] != `say "hi" \ now` {
		t.Errorf("headers %q", c.Headers)
	}
	if c.Signals.String() != "traces,logs" || !reflect.DeepEqual(c.ForwardHeaders, []string{"x-scope-orgid", "x-region"}) || c.Protocol != client.ProtocolHTTP {
		t.Errorf("signals %v, forward-headers %q, protocol %s", c.Signals, c.ForwardHeaders, c.Protocol)
	}
}

// Every refusal names the file, the line and the key; a value that came from a reference is
// never quoted.
func TestParseConfigFileErrors(t *testing.T) {
	f := func(body, want string) {
		t.Helper()
		fs := flagSet()
		settings, err := parseConfigFile("c.yaml", []byte(body), fs, testEnv)
		if err == nil {
			err = applySettings(fs, "c.yaml", settings, nil)
		}
		if err == nil || err.Error() != want {
			t.Errorf("%q:\n got %v\nwant %s", body, err, want)
		}
	}
	f("grpc.listen: a:1\n\ngrpc.lisen: b:2\n", `c.yaml line 3: unknown key "grpc.lisen" (the keys are otlpgate's flags without the dash: otlpgate -help lists them)`)
	f("grpc:\n  listen: a:1\n  nope: 1\n", `c.yaml line 3: unknown key "grpc.nope" (the keys are otlpgate's flags without the dash: otlpgate -help lists them)`)
	f("zzz:\n  a: 1\n", `c.yaml line 1: unknown key "zzz" (the keys are otlpgate's flags without the dash: otlpgate -help lists them)`)
	f("grpc.listen: a:1\ngrpc:\n  listen: b:2\n", `c.yaml line 3: key "grpc.listen" given twice (first on line 1)`)
	f("- a\n", "c.yaml line 1: want a mapping of flag names (without the dash) to their values")
	f("grpc.listen: [a, b]\n", "c.yaml line 1: grpc.listen: takes one value, not a list")
	f("grpc.listen: {a: b}\n", "c.yaml line 1: grpc.listen: want a value, not a mapping")
	f("log.level:\n", `c.yaml line 1: log.level: no value (an empty one is written "")`)
	f("resource.set: [a=1, [b]]\n", "c.yaml line 1: resource.set: want a value, not a list")
	f("dest:\n  name: a\n", "c.yaml line 2: dest: want a list of destinations (a single one is a list of one: - name: ...)")
	f("config: other.yaml\n", `c.yaml line 1: key "config" cannot be set in the config file: the config file cannot name another one`)
	f("check: true\n", `c.yaml line 1: key "check" cannot be set in the config file: -check is given on the command line`)
	f("batch.max-items: lots\n", `c.yaml line 1: batch.max-items: invalid value "lots": want an integer: parse error`)
	f("batch.max-age: 10\n", `c.yaml line 1: batch.max-age: invalid value "10": want a duration such as 250ms or 5m: parse error`)
	f("batch.eager: yes\n", `c.yaml line 1: batch.eager: invalid value "yes": want true or false: parse error`)
	f("queue.max-bytes: ${env:NODE}\n", "c.yaml line 1: queue.max-bytes: invalid value (not shown: it holds a reference): want a value in the flag's syntax (otlpgate -help)")
	f("resource.set: [\"a=${env:UNSET_ONE}\"]\n", "c.yaml line 1: resource.set: environment variable UNSET_ONE is not set (${env:UNSET_ONE})")
	f("dest:\n  - name: a\n    endpoint: x:1\n    header: {k: \"${env:UNSET_TWO}\"}\n", "c.yaml line 4: dest header k: environment variable UNSET_TWO is not set (${env:UNSET_TWO})")
	var keys []string
	for _, k := range client.DestKeys() {
		keys = append(keys, k.Name)
	}
	frob := `client: -dest key "frob" is unknown; the keys are ` + strings.Join(keys, ", ") + " (docs/destinations.md)"
	f("dest:\n  - name: a\n    endpoint: x:1\n    frob: 2\n", `c.yaml line 2: dest: -dest "name=a,endpoint=x:1,frob=2": `+frob)
	f("dest:\n  - name=a,endpoint=x:1\n  - name=b,endpoint=x:2,frob=1\n", `c.yaml line 3: dest: -dest "name=b,endpoint=x:2,frob=1": `+frob)
	f("dest:\n  - name: a\n    endpont: x:1\n", `c.yaml line 2: dest: -dest "name=a,endpont=x:1": client: -dest key "endpont" is unknown; did you mean "endpoint"?`)
	f("dest:\n  - name: a\n    endpoint: [x:1, x:2]\n", "c.yaml line 3: dest endpoint: takes one value, not a list")
	f("dest:\n  - name: a\n    endpoint: x:1\n    match: resource:k\n", `c.yaml line 2: dest: -dest "name=a,endpoint=x:1,match=resource:k": match "resource:k": want resource:KEY=VALUE, resource:KEY=PREFIX* or resource:KEY=V1|V2`)
	f("grpc.listen: a:1\n---\ngrpc.listen: b:2\n", "c.yaml line 2: a second YAML document (---): otlpgate reads one")
	if _, err := parseConfigFile("c.yaml", []byte("a: [\n"), flagSet(), testEnv); err == nil || !strings.HasPrefix(err.Error(), "c.yaml: yaml: line 1:") {
		t.Errorf("bad YAML: %v", err)
	}
}

// Flags on the command line override the file: a value, and a list, which replaces the file's.
func TestConfigFileCommandLineOverrides(t *testing.T) {
	path := filepath.Join(t.TempDir(), "otlpgate.yaml")
	if err := os.WriteFile(path, []byte("batch.max-items: 100\nbatch.max-age: 1s\nresource.set: [a=1, b=2]\ndest:\n  - name=a,endpoint=x:1\n  - name=b,endpoint=x:2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pc, err := loadConfig([]string{"-config", path, "-batch.max-items", "7", "-dest", "name=c,endpoint=x:3"}, testEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cfg := pc.cfg
	if cfg.pipeline.BatchMaxItems != 7 || cfg.pipeline.BatchMaxAge.String() != "1s" {
		t.Errorf("batch.max-items %d, batch.max-age %v; want 7 (command line) and 1s (file)", cfg.pipeline.BatchMaxItems, cfg.pipeline.BatchMaxAge)
	}
	if !reflect.DeepEqual(cfg.dests, []string{"name=c,endpoint=x:3"}) || !reflect.DeepEqual(cfg.procSet, []string{"a=1", "b=2"}) {
		t.Errorf("dests %q, resource.set %q", cfg.dests, cfg.procSet)
	}
	var keys []string
	for _, s := range pc.file {
		keys = append(keys, s.key)
	}
	if !reflect.DeepEqual(keys, []string{"batch.max-age", "resource.set"}) {
		t.Errorf("the file's settings in effect: %q", keys)
	}
	if err := finishConfig(&cfg); err != nil {
		t.Fatal(err)
	}
}

func TestChangedKeys(t *testing.T) {
	s := func(key string, v ...string) setting { return setting{key: key, values: v} }
	old := []setting{s("a", "1"), s("dest", "x", "y"), s("gone", "1"), s("same", "1")}
	next := []setting{s("a", "2"), s("dest", "x"), s("new", "1"), s("same", "1")}
	if got := changedKeys(old, next); !reflect.DeepEqual(got, []string{"a", "dest", "gone", "new"}) {
		t.Errorf("changedKeys = %q", got)
	}
}

// The example of docs/configuration.md is a configuration otlpgate takes.
func TestConfigFileDocExample(t *testing.T) {
	_, rest, _ := strings.Cut(configFileSection, "```yaml\n")
	example, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("no YAML example in configFileSection")
	}
	dir := t.TempDir()
	auth := filepath.Join(dir, "basic")
	if err := os.WriteFile(auth, []byte("Basic dXNlcjpwYXNz\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "otlpgate.yaml")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(example, "/etc/otlpgate/vendor-basic-auth", auth)), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(name string) (string, bool) {
		v, ok := map[string]string{"NODE_NAME": "node-1", "VENDOR_API_KEY": "k"}[name]
		return v, ok
	}
	pc, err := loadConfig([]string{"-config", path}, env, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := finishConfig(&pc.cfg); err != nil {
		t.Fatal(err)
	}
	if d := allDests(t, pc.cfg); len(d) != 2 || d[1].Headers["authorization"] != "Basic dXNlcjpwYXNz" || d[1].Headers["x-api-key"] != "k" {
		t.Errorf("destinations %+v", d)
	}
}

// -batch.min-gap defaults to 200ms, and to 1ms with -ack=upstream, where each answer waits for
// delivery; a gap given on the command line or in the config file is kept with either.
func TestMinGapDefaultFollowsAck(t *testing.T) {
	path := filepath.Join(t.TempDir(), "otlpgate.yaml")
	if err := os.WriteFile(path, []byte("ack: upstream\nbatch.min-gap: 20ms\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := func(args []string, want time.Duration) {
		t.Helper()
		pc, err := loadConfig(args, testEnv, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if err := finishConfig(&pc.cfg); err != nil {
			t.Fatal(err)
		}
		if got := pc.cfg.pipeline.BatchMinGap; got != want {
			t.Errorf("%q: -batch.min-gap %v, want %v", args, got, want)
		}
	}
	f(nil, 200*time.Millisecond)
	f([]string{"-ack", "upstream"}, time.Millisecond)
	f([]string{"-ack", "upstream", "-batch.min-gap", "10ms"}, 10*time.Millisecond)
	f([]string{"-batch.min-gap", "0"}, 0)
	f([]string{"-config", path}, 20*time.Millisecond)
}

// A file that opens with --- is one document, as is one of comments alone.
func TestParseConfigFileDocumentMarkers(t *testing.T) {
	for _, body := range []string{"---\ngrpc.listen: a:1\n", "# comments only\n", "---\n", ""} {
		if _, err := parseConfigFile("c.yaml", []byte(body), flagSet(), testEnv); err != nil {
			t.Errorf("%q: %v", body, err)
		}
	}
}
