package main

import (
	"slices"
	"testing"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/internal/testkit"
)

// Both hops on otlpgate's own gRPC transport: the OpenTelemetry Go SDK (grpc-go) sends traces,
// metrics and logs to the binary's intake on -grpc.transport=otlpgate, and a destination on
// transport=otlpgate delivers them to a grpc-go upstream that decodes them with the
// Collector's pdata: exactly the SDK's spans, metrics and records arrive, each once.
func TestBinaryOwnTransportBothHops(t *testing.T) {
	bin := buildBinary(t)
	up := startUpstream(t)
	g := startGateway(t, bin, "-batch.max-age", "10ms", "-grpc.transport", "otlpgate",
		"-dest", "name=up,endpoint="+up.Addr()+",protocol=v1,transport=otlpgate,retry-initial=20ms")
	waitReady(t, g)
	sendThreeSignals(t, g.grpcAddr)
	testkit.WaitFor(t, "the upstream to receive every signal", func() bool {
		return len(spanNames(up)) == 3 && len(metricNames(up)) == 2 && len(logBodies(up)) == 2
	})
	if got := spanNames(up); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("spans %v, want a, b, c", got)
	}
	if got := metricNames(up); !slices.Equal(got, []string{"order.value", "orders.placed"}) {
		t.Errorf("metrics %v", got)
	}
	if got := logBodies(up); !slices.Equal(got, []string{"one", "two"}) {
		t.Errorf("log records %v", got)
	}
	for sig := range fastpath.NumSignals {
		if n := up.Refused(sig); n != 0 {
			t.Errorf("%s: the strict upstream refused %d requests: %v", sig, n, up.LastError())
		}
	}
	if n := scrape(t, g.admin, "otlpgate_client_acknowledged_requests_total", `destination="up"`); n < 3 {
		t.Errorf("the destination counted %v acknowledged requests, want at least one per signal", n)
	}
}

// OTEP streams on otlpgate's own transport between two binaries: the SDK sends to an edge
// (-grpc.transport=otlpgate) whose destination is a gateway on protocol=otep,mode=stream,
// transport=otlpgate, re-opening its streams every two requests; the gateway delivers to the
// strict v1 upstream on transport=otlpgate too. Exactly the SDK's spans, metrics and records
// arrive, each once, and the edge's answers came over its streams.
func TestBinaryOwnTransportOTEPStream(t *testing.T) {
	bin := buildBinary(t)
	up := startUpstream(t)
	gw := startGateway(t, bin, "-batch.max-age", "10ms",
		"-dest", "name=up,endpoint="+up.Addr()+",protocol=v1,transport=otlpgate,retry-initial=20ms")
	waitReady(t, gw)
	edge := startGateway(t, bin, "-batch.max-age", "10ms", "-grpc.transport", "otlpgate",
		"-dest", "name=gw,endpoint="+gw.grpcAddr+",protocol=otep,mode=stream,streams=2,window=8,rebalance-requests=2,transport=otlpgate,retry-initial=20ms")
	waitReady(t, edge)
	sendThreeSignals(t, edge.grpcAddr)
	testkit.WaitFor(t, "the upstream to receive every signal", func() bool {
		return len(spanNames(up)) == 3 && len(metricNames(up)) == 2 && len(logBodies(up)) == 2
	})
	if got := spanNames(up); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("spans %v, want a, b, c", got)
	}
	if got := metricNames(up); !slices.Equal(got, []string{"order.value", "orders.placed"}) {
		t.Errorf("metrics %v", got)
	}
	if got := logBodies(up); !slices.Equal(got, []string{"one", "two"}) {
		t.Errorf("log records %v", got)
	}
	for sig := range fastpath.NumSignals {
		if n := up.Refused(sig); n != 0 {
			t.Errorf("%s: the strict upstream refused %d requests: %v", sig, n, up.LastError())
		}
	}
	if n := scrape(t, edge.admin, "otlpgate_client_acknowledged_requests_total", `destination="gw"`); n < 3 {
		t.Errorf("the edge counted %v acknowledged requests, want at least one per signal", n)
	}
	if n := scrape(t, edge.admin, "otlpgate_client_streams_opened_total", `destination="gw"`); n < 3 {
		t.Errorf("the edge opened %v streams, want at least one per signal", n)
	}
	if n := scrape(t, edge.admin, "otlpgate_client_resent_requests_total", `destination="gw"`); n != 0 {
		t.Errorf("the edge re-sent %v requests, want none", n)
	}
}
