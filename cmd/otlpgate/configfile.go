package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/otlpgate/otlpgate/client"
	"github.com/otlpgate/otlpgate/internal/credfile"
	gw "github.com/otlpgate/otlpgate/internal/gateway"
)

// The config file (-config) is a YAML mapping whose keys are the flags' names without the dash,
// each with the value the flag takes, in the flag's own syntax:
//
//	grpc.listen: 127.0.0.1:4317
//	queue.max-bytes: 256MiB
//	resource.set: [deployment.environment=prod, k8s.node.name=${env:NODE_NAME}]
//	dest:
//	  - name=tempo,endpoint=tempo:4317
//	  - name: vendor
//	    endpoint: https://otlp.vendor.example
//	    header: {x-api-key: "${env:VENDOR_KEY}"}
//
// A dotted name may also be written nested (grpc: {listen: ...}). A repeatable flag (-dest,
// -resource.set, ...) takes a list, or one value. A destination is a -dest value, or a mapping
// of -dest keys, which is written into a -dest value for the same parser (client.ParseDest),
// so that the two forms cannot drift apart. ${env:NAME} and ${file:PATH} are resolved in
// every value by credfile.Expand, the expander of the flags. Flags given on the command line
// override the file's keys.

// setting is what the config file sets one flag to: the value, or a repeatable flag's values,
// as the flag takes them, references resolved.
type setting struct {
	key    string
	values []string
	line   int
	// shown[i] is whether values[i] may be quoted in an error: it refers to nothing (a
	// reference may be a secret).
	shown []bool
}

// commandLineOnly are flags a config file may not set: they say what to do with it.
var commandLineOnly = map[string]string{
	"config":  "the config file cannot name another one",
	"check":   "-check is given on the command line",
	"version": "-version is given on the command line",
}

// destListSep joins a -dest key's list written as a YAML list into the -dest syntax: by the
// separator client's table of keys gives each key whose value is a list.
var destListSep = func() map[string]string {
	m := map[string]string{}
	for _, k := range client.DestKeys() {
		if k.Sep != "" {
			m[k.Name] = k.Sep
		}
	}
	return m
}()

// parseConfigFile reads body, the config file name, into the settings of the flags of fs, in
// the order the file gives them. Every error names the file, the line and the key, never a
// value: an unknown key, a key given twice, a value of the wrong shape (a list for a flag that
// takes one value, a mapping for a value), a reference that cannot be resolved, a destination
// that client.ParseDest refuses. A value the flag itself refuses is found by applySettings.
func parseConfigFile(name string, body []byte, fs *flag.FlagSet, getenv func(string) (string, bool)) ([]setting, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
		return nil, nil // empty: the defaults
	} else if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	// A second document (after ---) would be left unread: refused, not ignored.
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		line := more.Line
		if err != nil || line == 0 {
			return nil, fmt.Errorf("%s: more than one YAML document (---): otlpgate reads one", name)
		}
		return nil, fmt.Errorf("%s line %d: a second YAML document (---): otlpgate reads one", name, line)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, nil // empty: the defaults
	}
	p := fileParser{name: name, fs: fs, getenv: getenv, seen: map[string]int{}}
	root := resolve(doc.Content[0])
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return nil, nil // a document marker alone: the defaults
	}
	if root.Kind != yaml.MappingNode {
		return nil, p.errorf(root, "", "want a mapping of flag names (without the dash) to their values")
	}
	if err := p.mapping(root, ""); err != nil {
		return nil, err
	}
	return p.out, nil
}

type fileParser struct {
	name   string
	fs     *flag.FlagSet
	getenv func(string) (string, bool)
	seen   map[string]int // key → the line that set it
	out    []setting
}

func (p *fileParser) errorf(n *yaml.Node, key, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if key != "" {
		msg = key + ": " + msg
	}
	return fmt.Errorf("%s line %d: %s", p.name, n.Line, msg)
}

