package main

import (
	"bytes"
	"context"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/internal/strictsink"
	"github.com/otlpgate/otlpgate/internal/testkit"
)

// routedTraces is one request of three resources, service.name checkout, cart and payments,
// each with its own spans: span ids number 1 + 16*resource + span.
func routedTraces(spansEach int, base byte) (ptrace.Traces, map[string][]pcommon.SpanID) {
	td := ptrace.NewTraces()
	ids := map[string][]pcommon.SpanID{}
	for r, svc := range []string{"checkout", "cart", "payments"} {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("host.name", "h1")
		rs.Resource().Attributes().PutStr("service.name", svc)
		sps := rs.ScopeSpans().AppendEmpty().Spans()
		for s := range spansEach {
			sp := sps.AppendEmpty()
			id := pcommon.SpanID{base, byte(r), byte(s)}
			sp.SetSpanID(id)
			sp.SetTraceID(pcommon.TraceID{base, byte(r), 1})
			sp.SetName(svc)
			ids[svc] = append(ids[svc], id)
		}
	}
	return td, ids
}

// received returns the span ids an upstream got, by service.name of their resource, and
// fails on a span that arrived twice.
func received(t *testing.T, u *strictsink.Sink) map[string][]pcommon.SpanID {
	t.Helper()
	out := map[string][]pcommon.SpanID{}
	seen := map[pcommon.SpanID]bool{}
	for _, td := range u.Traces() {
		for _, rs := range td.ResourceSpans().All() {
			svc, _ := rs.Resource().Attributes().Get("service.name")
			for _, ss := range rs.ScopeSpans().All() {
				for _, sp := range ss.Spans().All() {
					if seen[sp.SpanID()] {
						t.Errorf("span %v delivered twice", sp.SpanID())
					}
					seen[sp.SpanID()] = true
					out[svc.Str()] = append(out[svc.Str()], sp.SpanID())
				}
			}
		}
	}
	return out
}

func sameIDs(a, b []pcommon.SpanID) bool {
	cmp := func(x, y pcommon.SpanID) int { return bytes.Compare(x[:], y[:]) }
	a, b = slices.Clone(a), slices.Clone(b)
	slices.SortFunc(a, cmp)
	slices.SortFunc(b, cmp)
	return slices.Equal(a, b)
}

