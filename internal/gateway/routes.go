package gateway

import (
	"errors"
	"fmt"

	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/fastpath/process"
)

// Routes by resource attribute: a -dest's match=resource:KEY=VALUE (fastpath/process/route.go),
// read into client.Config.Route with the other keys; the gateway numbers the destinations'
// rules and builds the pipeline's router from them.

// ErrDestFileResourceRoutes refuses -dest.file with routes by resource attribute: the routes
// number the destinations by position, and a reload changes which destination stands where.
var ErrDestFileResourceRoutes = errors.New("-dest.file cannot be combined with match=resource yet")

// resourceRoutes returns the rule of each destination in the order the pipeline numbers them
// (the -dest values, the Destinations, then Extra), nil for one that takes the rest; nil when
// no destination has a rule. It refuses the destinations AllDestinations refuses (a malformed
// match, a match twice in one -dest among them) and the configurations routes cannot work
// with.
func (c Config) resourceRoutes() ([][]process.Match, error) {
	dests, err := c.AllDestinations()
	if err != nil {
		return nil, err
	}
	var rules [][]process.Match
	routed := false
	for _, d := range dests {
		rules = append(rules, d.Route)
		routed = routed || d.Route != nil
	}
	if !routed {
		return nil, nil
	}
	for range c.Extra {
		rules = append(rules, nil)
	}
	switch {
	case c.DestFile != "":
		return nil, ErrDestFileResourceRoutes
	case c.Pipeline.Ack == pipeline.AckUpstream:
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
