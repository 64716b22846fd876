package gateway

import (
	"errors"
	"fmt"

	"github.com/otlpgate/otlpgate/client"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/fastpath/process"
)

// Routes by resource attribute: a -dest's match=resource:KEY=VALUE (fastpath/process/route.go),
// read into client.Config.Route with the other keys; the gateway numbers the destinations'
// rules and builds the pipeline's router from them. The router numbers the destinations by
// position, so a reload that changes them (-dest.file, a config file) builds a router for the
// new set and hands it over with the set: the pipeline swaps both at once
// (SetDestinationsRoutes), the spool's admission and feeders take it with their new positions
// (applySpooled).

// resourceRoutes returns the rule of each of dests, then of Extra (which take the rest), in
// the order the pipeline numbers them, nil for one that takes the rest; nil when no
// destination has a rule. It refuses the configurations routes cannot work with.
func (c Config) resourceRoutes(dests []client.Config) ([][]process.Match, error) {
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
	case c.Pipeline.Ack == pipeline.AckUpstream:
		return nil, errors.New("-ack=upstream cannot be combined with match=resource: a split request has no single batch to wait on")
	case c.KafkaConsume.On() && c.Spool.Dir == "":
		// Checked here, where a reload of -dest.file checks its routes too: a consumer that
		// met routes would wait for ever (pipeline.ErrRoutesUnwaited).
		return nil, errors.New("-kafka.consume.brokers cannot be combined with match=resource without -spool.dir: a record split between destinations has no single batch whose delivery commits its offset")
	case len(rules) > process.MaxRoutes:
		return nil, fmt.Errorf("match=resource: %d destinations, at most %d", len(rules), process.MaxRoutes)
	}
	return rules, nil
}

// checkRoutes is resourceRoutes' check of the destinations New builds from the flags and
// Destinations (DestFile's are checked once read).
func (c Config) checkRoutes() error {
	dests, err := c.AllDestinations()
	if err != nil {
		return err
	}
	_, err = c.resourceRoutes(dests)
	return err
}

// router makes the router of the match=resource of dests (and Extra), nil when no
// destination has one.
func (c Config) router(dests []client.Config) (pipeline.Router, error) {
	rules, err := c.resourceRoutes(dests)
	if err != nil || rules == nil {
		return nil, err
	}
	r, err := process.NewRouter(rules)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// buildRoutes makes the router of the match=resource of dests (the destinations a start
// builds, DestFile's among them), when one has it, and hands it to the pipeline (or the
// spool's admission and feeders, through g.cfg).
func (cfg *Config) buildRoutes(dests []client.Config) error {
	r, err := cfg.router(dests)
	if err != nil {
		return err
	}
	cfg.Pipeline.Router = r
	return nil
}

// routerOf is the router of the match=resource of ms, in order (Extra and the file take the
// rest), nil when none has one: what a reload hands the pipeline, or the spool's admission and
// feeders, with the destinations.
func (c Config) routerOf(ms []*member) (pipeline.Router, error) {
	var dests []client.Config
	for _, m := range ms {
		if m.cfg != nil {
			dests = append(dests, *m.cfg)
		}
	}
	// Extra, which resourceRoutes counts after the configured destinations, come last in ms.
	return c.router(dests)
}