// resolve follows an alias (*name) to the node it names.
func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// mapping reads the keys of m, each prefixed by prefix (a nested mapping's parent keys).
func (p *fileParser) mapping(m *yaml.Node, prefix string) error {
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := resolve(m.Content[i]), resolve(m.Content[i+1])
		if k.Kind != yaml.ScalarNode || k.Value == "" {
			return p.errorf(k, "", "a key must be a flag's name")
		}
		key := prefix + strings.TrimPrefix(k.Value, "-")
		f := p.fs.Lookup(key)
		if f == nil && v.Kind == yaml.MappingNode && p.hasPrefix(key+".") {
			if err := p.mapping(v, key+"."); err != nil {
				return err
			}
			continue
		}
		if why, ok := commandLineOnly[key]; ok {
			return p.errorf(k, "", "key %q cannot be set in the config file: %s", key, why)
		}
		if f == nil {
			return p.errorf(k, "", "unknown key %q (the keys are otlpgate's flags without the dash: otlpgate -help lists them)", key)
		}
		if line, ok := p.seen[key]; ok {
			return p.errorf(k, "", "key %q given twice (first on line %d)", key, line)
		}
		p.seen[key] = k.Line
		s := setting{key: key, line: k.Line}
		_, repeatable := f.Value.(multiFlag)
		var err error
		switch {
		case v.Kind == yaml.SequenceNode && repeatable:
			for _, e := range v.Content {
				e = resolve(e)
				var val string
				if val, err = p.element(e, key); err != nil {
					return err
				}
				s.values = append(s.values, val)
				s.shown = append(s.shown, e.Kind == yaml.ScalarNode && !strings.Contains(e.Value, "${"))
			}
		case v.Kind == yaml.SequenceNode:
			return p.errorf(v, key, "takes one value, not a list")
		case v.Kind == yaml.MappingNode && key == "dest":
			return p.errorf(v, key, "want a list of destinations (a single one is a list of one: - name: ...)")
		case v.Kind == yaml.MappingNode:
			return p.errorf(v, key, "want a value, not a mapping")
		default:
			var val string
			if val, err = p.element(v, key); err != nil {
				return err
			}
			s.values = []string{val}
			s.shown = []bool{!strings.Contains(v.Value, "${")}
		}
		p.out = append(p.out, s)
	}
	return nil
}

// hasPrefix reports whether a flag's name starts with prefix.
func (p *fileParser) hasPrefix(prefix string) bool {
	found := false
	p.fs.VisitAll(func(f *flag.Flag) { found = found || strings.HasPrefix(f.Name, prefix) })
	return found
}

// element reads one value of key: a scalar, or for dest a destination mapping.
func (p *fileParser) element(n *yaml.Node, key string) (string, error) {
	if key == "dest" && n.Kind == yaml.MappingNode {
		spec, err := p.destMapping(n)
		if err != nil {
			return "", err
		}
		if err := gw.CheckDest(spec); err != nil {
			return "", p.errorf(n, key, "%v", err)
		}
		return spec, nil
	}
	v, err := p.scalar(n, key)
	if err != nil {
		return "", err
	}
	if key == "dest" {
		if err := gw.CheckDest(v); err != nil {
			return "", p.errorf(n, key, "%v", err)
		}
	}
	return v, nil
}

// scalar reads a scalar value of key, its references resolved.
func (p *fileParser) scalar(n *yaml.Node, key string) (string, error) {
	switch {
	case n.Kind == yaml.SequenceNode:
		return "", p.errorf(n, key, "want a value, not a list")
	case n.Kind == yaml.MappingNode:
		return "", p.errorf(n, key, "want a value, not a mapping")
	case n.Kind != yaml.ScalarNode:
		return "", p.errorf(n, key, "want a value")
	case n.Tag == "!!null":
		return "", p.errorf(n, key, "no value (an empty one is written \"\")")
	}
	v, err := credfile.Expand(n.Value, p.getenv)
	if err != nil {
		return "", p.errorf(n, key, "%v", err)
	}
	return v, nil
}

// destMapping writes a destination given as a mapping of -dest keys into a -dest value. A
// header or header-file may be a mapping of header names to values (or files) or a list of
// name:value items; signals, forward-headers and endpoints may be lists. Every value is
// quoted when it holds what the -dest syntax would cut at (quoteDest).
func (p *fileParser) destMapping(m *yaml.Node) (string, error) {
	var items []string
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := resolve(m.Content[i]), resolve(m.Content[i+1])
		if k.Kind != yaml.ScalarNode || k.Value == "" {
			return "", p.errorf(k, "dest", "a key must be a -dest key")
		}
		key := k.Value
		where := "dest " + key
		isHeader := key == "header" || key == "header-file"
		switch {
		case v.Kind == yaml.MappingNode && isHeader:
			for j := 0; j+1 < len(v.Content); j += 2 {
				hk, hv := resolve(v.Content[j]), resolve(v.Content[j+1])
				if hk.Kind != yaml.ScalarNode || hk.Value == "" {
					return "", p.errorf(hk, where, "a key must be a header's name")
				}
				val, err := p.scalar(hv, where+" "+hk.Value)
				if err != nil {
					return "", err
				}
				items = append(items, key+"="+quoteDest(hk.Value+":"+val))
			}
		case v.Kind == yaml.SequenceNode && (isHeader || destListSep[key] != ""):
			var vals []string
			for _, e := range v.Content {
				val, err := p.scalar(resolve(e), where)
				if err != nil {
					return "", err
				}
				vals = append(vals, val)
			}
			if isHeader {
				for _, val := range vals {
					items = append(items, key+"="+quoteDest(val))
				}
			} else {
				items = append(items, key+"="+quoteDest(strings.Join(vals, destListSep[key])))
			}
		case v.Kind == yaml.SequenceNode:
			return "", p.errorf(v, where, "takes one value, not a list")
		default:
			val, err := p.scalar(v, where)
			if err != nil {
				return "", err
			}
			items = append(items, key+"="+quoteDest(val))
		}
	}
	return strings.Join(items, ","), nil
}

