package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/otlpgate/otlpgate/fastpath"
)

// finishTenantConfig reads -intake.headers and the destinations' match-header and
// forward-headers into cfg.tenants, and checks that they agree.
func finishTenantConfig(cfg *config) error {
	cfg.tenants.Headers = nil
	for _, h := range splitList(cfg.tenantHeaders) {
		cfg.tenants.Headers = append(cfg.tenants.Headers, strings.ToLower(h))
	}
	cfg.tenants.Routes = nil
	var err error
	if cfg.tenants.Rate, err = fastpath.ParseTenantRate(cfg.tenantRate, cfg.tenantBurst); err != nil {
		return err
	}
	if len(cfg.tenants.Headers) == 0 {
		if cfg.tenants.Rate.On() {
			return errors.New("-tenant.rate limits each tenant: give -intake.headers")
		}
		for _, c := range cfg.clients {
			if c.MatchHeader.Header != "" || len(c.ForwardHeaders) > 0 {
				return fmt.Errorf("-dest %s: match-header and forward-headers name tenant headers: give -intake.headers", c.Name)
			}
		}
		if cfg.tenants.Default != "" {
			return errors.New("-intake.headers.default needs -intake.headers")
		}
		return nil
	}
	matched := false
	for _, c := range cfg.clients {
		for _, h := range c.ForwardHeaders {
			if !slices.Contains(cfg.tenants.Headers, h) {
				return fmt.Errorf("-dest %s: forward-headers names %q, which is not one of -intake.headers (%s)", c.Name, h, strings.Join(cfg.tenants.Headers, ","))
			}
		}
		matched = matched || c.MatchHeader.Header != ""
	}
	if matched {
		for _, c := range cfg.clients {
			cfg.tenants.Routes = append(cfg.tenants.Routes, c.MatchHeader)
		}
	}
	if err := cfg.tenants.Validate(); err != nil {
		return err
	}
	cfg.spool.Meta = true // spooled requests keep their tenant
	return nil
}

// buildTenants makes the tenant table of -intake.headers, when given, and hands it to the
// pipeline and the intakes that read headers.
func buildTenants(cfg *config) error {
	if len(cfg.tenants.Headers) == 0 {
		return nil
	}
	ts, err := fastpath.NewTenants(cfg.tenants)
	if err != nil {
		return err
	}
	cfg.pipeline.Tenants, cfg.grpc.Tenants, cfg.http.Tenants = ts, ts, ts
	return nil
}
