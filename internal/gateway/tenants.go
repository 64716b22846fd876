package gateway

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/otlpgate/otlpgate/client"
	"github.com/otlpgate/otlpgate/fastpath"
)

// tenantConfig is c.Tenants with the destinations' routes: each destination's match-header,
// in the order build numbers the destinations (dests, then Extra, which take the rest), and
// none at all when no destination has one (every destination takes every tenant). It checks
// that what the destinations name is among -intake.headers.
func (c Config) tenantConfig(dests []client.Config) (fastpath.TenantsConfig, error) {
	tc := c.Tenants
	tc.Routes = nil
	if len(tc.Headers) == 0 {
		for _, d := range dests {
			if d.MatchHeader.Header != "" || len(d.ForwardHeaders) > 0 {
				return tc, fmt.Errorf("-dest %s: match-header and forward-headers name tenant headers: give -intake.headers", d.Name)
			}
		}
		switch {
		case tc.Default != "":
			return tc, errors.New("-intake.headers.default needs -intake.headers")
		case tc.Rate.On():
			return tc, errors.New("-tenant.rate limits each tenant: give -intake.headers")
		}
		return tc, nil
	}
	matched := false
	for _, d := range dests {
		for _, h := range d.ForwardHeaders {
			if !slices.Contains(tc.Headers, h) {
				return tc, fmt.Errorf("-dest %s: forward-headers names %q, which is not one of -intake.headers (%s)", d.Name, h, strings.Join(tc.Headers, ","))
			}
		}
		matched = matched || d.MatchHeader.Header != ""
	}
	if matched {
		for _, d := range dests {
			tc.Routes = append(tc.Routes, d.MatchHeader)
		}
		for range c.Extra {
			tc.Routes = append(tc.Routes, fastpath.Match{})
		}
	}
	return tc, tc.Validate()
}

// buildTenants makes the tenant table of -intake.headers, when given, and hands it to the
// pipeline (or the spool's admission and feeders) and to the intakes that read headers; the
// spool then keeps each request's tenant.
func (cfg *Config) buildTenants(dests []client.Config) error {
	if len(cfg.Tenants.Headers) == 0 {
		return nil
	}
	tc, err := cfg.tenantConfig(dests)
	if err != nil {
		return err
	}
	ts, err := fastpath.NewTenants(tc)
	if err != nil {
		return err
	}
	cfg.Pipeline.Tenants, cfg.GRPC.Tenants, cfg.HTTP.Tenants = ts, ts, ts
	cfg.Spool.Meta = true
	return nil
}

// ErrDestFileRoutes refuses -dest.file with tenant routes: the routes number the destinations
// by position, and a reload changes which destination stands where.
var ErrDestFileRoutes = errors.New("-dest.file cannot be combined with match-header yet")

// checkTenants is tenantConfig's check of dests (the destinations as configured, DestFile's
// among them once read), refusing tenant routes with DestFile.
func (c Config) checkTenants(dests []client.Config) error {
	tc, err := c.tenantConfig(dests)
	if err != nil {
		return err
	}
	if c.DestFile != "" && len(tc.Routes) != 0 {
		return ErrDestFileRoutes
	}
	return nil
}
