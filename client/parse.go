package client

import (
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/internal/bytesize"
	"github.com/otlpgate/otlpgate/internal/credfile"
)

// ParseDest reads a -dest value: comma-separated key=value pairs, applied over base (usually
// DefaultConfig()). Keys are the kebab-case names given on each Config field; a dot may stand
// for a dash (retry.initial = retry-initial). Sizes accept KiB, MiB, GiB (and KB, MB, GB)
// suffixes, durations Go's syntax (100ms, 5m), booleans true/false. A value in double quotes
// may hold commas, with \" and \\ for a quote and a backslash (SplitDest). An unknown key, a key given
// twice (header excepted) or a bad value is an error naming the key. The result is validated.
//
// Any tls-* key turns TLS on unless the spec also says insecure=true or tls=false, which
// Validate then reports as a conflict. Without a protocol key, an http:// or https://
// endpoint means protocol=http, any other base's protocol (v1 for DefaultConfig). Without a
// mode key, protocol=otep streams and the others are unary. With protocol=http an https://
// endpoint turns TLS on. Safe for concurrent use; base is not modified.
func ParseDest(spec string, base Config) (Config, error) {
	c := base
	c.Headers = maps.Clone(base.Headers)
	seen := map[string]bool{}
	tlsSet, tlsKeys := false, false
	items, err := SplitDest(spec)
	if err != nil {
		return Config{}, fmt.Errorf("client: -dest: %w", err)
	}
	last := ""
	for i, item := range items {
		i++
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if last == "signals" && !strings.Contains(item, "=") {
			// signals=traces,logs: the list goes on past the comma that separates items.
			s, err := fastpath.ParseSignals(item)
			if err != nil {
				return Config{}, fmt.Errorf("client: -dest key \"signals\": bad value %q: %w", item, err)
			}
			c.Signals |= s
			continue
		}
		k, v, ok := strings.Cut(item, "=")
		k = strings.ReplaceAll(strings.TrimSpace(k), ".", "-")
		if !ok || k == "" {
			// The item is not quoted: it may be the tail of a header value cut at a comma.
			return Config{}, fmt.Errorf("client: -dest item %d is not key=value (a value holding a comma is written in double quotes: key=\"a,b\")", i)
		}
		v, err := Unquote(strings.TrimSpace(v))
		if err != nil {
			return Config{}, fmt.Errorf("client: -dest key %q: %w", k, err)
		}
		if seen[k] && k != "header" && k != "header-file" {
			return Config{}, fmt.Errorf("client: -dest key %q given twice", k)
		}
		seen[k] = true
		last = k
		switch k {
		case "name":
			c.Name = v
		case "spool-id":
			c.SpoolID = v
		case "endpoint":
			c.Endpoint = v
		case "protocol":
			c.Protocol = v
		case "path":
			c.Path = v
		case "mode":
			c.Mode = v
		case "traces-path":
			c.TracesPath = v
		case "metrics-path":
			c.MetricsPath = v
		case "logs-path":
			c.LogsPath = v
		case "streams":
			c.Streams, err = strconv.Atoi(v)
		case "window":
			c.Window, err = strconv.Atoi(v)
		case "max-in-flight":
			c.MaxInFlight, err = strconv.Atoi(v)
		case "concurrency":
			c.Concurrency, err = strconv.Atoi(v)
		case "compression":
			c.Compression = v
		case "queue-bytes":
			c.QueueBytes, err = parseSize(v, 1<<62)
		case "ack-timeout":
			c.AckTimeout, err = time.ParseDuration(v)
		case "retry-initial":
			c.RetryInitial, err = time.ParseDuration(v)
		case "retry-max":
			c.RetryMax, err = time.ParseDuration(v)
		case "retry-max-elapsed":
			c.RetryMaxElapsed, err = time.ParseDuration(v)
		case "rebalance-timeout":
			c.RebalanceTimeout, err = time.ParseDuration(v)
		case "rebalance-requests":
			c.RebalanceRequests, err = strconv.ParseInt(v, 10, 64)
		case "rebalance-bytes":
			c.RebalanceBytes, err = parseSize(v, 1<<62)
		case "retry-on-reconnect":
			c.RetryOnReconnect, err = strconv.ParseBool(v)
		case "poison-after":
			c.PoisonAfter, err = strconv.Atoi(v)
		case "wait-on-shutdown":
			c.WaitOnShutdown, err = strconv.ParseBool(v)
		case "insecure":
			c.TLS.Insecure, err = strconv.ParseBool(v)
			tlsSet = true
		case "tls":
			var on bool
			on, err = strconv.ParseBool(v)
			c.TLS.Insecure = !on
			tlsSet = true
		case "tls-ca":
			c.TLS.CAFile, tlsKeys = v, true
		case "tls-cert":
			c.TLS.CertFile, tlsKeys = v, true
		case "tls-key":
			c.TLS.KeyFile, tlsKeys = v, true
		case "tls-server-name":
			c.TLS.ServerName, tlsKeys = v, true
		case "tls-insecure-skip-verify":
			c.TLS.InsecureSkipVerify, err = strconv.ParseBool(v)
			tlsKeys = true
		case "http2-stream-window":
			c.InitialWindowSize, err = parseSize32(v)
		case "http2-conn-window":
			c.InitialConnWindowSize, err = parseSize32(v)
		case "write-buffer", "read-buffer":
			var n int64
			n, err = parseSize(v, 1<<30)
			if k == "write-buffer" {
				c.WriteBufferSize = int(n)
			} else {
				c.ReadBufferSize = int(n)
			}
		case "zero-buffers":
			c.ZeroBuffers, err = strconv.ParseBool(v)
		case "max-send-msg-size":
			var n int64
			n, err = parseSize(v, 1<<31-1)
			c.MaxSendMsgSize = int(n)
		case "max-recv-msg-size":
			var n int64
			n, err = parseSize(v, 1<<31-1)
			c.MaxRecvMsgSize = int(n)
		case "keepalive-time":
			c.KeepaliveTime, err = time.ParseDuration(v)
		case "keepalive-timeout":
			c.KeepaliveTimeout, err = time.ParseDuration(v)
		case "header":
			hk, hv, ok := strings.Cut(v, ":")
			if !ok {
				err = fmt.Errorf("want key:value")
				break
			}
			if c.Headers == nil {
				c.Headers = map[string]string{}
			}
			c.Headers[strings.ToLower(strings.TrimSpace(hk))] = strings.TrimSpace(hv)
		case "header-file":
			// Read here, through the reader of ${file:PATH}, so that every reading of the
			// destinations reads the file again: a -dest.file reload replaces a destination
			// whose header changed.
			hk, path, ok := strings.Cut(v, ":")
			if path = strings.TrimSpace(path); !ok || path == "" {
				err = fmt.Errorf("want key:/path/to/file")
				break
			}
			var hv string
			if hv, err = credfile.Value(path); err != nil {
				break
			}
			if c.Headers == nil {
				c.Headers = map[string]string{}
			}
			c.Headers[strings.ToLower(strings.TrimSpace(hk))] = hv
		case "bearer-token-file":
			c.BearerTokenFile = v
		case "forward-headers":
			c.ForwardHeaders = nil
			for h := range strings.SplitSeq(v, "|") {
				if h = strings.ToLower(strings.TrimSpace(h)); h != "" {
					c.ForwardHeaders = append(c.ForwardHeaders, h)
				}
			}
		case "signals":
			c.Signals, err = fastpath.ParseSignals(v)
		case "match-header":
			c.MatchHeader, err = fastpath.ParseMatch(v)
		case "resolver":
			c.Resolver = v
		case "endpoints":
			c.Endpoints = nil
			for e := range strings.SplitSeq(v, "|") {
				if e = strings.TrimSpace(e); e != "" {
					c.Endpoints = append(c.Endpoints, e)
				}
			}
		case "endpoints-file":
			c.EndpointsFile = v
		case "resolve-interval":
			c.ResolveInterval, err = time.ParseDuration(v)
		case "balance":
			c.Balance = v
		case "eject-after":
			c.EjectAfter, err = time.ParseDuration(v)
		default:
			return Config{}, fmt.Errorf("client: -dest key %q is unknown", k)
		}
		if err != nil {
			return Config{}, fmt.Errorf("client: -dest key %q: bad value %q: %w", k, v, err)
		}
	}
	if tlsKeys && !tlsSet {
		c.TLS.Insecure = false
	}
	if !seen["protocol"] && hasHTTPScheme(c.Endpoint) {
		// A URL is what an OTLP/HTTP receiver is given by (OTEL_EXPORTER_OTLP_ENDPOINT);
		// OTLP/gRPC takes host:port, so no other protocol could use it.
		c.Protocol = ProtocolHTTP
	}
	if !seen["mode"] {
		// OTEP's pipelined streams are what it is for; v1 and OTLP/HTTP have one mode.
		c.Mode = ModeUnary
		if c.Protocol == ProtocolOTEP {
			c.Mode = ModeStream
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

func parseSize32(s string) (int32, error) {
	n, err := parseSize(s, 1<<31-1)
	return int32(n), err
}

// RedactDest returns spec with the value of every header item replaced, so that a -dest can be
// logged or shown in an error without the credentials it may carry. Safe for concurrent use.
func RedactDest(spec string) string {
	items := DestItems(spec)
	inHeader := false
	for i, item := range items {
		k, v, ok := strings.Cut(item, "=")
		if ok && strings.TrimSpace(k) == "header" {
			hk, _, _ := strings.Cut(v, ":")
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
