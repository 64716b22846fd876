package deploy

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/otlpgate/otlpgate/internal/listenlog"
	"github.com/otlpgate/otlpgate/internal/testkit"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	commonv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/common/v1"
	resourcev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/resource/v1"
	tracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/trace/v1"
)

// startTiers runs the edge (the DaemonSet) and the gateway (the Deployment) of objs with their
// containers' command lines as the kubelet hands them over and their environment (NODE_NAME as
// the downward API sets it), changed only where a test on one machine must: the listeners on
// 127.0.0.1:0, the spool and the OpenCensus socket in a temporary directory, the gateways'
// address (gatewayDNS) replaced by the gateway's, and whatever repl replaces (the upstreams'
// addresses). It returns the edge's OTLP/gRPC address.
func startTiers(t *testing.T, objs []object, gatewayDNS string, repl map[string]string) string {
	t.Helper()
	containers := map[string]container{}
	for _, o := range objs {
		if o.Kind == "DaemonSet" || o.Kind == "Deployment" {
			containers[o.Kind] = o.Spec.Template.Spec.Containers[0]
		}
	}
	start := func(kind string, repl map[string]string) string {
		c := containers[kind]
		var args []string
		for _, a := range kubeletArgs(t, kind, c) {
			for from, to := range repl {
				a = strings.ReplaceAll(a, from, to)
			}
			args = append(args, a)
		}
		var env []string
		for k, v := range containerEnv(t, kind, c) {
			env = append(env, k+"="+v)
		}
		log, exited := startOtlpgate(t, args, env)
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("%s %q:\n%s", kind, args, log.String())
			}
		})
		return testkit.WaitAddrs(t, log.String, exited, listenlog.GRPC)[0]
	}
	local := map[string]string{"-grpc.listen=:4317": "-grpc.listen=127.0.0.1:0", "-http.listen=:4318": "-http.listen=127.0.0.1:0",
		"-admin.listen=:8888": "-admin.listen=127.0.0.1:0", "-kafka.listen=:9093": "-kafka.listen=127.0.0.1:0"}
	for from, to := range repl {
		local[from] = to
	}
	gateway := start("Deployment", local)
	local[gatewayDNS] = gateway
	dir := t.TempDir()
	local["-spool.dir=/var/lib/otlpgate/spool"] = "-spool.dir=" + filepath.Join(dir, "spool")
	local["-uds.listen=/var/run/otlpgate/"] = "-uds.listen=" + dir + "/"
	return start("DaemonSet", local)
}

// resource is one resource of a request sent to the edge: its attributes and one span.
type resource struct {
	attrs  map[string]string
	span   string
	spanID uint64
}

// sendSpans exports one request of these resources to the edge over OTLP/gRPC, with the
// metadata md (a tenant header), and waits for its answer.
func sendSpans(t *testing.T, edge string, md metadata.MD, rs ...resource) {
	t.Helper()
	conn, err := grpc.NewClient(edge, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req := &coltracev1.ExportTraceServiceRequest{}
	for _, r := range rs {
		var attrs []*commonv1.KeyValue
		for _, k := range slices.Sorted(mapKeys(r.attrs)) {
			attrs = append(attrs, &commonv1.KeyValue{Key: k, Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: r.attrs[k]}}})
		}
		id := make([]byte, 8)
		for i := range id {
			id[i] = byte(r.spanID >> (8 * (7 - i)))
		}
		req.ResourceSpans = append(req.ResourceSpans, &tracev1.ResourceSpans{
			Resource: &resourcev1.Resource{Attributes: attrs},
			ScopeSpans: []*tracev1.ScopeSpans{{Spans: []*tracev1.Span{{
				TraceId: append([]byte{1, 2, 3, 4, 5, 6, 7, 8}, id...), SpanId: id,
				Name: r.span, Kind: tracev1.Span_SPAN_KIND_SERVER, StartTimeUnixNano: 1, EndTimeUnixNano: 2,
			}}}},
		})
	}
	ctx, cancel := context.WithTimeout(metadata.NewOutgoingContext(context.Background(), md), time.Minute)
	defer cancel()
	if _, err := coltracev1.NewTraceServiceClient(conn).Export(ctx, req, grpc.WaitForReady(true)); err != nil {
		t.Fatalf("export to the edge: %v", err)
	}
}

func mapKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// received waits for the span ids at the sink and returns every span it received, as
// "name [sorted resource attributes] header=value" with the header the request carried.
func received(t *testing.T, sink *testkit.GRPCSink, header string, ids ...uint64) []string {
	t.Helper()
	if missing := sink.WaitSpans(ids); missing != 0 {
		t.Fatalf("%d spans did not arrive: %s", missing, sink)
	}
	var got []string
	for _, r := range sink.Requests() {
		for _, rs := range testkit.Traces(t, r.Body).ResourceSpans {
			var attrs []string
			for _, kv := range rs.GetResource().GetAttributes() {
				attrs = append(attrs, kv.Key+"="+kv.GetValue().GetStringValue())
			}
			slices.Sort(attrs)
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					got = append(got, fmt.Sprintf("%s %v %s=%s", s.Name, attrs, header, strings.Join(r.MD.Get(header), "|")))
				}
			}
		}
	}
	slices.Sort(got)
	return got
}

