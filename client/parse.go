package client

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/otlpgate/otlpgate/internal/bytesize"
)

// ParseDest reads a -dest value: comma-separated key=value pairs, applied over base (usually
// DefaultConfig()). The keys are those of the table in destkeys.go (docs/destinations.md lists
// them); a dot may stand for a dash (retry.initial = retry-initial). Sizes accept KiB, MiB,
// GiB (and KB, MB, GB) suffixes, durations Go's syntax (100ms, 5m), booleans true/false. A
// value in double quotes may hold commas, with \" and \\ for a quote and a backslash
// (SplitDest). An unknown key, a key given twice (header and header-file excepted) or a bad
// value is an error naming the key. The result is validated.
//
// Any tls-* key turns TLS on unless the spec also says insecure=true or tls=false, which
// Validate then reports as a conflict. Without a protocol key, an http:// or https://
// endpoint means protocol=http, any other base's protocol (v1 for DefaultConfig). Without a
// mode key, protocol=otep streams and the others are unary. With protocol=http an https://
// endpoint turns TLS on. Safe for concurrent use; base is not modified.
func ParseDest(spec string, base Config) (Config, error) {
	s, err := ReadDest(spec)
	if err != nil {
		return Config{}, err
	}
	return s.Apply(base)
}

// DestSpec is a -dest value read against the table of keys (ReadDest): its items, each with
// its key and its value unquoted, and the set of keys it gives. Apply reads the values into a
// configuration; a caller that chooses the base by what the value gives asks Given first.
type DestSpec struct {
	items []destItem
	given DestKeySet
}

// destItem is one item of a -dest value. more marks an item without '=' that goes on with
// the list of the key before it (signals=traces,logs).
type destItem struct {
	key   int // the place of its key in destKeys
	value string
	more  bool
}

// ReadDest cuts a -dest value into its items and knows each item's key: it refuses an item
// that is not key=value, a quoted value that is not closed, an unknown key (naming the
// nearest, or listing them all) and a key given twice. The values are read by Apply. Safe for
// concurrent use.
func ReadDest(spec string) (DestSpec, error) {
	items, err := SplitDest(spec)
	if err != nil {
		return DestSpec{}, fmt.Errorf("client: -dest: %w", err)
	}
	var s DestSpec
	last := -1
	for i, item := range items {
		i++
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if last >= 0 && destKeys[last].read.more != nil && !strings.Contains(item, "=") {
			s.items = append(s.items, destItem{key: last, value: item, more: true})
			continue
		}
		k, v, ok := strings.Cut(item, "=")
		k = strings.ReplaceAll(strings.TrimSpace(k), ".", "-")
		if !ok || k == "" {
			// The item is not quoted: it may be the tail of a header value cut at a comma.
			return DestSpec{}, fmt.Errorf("client: -dest item %d is not key=value (a value holding a comma is written in double quotes: key=\"a,b\")", i)
		}
		v, err := Unquote(strings.TrimSpace(v))
		if err != nil {
			return DestSpec{}, fmt.Errorf("client: -dest key %q: %w", k, err)
		}
		key, ok := destKeyIndex[k]
		if !ok {
			return DestSpec{}, unknownKey(k)
		}
		if s.given.has(key) && !destKeys[key].Repeatable {
			return DestSpec{}, fmt.Errorf("client: -dest key %q given twice", k)
		}
		s.given.add(key)
		s.items = append(s.items, destItem{key: key, value: v})
		last = key
	}
	return s, nil
}

// Given is the set of keys the value gives.
func (s DestSpec) Given() DestKeySet { return s.given }

// Files lists the files whose content the destination sends, in the order given: the paths of
// its header-file items and its bearer-token-file. A reload reads them again.
func (s DestSpec) Files() []string {
	var paths []string
	for _, it := range s.items {
		switch destKeys[it.key].Name {
		case "header-file":
			if _, path, ok := strings.Cut(it.value, ":"); ok && strings.TrimSpace(path) != "" {
				paths = append(paths, strings.TrimSpace(path))
			}
		case "bearer-token-file":
			paths = append(paths, it.value)
		}
	}
	return paths
}

