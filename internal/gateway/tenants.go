package gateway

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/otlpgate/otlpgate/client"
	"github.com/otlpgate/otlpgate/fastpath/tenant"
	"github.com/otlpgate/otlpgate/internal/credfile"
)

// tenantConfig is c.Tenants with the destinations' routes: each destination's match-header,
// in the order build numbers the destinations (dests, then Extra, which take the rest), and
// none at all when no destination has one (every destination takes every tenant). It checks
// that what the destinations name is among -intake.headers.
func (c Config) tenantConfig(dests []client.Config) (tenant.Config, error) {
	tc := c.Tenants
	tc.Routes = nil
	if c.TenantsFile != "" {
		switch {
		case len(tc.Headers) == 0:
			return tc, errors.New("-auth.tenants-file binds tokens to tenant header values: give -intake.headers")
		case c.GRPC.AuthTokenFile != "" || c.HTTP.AuthTokenFile != "":
			return tc, errors.New("-auth.tenants-file authenticates the gRPC and HTTP intakes with its own tokens: leave out -auth.token-file, -grpc.auth.token-file and -http.auth.token-file")
		}
	}
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
			tc.Routes = append(tc.Routes, tenant.Match{})
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
	ts, err := tenant.NewTable(tc)
	if err != nil {
		return err
	}
	if cfg.TenantsFile != "" {
		if _, err := loadTenantsFile(ts, cfg.TenantsFile); err != nil {
			return err
		}
	}
	cfg.Pipeline.Tenants, cfg.GRPC.Tenants, cfg.HTTP.Tenants = ts, ts, ts
	cfg.Spool.Meta = true
	return nil
}

// checkTenants is tenantConfig's check of dests (the destinations as configured, DestFile's
// among them once read). A reload may reorder, add and remove destinations with
// match-header: without a spool the pipeline's set of destinations carries its routes, and a
// reload swaps both together (applyMemory); with one, each feeder is given the new routes with
// its new position (applySpooled).
func (c Config) checkTenants(dests []client.Config) error {
	_, err := c.tenantConfig(dests)
	return err
}

// routesOf is the match-header of each of ms, in order (Extra and the file take the rest),
// nil when none has one: what a reload hands the pipeline with the destinations, so that each
// keeps its own route wherever it now stands.
func routesOf(ms []*member) []tenant.Match {
	var routes []tenant.Match
	matched := false
	for _, m := range ms {
		var r tenant.Match
		if m.cfg != nil {
			r = m.cfg.MatchHeader
		}
		matched = matched || r.Header != ""
		routes = append(routes, r)
	}
	if !matched {
		return nil
	}
	return routes
}

var tenantsFileReloads = promauto.NewCounterVec(prometheus.CounterOpts{
	Name: "otlpgate_tenants_file_reloads_total",
	Help: "Reloads of -auth.tenants-file on SIGHUP, by result (ok; error: the file could not be read or holds a bad line, the log says which, and the tokens read before stay in force).",
}, []string{"result"})

// loadTenantsFile reads the tokens file at path (internal/credfile) and binds its tokens to
// their tenants in ts, replacing the tokens bound before; on an error those stay. It returns
// how many tokens are bound. Errors name the file's line, never a token.
func loadTenantsFile(ts *tenant.Table, path string) (int, error) {
	bs, err := credfile.Bindings(path)
	if err != nil {
		return 0, fmt.Errorf("-auth.tenants-file: %w", err)
	}
	creds := make([]tenant.Credential, len(bs))
	for i, b := range bs {
		vals, err := ts.ParseCredentialTenant(b.To)
		if err != nil {
			return 0, fmt.Errorf("-auth.tenants-file line %d: %w", b.Line, err)
		}
		creds[i] = tenant.Credential{Token: b.Token, Values: vals}
	}
	if err := ts.SetCredentials(creds); err != nil {
		return 0, fmt.Errorf("-auth.tenants-file: %w", err)
	}
	return len(creds), nil
}

// reloadTenantsFile reads -auth.tenants-file again (Reload): a token added is served, a token
// removed is refused from the next call (an OTEP stream opened with it goes on until it ends).
func (g *Gateway) reloadTenantsFile() error {
	ts := g.cfg.GRPC.Tenants
	n, err := loadTenantsFile(ts, g.cfg.TenantsFile)
	if err != nil {
		tenantsFileReloads.WithLabelValues("error").Inc()
		g.log.Error("cannot reload the tenants file; keeping the tokens read before", "err", err)
		return err
	}
	tenantsFileReloads.WithLabelValues("ok").Inc()
	g.log.Info("reloaded the tenants file", "path", g.cfg.TenantsFile, "tokens", n)
	return nil
}
