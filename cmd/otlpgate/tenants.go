package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/otlpgate/otlpgate/fastpath/tenant"
	"github.com/otlpgate/otlpgate/internal/bytesize"
)

// finishTenantConfig reads -intake.headers and -tenant.rate into cfg.tenants; the gateway
// checks them against the destinations' match-header and forward-headers.
func finishTenantConfig(cfg *config) error {
	cfg.tenants.Headers = nil
	for _, h := range splitList(cfg.tenantHeaders) {
		cfg.tenants.Headers = append(cfg.tenants.Headers, strings.ToLower(h))
	}
	var err error
	cfg.tenants.Rate, err = parseTenantRate(cfg.tenantRate, cfg.tenantBurst)
	return err
}

// parseTenantRate reads -tenant.rate and -tenant.burst: a rate such as 10MiB/s, 500KB/s,
// 1048576/s (bytes) or 5000items/s, and a burst in the same unit (20MiB, 10000items); an empty
// burst is one second of the rate. An empty rate limits nothing (and takes no burst).
func parseTenantRate(rate, burst string) (tenant.Rate, error) {
	rate, burst = strings.TrimSpace(rate), strings.TrimSpace(burst)
	if rate == "" {
		if burst != "" {
			return tenant.Rate{}, errors.New("-tenant.burst needs -tenant.rate")
		}
		return tenant.Rate{}, nil
	}
	amount, ok := strings.CutSuffix(rate, "/s")
	if !ok {
		return tenant.Rate{}, fmt.Errorf("-tenant.rate %q: want bytes or items per second, e.g. 10MiB/s or 5000items/s", rate)
	}
	var r tenant.Rate
	n, items, err := parseTokens(amount)
	if err != nil || n <= 0 {
		return tenant.Rate{}, fmt.Errorf("-tenant.rate %q: want a positive amount per second, e.g. 10MiB/s or 5000items/s", rate)
	}
	r.PerSecond, r.Items, r.Burst = float64(n), items, float64(n)
	if burst != "" {
		b, bItems, err := parseTokens(burst)
		switch {
		case err != nil || b <= 0:
			return tenant.Rate{}, fmt.Errorf("-tenant.burst %q: want a positive amount, e.g. 20MiB or 10000items", burst)
		case bItems != items:
			return tenant.Rate{}, fmt.Errorf("-tenant.burst %q counts %s, -tenant.rate %q the other", burst, unitName(bItems), rate)
		}
		r.Burst = float64(b)
	}
	return r, nil
}

func unitName(items bool) string {
	if items {
		return "items"
	}
	return "bytes"
}

// parseTokens reads an amount of items (5000items) or bytes (10MiB, 1000).
func parseTokens(s string) (int64, bool, error) {
	if n, ok := strings.CutSuffix(s, "items"); ok {
		v, err := strconv.ParseInt(strings.TrimSpace(n), 10, 64)
		return v, true, err
	}
	v, err := bytesize.Parse(s, 1<<50)
	return v, false, err
}
