package client

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Every key of the table is documented: the reference (docs/destinations.md, generated from
// the table: TestReferenceDocs in cmd/otlpgate) shows its name, its value, its default and
// what it does, in a section the page has a table for.
func TestDestKeysDocumented(t *testing.T) {
	kebab := regexp.MustCompile(`^[a-z][a-z0-9]*(-[a-z0-9]+)*$`)
	seen := map[string]bool{}
	for _, k := range DestKeys() {
		switch {
		case !kebab.MatchString(k.Name):
			t.Errorf("key %q is not kebab-case", k.Name)
		case seen[k.Name]:
			t.Errorf("key %q is in the table twice", k.Name)
		case k.Takes == "" || k.Default == "" || k.Help == "":
			t.Errorf("key %q: the reference needs its value (%q), its default (%q) and its meaning (%q)", k.Name, k.Takes, k.Default, k.Help)
		case k.Section != DestKeysMain && k.Section != DestKeysFleet && k.Section != DestKeysKafka:
			t.Errorf("key %q: section %q has no table in the reference", k.Name, k.Section)
		}
		seen[k.Name] = true
	}
	if len(destKeys) > 128 {
		t.Errorf("%d keys: DestKeySet holds 128", len(destKeys))
	}
}

// The default the reference shows as a value (`30s`) is the one DefaultConfig holds: giving
// it changes nothing.
func TestDestKeyDefaults(t *testing.T) {
	const spec = "name=a,endpoint=h:1"
	want, err := ParseDest(spec, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, k := range DestKeys() {
		v, opened := strings.CutPrefix(k.Default, "`")
		v, closed := strings.CutSuffix(v, "`")
		if !opened || !closed || strings.Contains(v, "`") {
			continue // not a value: "required", "none", "streams x window", ...
		}
		if strings.HasPrefix(k.Name, "tls-") {
			continue // giving any tls-* key turns TLS on, whatever its value
		}
		n++
		got, err := ParseDest(spec+","+k.Name+"="+v, DefaultConfig())
		if err != nil {
			t.Errorf("%s=%s, its documented default: %v", k.Name, v, err)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s=%s, its documented default, is not the default:\n got %+v\nwant %+v", k.Name, v, got, want)
		}
	}
	if n < 20 {
		t.Errorf("only %d defaults checked", n)
	}
}

// Every key of the table reads a value into the configuration: a value other than the
// default changes it.
func TestDestKeysSet(t *testing.T) {
	sample := map[string]string{
		"name": "a", "endpoint": "h:1", "spool-id": "old", "protocol": "otep", "path": "/p", "mode": "stream", "transport": "otlpgate",
		"streams": "3", "window": "5", "max-in-flight": "7", "concurrency": "2", "compression": "gzip",
		"traces-path": "/t", "metrics-path": "/m", "logs-path": "/l", "queue-bytes": "1MiB",
		"ack-timeout": "1s", "retry-initial": "1s", "retry-max": "2s", "retry-max-elapsed": "3s",
		"rebalance-timeout": "1s", "rebalance-requests": "9", "rebalance-bytes": "1KiB",
		"retry-on-reconnect": "false", "poison-after": "0", "wait-on-shutdown": "false",
		"tls": "true", "insecure": "false", "tls-ca": "/ca", "tls-cert": "/c", "tls-key": "/k",
		"tls-server-name": "n", "tls-insecure-skip-verify": "true", "http2-stream-window": "2MiB",
		"http2-conn-window": "2MiB", "write-buffer": "1KiB", "read-buffer": "1KiB", "zero-buffers": "true",
		"max-send-msg-size": "1MiB", "max-recv-msg-size": "1MiB", "keepalive-time": "1m",
		"keepalive-timeout": "1m", "header": "k:v", "bearer-token-file": "/t", "signals": "logs",
		"match-header": "x:a", "match": "resource:k=v", "forward-headers": "x", "resolver": "dns",
		"endpoints": "a:1|b:1", "endpoints-file": "/e", "resolve-interval": "1m", "balance": "service",
		"eject-after": "1m", "brokers": "k:9092,l:9092", "topic": "t", "traces-topic": "t", "metrics-topic": "m",
		"logs-topic": "l", "encoding": "otlp_json", "partition": "trace_id", "max-message-bytes": "64KiB",
		"sasl-mechanism": "plain", "sasl-username": "u",
	}
	hf := filepath.Join(t.TempDir(), "h")
	if err := os.WriteFile(hf, []byte("v\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sample["header-file"] = "k:" + hf
	sample["sasl-password-file"] = hf
	for _, k := range destKeys {
		v, ok := sample[k.Name]
		if !ok {
			t.Errorf("key %q has no sample value in this test", k.Name)
			continue
		}
		c := DefaultConfig()
		if err := k.read.set(&c, v); err != nil {
			t.Errorf("%s=%s: %v", k.Name, v, err)
			continue
		}
		if reflect.DeepEqual(c, DefaultConfig()) {
			t.Errorf("%s=%s changed nothing", k.Name, v)
		}
	}
}

// An unknown key is refused by name, with the key it was probably meant to be, or with the
// list of keys when none is near.
func TestDestUnknownKey(t *testing.T) {
	f := func(key, want string) {
		t.Helper()
		_, err := ParseDest("name=a,endpoint=h:1,"+key+"=1", DefaultConfig())
		if err == nil || !strings.Contains(err.Error(), `key "`+key+`" is unknown`) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error naming it with %q", key, err, want)
		}
	}
	f("retry-intial", `did you mean "retry-initial"?`)
	f("retry_initial", `did you mean "retry-initial"?`)
	f("stream", `did you mean "streams"?`)
	f("Window", `did you mean "window"?`)
	_, err := ParseDest("name=a,endpoint=h:1,colour=blue", DefaultConfig())
	if err == nil {
		t.Fatal("colour accepted")
	}
	for _, k := range destKeys {
		if !strings.Contains(err.Error(), k.Name) {
			t.Errorf("the error for a key far from every other does not list %q: %v", k.Name, err)
		}
	}
}

// ReadDest reports the keys a value gives, before any is applied: a dotted key by its dashed
// name, a repeated one once, a list that goes on past commas as its key.
func TestDestGivenKeys(t *testing.T) {
	s, err := ReadDest(`name=a,retry.initial=1s,header=a:b,signals=traces,logs,header="c:d,e",match=resource:k=v,endpoint=h:1`)
	if err != nil {
		t.Fatal(err)
	}
	g := s.Given()
	if want := []string{"name", "endpoint", "retry-initial", "header", "signals", "match"}; !slices.Equal(g.Names(), want) || g.Len() != len(want) {
		t.Errorf("given %v (%d), want %v", g.Names(), g.Len(), want)
	}
	if !g.Has("retry-initial") || g.Has("queue-bytes") || g.Has("header-file") {
		t.Errorf("Has: %v", g)
	}
	if (DestKeySet{}).Len() != 0 {
		t.Error("an empty set holds keys")
	}
	c, err := s.Apply(DefaultConfig())
	if err != nil || c.Route == nil || c.Headers["c"] != "d,e" || c.Signals != 5 {
		t.Errorf("applied: %+v, %v", c, err)
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "BUG") {
			t.Errorf("Has of a name that is no key: %v, want a BUG panic", r)
		}
	}()
	g.Has("queue.bytes")
}

// match= is read with the other keys into Config.Route; a malformed rule is refused with
// process.ParseRoute's message, which names the key and the value already.
func TestParseDestMatch(t *testing.T) {
	c, err := ParseDest(`name=a,endpoint=h:1,match="resource:service.name=a,b|c*"`, DefaultConfig())
	if err != nil || len(c.Route) != 2 || c.Route[0].Key != "service.name" || c.Route[0].Value != "a,b" || c.Route[1].Value != "c" || !c.Route[1].Prefix {
		t.Errorf("route %+v, %v", c.Route, err)
	}
	_, err = ParseDest("name=a,endpoint=h:1,match=resource:k", DefaultConfig())
	if want := `match "resource:k": want resource:KEY=VALUE, resource:KEY=PREFIX* or resource:KEY=V1|V2`; err == nil || err.Error() != want {
		t.Errorf("malformed rule: %v, want %s", err, want)
	}
}

// Files names the files a destination's sent content comes from, as given, and nothing else.
func TestDestSpecFiles(t *testing.T) {
	s, err := ReadDest(`name=v,endpoint=http://a:4318,header-file=x-api-key:/run/key,header=x-plain:v,bearer-token-file=/run/token,header-file=x-b: /run/b`)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.Files(), []string{"/run/key", "/run/token", "/run/b"}; !slices.Equal(got, want) {
		t.Errorf("Files() = %q, want %q", got, want)
	}
	if s, _ := ReadDest("name=v,endpoint=http://a:4318"); s.Files() != nil {
		t.Errorf("no file given, Files() = %q", s.Files())
	}
}
