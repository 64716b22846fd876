package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// At the real binary, a full tenant table (-intake.max-tenants 3: the default tuple, a and b)
// takes a new tenant c once a and b have been idle for -intake.tenant-idle, without a restart;
// every tenant's spans reach the upstream with its own header forwarded, and a, expired,
// comes back.
func TestBinaryTenantIdle(t *testing.T) {
	bin := buildBinary(t)
	sink := startTenantSink(t, "", false)
	g := startGateway(t, bin, "-batch.max-age", "20ms", "-intake.headers", "x-scope-orgid",
		"-intake.max-tenants", "3", "-intake.tenant-idle", "200ms",
		"-dest", "name=all,endpoint="+sink.addr+",protocol=v1,mode=unary,forward-headers=x-scope-orgid")
	waitReady(t, g)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := grpc.NewClient(g.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	tc := ptraceotlp.NewGRPCClient(conn)
	seed := byte(0)
	send := func(tenant string) error {
		seed++
		td := ptrace.NewTraces()
		sp := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		sp.SetName(tenant)
		sp.SetTraceID(pcommon.TraceID{seed, 1})
		sp.SetSpanID(pcommon.SpanID{seed, 1})
		_, err := tc.Export(metadata.AppendToOutgoingContext(ctx, "x-scope-orgid", tenant), ptraceotlp.NewExportRequestFromTraces(td))
		return err
	}
	for _, tn := range []string{"a", "b"} {
		if err := send(tn); err != nil {
			t.Fatalf("tenant %s: %v", tn, err)
		}
	}
	sent := map[string]int{"a": 1, "b": 1}
	// c is refused while a and b are fresh, and let in once they are idle: bounded retries.
	refused := 0
	for deadline := time.Now().Add(30 * time.Second); ; {
		err := send("c")
		if err == nil {
			sent["c"]++
			break
		}
		if status.Code(err) != codes.ResourceExhausted || time.Now().After(deadline) {
			t.Fatalf("tenant c after %d refusals: %v", refused, err)
		}
		refused++
		time.Sleep(50 * time.Millisecond)
	}
	if got := scrape(t, g.admin, "otlpgate_tenants_expired_total"); got < 1 {
		t.Fatalf("otlpgate_tenants_expired_total %v with c admitted", got)
	}
	if got := scrape(t, g.admin, "otlpgate_tenant_refused_requests_total", `reason="max_tenants"`); got != float64(refused) {
		t.Fatalf("max_tenants refusals counted %v, want %d", got, refused)
	}
	// a comes back once the table has room again.
	for deadline := time.Now().Add(30 * time.Second); ; {
		err := send("a")
		if err == nil {
			sent["a"]++
			break
		}
		if status.Code(err) != codes.ResourceExhausted || time.Now().After(deadline) {
			t.Fatalf("tenant a back: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	waitSpans(t, g, sent["a"]+sent["b"]+sent["c"], sink)
	sink.mu.Lock()
	defer sink.mu.Unlock()
	got := map[string]int{}
	for _, c := range sink.calls {
		got[c.org] += len(c.spans)
	}
	if len(got) != 3 || got["a"] != sent["a"] || got["b"] != sent["b"] || got["c"] != sent["c"] {
		t.Fatalf("the upstream got %v by forwarded header, want %v", got, sent)
	}
}

// -intake.tenant-idle: 10m by default, 0 keeps tenants, a negative value is refused.
func TestTenantIdleFlag(t *testing.T) {
	for _, c := range []struct {
		args    []string
		want    time.Duration
		wantErr string
	}{
		{nil, 10 * time.Minute, ""},
		{[]string{"-intake.tenant-idle", "0"}, 0, ""},
		{[]string{"-intake.tenant-idle", "90s"}, 90 * time.Second, ""},
		{[]string{"-intake.tenant-idle", "-1s"}, 0, "-intake.tenant-idle -1s must not be negative"},
	} {
		cfg, err := parseConfig(append([]string{"-intake.headers", "x-scope-orgid"}, c.args...))
		switch {
		case c.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%v: error %v, want %q", c.args, err, c.wantErr)
			}
		case err != nil || cfg.gw.Tenants.Idle != c.want:
			t.Errorf("%v: idle %v, %v; want %v", c.args, cfg.gw.Tenants.Idle, err, c.want)
		}
	}
}