// The proof: one request carrying the resources of checkout, cart and payments goes
// through the real binary to two upstreams that decode with the Collector's pdata, one taking
// match=resource:service.name=checkout and one the rest. Each receives exactly its resources,
// every span whole and once; the client gets one Success for the whole request, over gRPC and
// over OTLP/HTTP protobuf and JSON, with and without the spool. Logs are routed alike.
func TestBinaryResourceRoutes(t *testing.T) {
	bin := buildBinary(t)
	for _, spool := range []bool{false, true} {
		name := "memory"
		if spool {
			name = "spool"
		}
		t.Run(name, func(t *testing.T) {
			co, rest := startUpstream(t), startUpstream(t)
			args := []string{"-batch.max-age", "10ms",
				"-dest", "name=co,endpoint=" + co.Addr() + ",protocol=v1,mode=unary,retry-initial=20ms,match=resource:service.name=checkout",
				"-dest", "name=rest,endpoint=" + rest.Addr() + ",protocol=v1,mode=unary,retry-initial=20ms"}
			if spool {
				args = append(args, "-spool.dir", filepath.Join(t.TempDir(), "spool"))
			}
			g := startGateway(t, bin, args...)
			httpAddr := g.http
			waitReady(t, g)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()

			want := map[string][]pcommon.SpanID{}
			add := func(ids map[string][]pcommon.SpanID) {
				for k, v := range ids {
					want[k] = append(want[k], v...)
				}
			}
			// gRPC v1: one Export, one answer.
			conn, err := grpc.NewClient(g.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			td, ids := routedTraces(5, 1)
			add(ids)
			resp, err := ptraceotlp.NewGRPCClient(conn).Export(ctx, ptraceotlp.NewExportRequestFromTraces(td))
			if err != nil {
				t.Fatalf("gRPC Export: %v", err)
			}
			if ps := resp.PartialSuccess(); ps.RejectedSpans() != 0 || ps.ErrorMessage() != "" {
				t.Fatalf("gRPC partial success: %d rejected, %q", ps.RejectedSpans(), ps.ErrorMessage())
			}
			// OTLP/HTTP, protobuf and JSON.
			for i, ct := range []string{"application/x-protobuf", "application/json"} {
				td, ids := routedTraces(3, byte(2+i))
				add(ids)
				req := ptraceotlp.NewExportRequestFromTraces(td)
				var body []byte
				if i == 0 {
					body, err = req.MarshalProto()
				} else {
					body, err = req.MarshalJSON()
				}
				if err != nil {
					t.Fatal(err)
				}
				r, err := http.Post("http://"+httpAddr+"/v1/traces", ct, bytes.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				r.Body.Close()
				if r.StatusCode != http.StatusOK {
					t.Fatalf("OTLP/HTTP %s: %d", ct, r.StatusCode)
				}
			}
			// Logs: one request, checkout's record to co, cart's to the rest.
			ld := plog.NewLogs()
			for _, svc := range []string{"cart", "checkout"} {
				rl := ld.ResourceLogs().AppendEmpty()
				rl.Resource().Attributes().PutStr("service.name", svc)
				rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty().Body().SetStr("log of " + svc)
			}
			lbody, _ := (&plog.ProtoMarshaler{}).MarshalLogs(ld)
			r, err := http.Post("http://"+httpAddr+"/v1/logs", "application/x-protobuf", bytes.NewReader(lbody))
			if err != nil {
				t.Fatal(err)
			}
			r.Body.Close()
			if r.StatusCode != http.StatusOK {
				t.Fatalf("OTLP/HTTP logs: %d", r.StatusCode)
			}

			total := 0
			for _, v := range want {
				total += len(v)
			}
			testkit.WaitFor(t, "every span and log record at its upstream", func() bool {
				return len(co.Spans())+len(rest.Spans()) >= total && co.Accepted(fastpath.Logs)+rest.Accepted(fastpath.Logs) >= 2
			})
			gotCo, gotRest := received(t, co), received(t, rest)
			if len(gotCo) != 1 || !sameIDs(gotCo["checkout"], want["checkout"]) {
				t.Errorf("co received %v, want checkout's %d spans only", gotCo, len(want["checkout"]))
			}
			if len(gotRest) != 2 || !sameIDs(gotRest["cart"], want["cart"]) || !sameIDs(gotRest["payments"], want["payments"]) {
				t.Errorf("rest received %v, want cart's and payments' spans only", gotRest)
			}
			logsOf := func(u *strictsink.Sink) (out []string) {
				for _, ld := range u.Logs() {
					for _, rl := range ld.ResourceLogs().All() {
						for _, sl := range rl.ScopeLogs().All() {
							for _, lr := range sl.LogRecords().All() {
								out = append(out, lr.Body().Str())
							}
						}
					}
				}
				return out
			}
			if got := logsOf(co); !slices.Equal(got, []string{"log of checkout"}) {
				t.Errorf("co's logs: %q", got)
			}
			if got := logsOf(rest); !slices.Equal(got, []string{"log of cart"}) {
				t.Errorf("rest's logs: %q", got)
			}
			// Every request of three services and the logs request were split in two.
			if n := scrape(t, g.admin, "otlpgate_route_split_requests_total"); n != 4 {
				t.Errorf("otlpgate_route_split_requests_total = %v, want 4", n)
			}
		})
	}
}

// A destination set without one that takes the rest filters: a resource no rule matches is
// left out and counted, the client is answered Success, and a request of such resources only
// admits nothing. A malformed match stops the start with an error naming it.
func TestBinaryResourceRoutesUnrouted(t *testing.T) {
	bin := buildBinary(t)
	co := startUpstream(t)
	g := startGateway(t, bin, "-batch.max-age", "10ms",
		"-dest", "name=co,endpoint="+co.Addr()+",protocol=v1,mode=unary,match=resource:service.name=check*|pay*")
	httpAddr := g.http
	waitReady(t, g)
	td, want := routedTraces(4, 1)
	body, _ := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	r, err := http.Post("http://"+httpAddr+"/v1/traces", "application/x-protobuf", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusOK {
		t.Fatalf("OTLP/HTTP: %d", r.StatusCode)
	}
	testkit.WaitFor(t, "checkout's and payments' spans", func() bool { return len(co.Spans()) >= 8 })
	got := received(t, co)
	if len(got) != 2 || !sameIDs(got["checkout"], want["checkout"]) || !sameIDs(got["payments"], want["payments"]) {
		t.Errorf("co received %v", got)
	}
	if n := scrape(t, g.admin, "otlpgate_route_unrouted_items_total", `signal="traces"`); n != 4 {
		t.Errorf("unrouted items %v, want cart's 4", n)
	}
	if n := scrape(t, g.admin, "otlpgate_route_unrouted_resources_total", `signal="traces"`); n != 1 {
		t.Errorf("unrouted resources %v, want 1", n)
	}

	for _, c := range []struct{ match, want string }{
		{"service.name=checkout", "want resource:KEY=VALUE"},
		{"resource:=x", "want resource:KEY=VALUE"},
		{"resource:service.name=a*b", "'*' may only end a value"},
	} {
		out, err := runBinary(t, bin, "-dest", "name=co,endpoint="+co.Addr()+",match="+c.match)
		if err == nil || !bytes.Contains(out, []byte(c.want)) {
			t.Errorf("match=%s: %v, output %q, want %q", c.match, err, out, c.want)
		}
	}
}

// runBinary runs the binary to its end (a start-up error), with its intakes on free ports.
func runBinary(t *testing.T, bin string, args ...string) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	args = append([]string{"-grpc.listen", anyPort, "-admin.listen", anyPort, "-http.listen", anyPort,
		"-kafka.listen", anyPort, "-uds.listen", filepath.Join(dir, "oc.sock"), "-file.path", filepath.Join(dir, "f")}, args...)
	return exec.CommandContext(ctx, bin, args...).CombinedOutput()
}

// Tenants and resource routes together: acme's resources go between the two destinations
// that take acme, by service.name (checkout to one, the rest to the other); beta's, whole, to
// beta's destination, whatever their services. The spool keeps each request's tenant and the
// feeders route its resources among that tenant's destinations.
func TestBinaryResourceRoutesWithTenants(t *testing.T) {
	bin := buildBinary(t)
	for _, spool := range []bool{false, true} {
		t.Run(map[bool]string{false: "memory", true: "spool"}[spool], func(t *testing.T) {
			acmeCo, acmeRest, beta := startUpstream(t), startUpstream(t), startUpstream(t)
			dest := func(name, addr, extra string) string {
				return "name=" + name + ",endpoint=" + addr + ",protocol=v1,mode=unary,retry-initial=20ms," + extra
			}
			args := []string{"-batch.max-age", "10ms", "-intake.headers", "x-scope-orgid",
				"-dest", dest("acme-co", acmeCo.Addr(), "match-header=x-scope-orgid:acme,match=resource:service.name=checkout"),
				"-dest", dest("acme-rest", acmeRest.Addr(), "match-header=x-scope-orgid:acme"),
				"-dest", dest("beta", beta.Addr(), "match-header=x-scope-orgid:beta")}
			if spool {
				args = append(args, "-spool.dir", filepath.Join(t.TempDir(), "spool"))
			}
			g := startGateway(t, bin, args...)
			httpAddr := g.http
			waitReady(t, g)
			send := func(org string, base byte) map[string][]pcommon.SpanID {
				td, ids := routedTraces(3, base)
				body, _ := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
				req, _ := http.NewRequest(http.MethodPost, "http://"+httpAddr+"/v1/traces", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/x-protobuf")
				req.Header.Set("X-Scope-OrgID", org)
				r, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				r.Body.Close()
				if r.StatusCode != http.StatusOK {
					t.Fatalf("%s: %d", org, r.StatusCode)
				}
				return ids
			}
			a, b := send("acme", 1), send("beta", 2)
			testkit.WaitFor(t, "every span at its upstream", func() bool {
				return len(acmeCo.Spans())+len(acmeRest.Spans())+len(beta.Spans()) >= 18
			})
			if got := received(t, acmeCo); len(got) != 1 || !sameIDs(got["checkout"], a["checkout"]) {
				t.Errorf("acme-co received %v", got)
			}
			if got := received(t, acmeRest); len(got) != 2 || !sameIDs(got["cart"], a["cart"]) || !sameIDs(got["payments"], a["payments"]) {
				t.Errorf("acme-rest received %v", got)
			}
			if got := received(t, beta); len(got) != 3 || !sameIDs(got["checkout"], b["checkout"]) || !sameIDs(got["cart"], b["cart"]) {
				t.Errorf("beta received %v", got)
			}
		})
	}
}