// The chart's own command lines carry a span from an application to the Collector gateway: the
// edge and the gateway run with the args the chart renders by default, a Collector stand-in as
// the gateway's destination. The span arrives once, its resource labelled with the node's name.
func TestHelmFirstSpan(t *testing.T) {
	helm := helmBinary(t)
	collector := testkit.StartGRPCSink(t, "")
	out, err := render(t, helm, "", "gateway.destinations[0].name=collector", "gateway.destinations[0].endpoint="+collector.Addr())
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	edge := startTiers(t, decodeObjects(t, "defaults", out), "dns:///rel-otlpgate-gateway.observability.svc:4317", nil)
	sendSpans(t, edge, nil, resource{attrs: map[string]string{"service.name": "first-span"}, span: "first", spanID: 1})
	if got, want := received(t, collector, "x-scope-orgid", 1), []string{"first [k8s.node.name=node-1 service.name=first-span] x-scope-orgid="}; !slices.Equal(got, want) {
		t.Errorf("the Collector received %q, want %q", got, want)
	}
}

// The plain manifests' command lines do the same.
func TestKubernetesFirstSpan(t *testing.T) {
	var objs []object
	for _, o := range readManifests(t) {
		objs = append(objs, o)
	}
	collector := testkit.StartGRPCSink(t, "")
	edge := startTiers(t, objs, "dns:///otlpgate-gateway.observability.svc:4317",
		map[string]string{"endpoint=backend.observability.svc:4317": "endpoint=" + collector.Addr()})
	sendSpans(t, edge, nil, resource{attrs: map[string]string{"service.name": "first-span"}, span: "first", spanID: 1})
	if got, want := received(t, collector, "x-scope-orgid", 1), []string{"first [k8s.node.name=node-1 service.name=first-span] x-scope-orgid="}; !slices.Equal(got, want) {
		t.Errorf("the Collector received %q, want %q", got, want)
	}
}

// With the spool-and-tenants values set, each tenant's spans reach its own upstream with its
// tenant header, through the edge's unary calls to the gateways (forward-headers) and the
// gateway's routes (match-header); the edge's processing steps edited every resource, and the
// resource its -drop names never left it. (The gateway's trace sampling is turned off here: which
// traces it keeps is its own tests' business.)
func TestHelmTenantsAndProcessing(t *testing.T) {
	helm := helmBinary(t)
	acme, rest := testkit.StartGRPCSink(t, ""), testkit.StartGRPCSink(t, "")
	out, err := render(t, helm, chart+"/ci/spool-tenants-values.yaml", "gateway.processing.sampleTraces=")
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	edge := startTiers(t, decodeObjects(t, "spool-tenants", out), "dns:///rel-otlpgate-gateway.observability.svc:4317", map[string]string{
		"endpoint=mimir-acme.observability.svc:4317":             "endpoint=" + acme.Addr(),
		"endpoint=otel-collector-gateway.observability.svc:4317": "endpoint=" + rest.Addr(),
	})
	app := func(name string) map[string]string {
		return map[string]string{"service.name": name, "host.ip": "10.1.2.3"}
	}
	sendSpans(t, edge, metadata.Pairs("x-scope-orgid", "acme"),
		resource{attrs: app("checkout"), span: "acme-1", spanID: 1},
		resource{attrs: app("healthcheck-probe"), span: "dropped", spanID: 2})
	sendSpans(t, edge, metadata.Pairs("x-scope-orgid", "beta"), resource{attrs: app("search"), span: "beta-1", spanID: 3})
	sendSpans(t, edge, nil, resource{attrs: app("batch"), span: "shared-1", spanID: 4})
	const edits = "deployment.environment=production k8s.cluster.name=eu-1 k8s.node.name=node-1"
	if got, want := received(t, acme, "x-scope-orgid", 1), []string{"acme-1 [" + edits + " service.name=checkout] x-scope-orgid=acme"}; !slices.Equal(got, want) {
		t.Errorf("acme's upstream received %q, want %q", got, want)
	}
	if got, want := received(t, rest, "x-scope-orgid", 3, 4), []string{
		"beta-1 [" + edits + " service.name=search] x-scope-orgid=beta",
		"shared-1 [" + edits + " service.name=batch] x-scope-orgid=shared",
	}; !slices.Equal(got, want) {
		t.Errorf("the other tenants' upstream received %q, want %q", got, want)
	}
}