// quoteDest writes v as a -dest value: as it is, or in double quotes with \" and \\ escaped
// when it holds a comma, a quote, a backslash or white space at an end (client.SplitDest and
// client.Unquote read it back).
func quoteDest(v string) string {
	if v != "" && !strings.ContainsAny(v, ",\"\\") && strings.TrimSpace(v) == v {
		return v
	}
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	return `"` + r.Replace(v) + `"`
}

// applySettings sets the flags of fs to the file's settings, leaving out the flags given on
// the command line (set), which override the file: a list on the command line replaces the
// file's list. An error names the file, the line and the key.
func applySettings(fs *flag.FlagSet, name string, settings []setting, set map[string]bool) error {
	for _, s := range settings {
		if set[s.key] {
			continue
		}
		for i, v := range s.values {
			if err := fs.Set(s.key, v); err != nil {
				kind, _ := flag.UnquoteUsage(fs.Lookup(s.key))
				want, ok := valueKinds[kind]
				if !ok {
					want = "a value in the flag's syntax (otlpgate -help)"
				}
				if s.shown[i] {
					return fmt.Errorf("%s line %d: %s: invalid value %q: want %s: %w", name, s.line, s.key, v, want, err)
				}
				// The flag's error may quote the value, which came from a reference: left out.
				return fmt.Errorf("%s line %d: %s: invalid value (not shown: it holds a reference): want %s", name, s.line, s.key, want)
			}
		}
	}
	return nil
}

// valueKinds says what a flag of each kind (flag.UnquoteUsage's name) takes.
var valueKinds = map[string]string{
	"": "true or false", "int": "an integer", "uint": "an integer", "int64": "an integer", "uint64": "an integer",
	"float": "a number", "duration": "a duration such as 250ms or 5m", "string": "a string",
}

// errFlags is a command line the flag package refused; it printed why.
var errFlags = errors.New("bad command line")

// parsedConfig is a configuration read from the command line and the config file it names.
type parsedConfig struct {
	cfg  config
	fs   *flag.FlagSet
	file []setting // what the file set, the keys the command line overrides left out
	body []byte    // the file as read
}

// loadConfig reads args (as given: references are resolved here) and the config file they
// name (-config) into a configuration, not yet finished (finishConfig). out takes what the
// flag package prints (-help, a bad flag: errFlags). A value that refers to the environment
// or a file is read again at each call, so a reload sees a rotated secret.
func loadConfig(args []string, getenv func(string) (string, bool), out io.Writer) (parsedConfig, error) {
	pc := parsedConfig{cfg: defaultConfig()}
	pc.fs = flag.NewFlagSet("otlpgate", flag.ContinueOnError)
	pc.fs.SetOutput(out)
	registerFlags(pc.fs, &pc.cfg)
	args, err := expandArgs(args, getenv)
	if err != nil {
		return pc, err
	}
	if err := pc.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return pc, err
		}
		return pc, errFlags
	}
	if pc.cfg.configFile == "" || pc.fs.NArg() > 0 {
		return pc, nil
	}
	set := map[string]bool{}
	pc.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	pc.body, err = os.ReadFile(pc.cfg.configFile)
	if err != nil {
		return pc, fmt.Errorf("-config: %w", err)
	}
	settings, err := parseConfigFile(pc.cfg.configFile, pc.body, pc.fs, getenv)
	if err != nil {
		return pc, err
	}
	if err := applySettings(pc.fs, pc.cfg.configFile, settings, set); err != nil {
		return pc, err
	}
	for _, s := range settings {
		if !set[s.key] {
			pc.file = append(pc.file, s)
		}
	}
	return pc, nil
}

// The config file's keys a reload applies while otlpgate runs, by what applies them; a change
// of any other key takes a restart, and the reload says so, naming it. A flag added to the
// processing steps (finishProcessConfig) belongs in processKeys.
var (
	processKeys = []string{"resource.set", "resource.delete", "resource.from-peer", "resource.from-peer.action", "drop",
		"sample.traces", "sample.mode", "sample.hash-seed", "sample.precision", "sample.logs"}
	rateKeys   = []string{"tenant.rate", "tenant.burst"}
	reloadable = map[string]bool{"dest": true}
)

func init() {
	for _, k := range slices.Concat(processKeys, rateKeys) {
		reloadable[k] = true
	}
}

// changedKeys returns the keys whose settings differ between the config files old and next,
// in order, those set in one only included.
func changedKeys(old, next []setting) []string {
	values := func(ss []setting) map[string][]string {
		m := map[string][]string{}
		for _, s := range ss {
			m[s.key] = s.values
		}
		return m
	}
	o, n := values(old), values(next)
	var keys []string
	for k, v := range n {
		if ov, ok := o[k]; !ok || !slices.Equal(ov, v) {
			keys = append(keys, k)
		}
	}
	for k := range o {
		if _, ok := n[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}
