package gateway

import (
	"errors"
	"fmt"
	"strings"

	"github.com/otlpgate/otlpgate/client"
	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/process"
)

// Routes by resource attribute: a -dest's match=resource:KEY=VALUE (route.go of fastpath).
// The key is the gateway's, not the client's: it says which data a destination is handed, not
// how the destination sends it, so it is cut from the spec before client.ParseDest reads the
// rest.

// matchKey is the -dest key of a route by resource attribute.
const matchKey = "match"

// ErrDestFileResourceRoutes refuses -dest.file with routes by resource attribute: the routes
// number the destinations by position, and a reload changes which destination stands where.
var ErrDestFileResourceRoutes = errors.New("-dest.file cannot be combined with match=resource yet")

// cutMatch returns spec without its match item, and that item's value ("" without one).
func cutMatch(spec string) (rest, match string) {
	items := client.DestItems(spec)
	kept := items[:0]
	for _, item := range items {
		k, v, _ := strings.Cut(item, "=")
		if strings.TrimSpace(k) == matchKey {
			match = strings.TrimSpace(v)
			if u, err := client.Unquote(match); err == nil {
				match = u // a quoted rule may hold commas: resource:k="a,b" is written match="resource:k=a,b"
			}
			if match == "" {
				match = " " // given empty: ParseRoute refuses it
			}
			continue
		}
		kept = append(kept, item)
	}
	return strings.Join(kept, ","), match
}

// resourceRoutes returns the rule of each destination in the order the pipeline numbers them
// (the -dest values, the Destinations, then Extra), nil for one that takes the rest; nil when
// no destination has a rule. It refuses a malformed match, a match twice in one -dest, and the
// configurations routes cannot work with.
func (c Config) resourceRoutes() ([][]process.Match, error) {
	var rules [][]process.Match
	routed := false
	for _, spec := range c.Dests {
		n := 0
		for _, item := range client.DestItems(spec) {
			if k, _, _ := strings.Cut(item, "="); strings.TrimSpace(k) == matchKey {
				n++
			}
		}
		if n > 1 {
			return nil, fmt.Errorf("-dest %q: key %q given twice", client.RedactDest(spec), matchKey)
		}
		_, m := cutMatch(spec)
		if m == "" {
			rules = append(rules, nil)
			continue
		}
		r, err := process.ParseRoute(m)
		if err != nil {
			return nil, fmt.Errorf("-dest %q: %w", client.RedactDest(spec), err)
		}
		rules = append(rules, r)
		routed = true
	}
	if !routed {
		return nil, nil
	}
	for range c.Destinations {
		rules = append(rules, nil)
	}
	for range c.Extra {
		rules = append(rules, nil)
	}
	switch {
	case c.DestFile != "":
		return nil, ErrDestFileResourceRoutes
	case c.Pipeline.Ack == fastpath.AckUpstream:
		return nil, errors.New("-ack=upstream cannot be combined with match=resource: a split request has no single batch to wait on")
	case len(rules) > process.MaxRoutes:
		return nil, fmt.Errorf("match=resource: %d destinations, at most %d", len(rules), process.MaxRoutes)
	}
	return rules, nil
}

// buildRoutes makes the router of the destinations' match=resource, when one has it, and hands
// it to the pipeline (or the spool's admission and feeders, through g.cfg).
func (cfg *Config) buildRoutes() error {
	rules, err := cfg.resourceRoutes()
	if err != nil || rules == nil {
		return err
	}
	r, err := process.NewRouter(rules)
	if err != nil {
		return err
	}
	cfg.Pipeline.Router = r
	return nil
}