// Apply reads the values over base, in the order given, fills in what follows from the keys
// left out (ParseDest says what) and validates the result. Safe for concurrent use; base is
// not modified.
func (s DestSpec) Apply(base Config) (Config, error) {
	c := base
	c.Headers = maps.Clone(base.Headers)
	for _, it := range s.items {
		k := &destKeys[it.key]
		set := k.read.set
		if it.more {
			set = k.read.more
		}
		if err := set(&c, it.value); err != nil {
			if k.read.named {
				return Config{}, err
			}
			if k.Secret {
				return Config{}, fmt.Errorf("client: -dest key %q: bad value (not shown: it may hold a secret): %w", k.Name, err)
			}
			return Config{}, fmt.Errorf("client: -dest key %q: bad value %q: %w", k.Name, it.value, err)
		}
	}
	tlsSet := s.given.Has("insecure") || s.given.Has("tls")
	if !tlsSet && slices.ContainsFunc(s.given.Names(), func(k string) bool { return strings.HasPrefix(k, "tls-") }) {
		c.TLS.Insecure = false
	}
	if !s.given.Has("protocol") && hasHTTPScheme(c.Endpoint) {
		// A URL is what an OTLP/HTTP receiver is given by (OTEL_EXPORTER_OTLP_ENDPOINT);
		// OTLP/gRPC takes host:port, so no other protocol could use it.
		c.Protocol = ProtocolHTTP
	}
	if !s.given.Has("mode") {
		// OTEP's pipelined streams are what it is for; v1 and OTLP/HTTP have one mode.
		c.Mode = ModeUnary
		if c.Protocol == ProtocolOTEP {
			c.Mode = ModeStream
		}
	}
	if !s.given.Has("transport") && (c.Protocol == ProtocolV1 || c.Protocol == ProtocolOTEP) {
		// otlpgate's own transport dials host:port; a gRPC target URI (dns:///name:port) is
		// read by grpc-go's resolvers, so such an endpoint keeps grpc-go.
		c.Transport = TransportOtlpgate
		if strings.Contains(c.Endpoint, ":///") {
			c.Transport = TransportGRPCGo
		}
	}
	if c.Protocol == ProtocolHTTP {
		// Its endpoint's scheme says whether TLS is on, as an SDK's OTEL_EXPORTER_OTLP_ENDPOINT
		// does; explicit keys that disagree fail Validate.
		if !tlsSet && strings.HasPrefix(strings.ToLower(c.Endpoint), "https://") {
			c.TLS.Insecure = false
		}
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// hasHTTPScheme reports whether endpoint is an http:// or https:// URL.
func hasHTTPScheme(endpoint string) bool {
	e := strings.ToLower(endpoint)
	return strings.HasPrefix(e, "http://") || strings.HasPrefix(e, "https://")
}

// parseSize reads a byte size with an optional unit suffix, at most limit.
func parseSize(s string, limit int64) (int64, error) { return bytesize.Parse(s, limit) }

// RedactDest returns spec with the value of every header item replaced, so that a -dest can be
// logged or shown in an error without the credentials it may carry. Safe for concurrent use.
func RedactDest(spec string) string {
	items := DestItems(spec)
	inHeader := false
	for i, item := range items {
		k, v, ok := strings.Cut(item, "=")
		if ok && strings.TrimSpace(k) == "header" {
			hk, _, found := strings.Cut(v, ":")
			if !found || strings.ContainsAny(hk, "= ") {
				// Not key:value (key=value, a value alone): where the secret starts is unknown.
				hk = "<redacted>"
			}
			items[i] = k + "=" + hk + ":<redacted>"
			if strings.HasPrefix(strings.TrimSpace(v), "\"") {
				items[i] += "\"" // a quoted value, commas and all, is one item
			}
			inHeader = true
			continue
		}
		if inHeader && (!ok || strings.ContainsAny(k, " :")) {
			// The tail of a header value that held a comma.
			items[i] = "<redacted>"
			continue
		}
		inHeader = false
	}
	return strings.Join(items, ",")
}
