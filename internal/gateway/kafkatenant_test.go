package gateway

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/otlpgate/otlpgate/client"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
)

// A tenant crosses Kafka: the producing otlpgate takes requests of three tenants (and of none)
// over gRPC and writes each batch's tenant into its records' headers (forward-headers); the
// consuming otlpgate reads the tenant from them (-kafka.consume.tenant-from-headers) and its
// match-header routes send acme's spans to one upstream, beta's to another and the rest to
// the destination without a match-header: each span exactly once, at its tenant's upstream.
func TestKafkaTenantAcrossKafka(t *testing.T) {
	kc := startKafka(t)
	a, b, rest := startUpstream(t), startUpstream(t), startUpstream(t)
	cons := consumeConfig(kc, "tenants-across", a)
	cons.Tenants.Headers = []string{"x-scope-orgid"}
	cons.KafkaConsume.TenantFromHeaders = true
	cons.Destinations = nil
	for _, spec := range []string{destSpec("a", a.addr, "match-header=x-scope-orgid:acme"),
		destSpec("b", b.addr, "match-header=x-scope-orgid:beta"), destSpec("rest", rest.addr)} {
		d, err := client.ParseDest(spec, client.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		cons.Destinations = append(cons.Destinations, d)
	}
	cg := startGateway(t, cons)

	prod := testConfig()
	prod.Tenants.Headers = []string{"x-scope-orgid"}
	prod.Destinations = []client.Config{kafkaDest(t, kc, "partition=trace_id,forward-headers=x-scope-orgid")}
	pg := startGateway(t, prod)
	conn, err := grpc.NewClient(pg.GRPCAddr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	want := map[*upstream]map[uint64]int{a: {}, b: {}, rest: {}}
	tenants := []struct {
		name string
		to   *upstream
	}{{"acme", a}, {"beta", b}, {"gamma", rest}, {"", rest}}
	for i := range 40 {
		tn := tenants[i%len(tenants)]
		id := uint64(i + 1)
		ctx := context.Background()
		if tn.name != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "x-scope-orgid", tn.name)
		}
		var req coltracev1.ExportTraceServiceRequest
		if err := req.UnmarshalVT(traceBody(t, 0, id, id+1000)); err != nil {
			t.Fatal(err)
		}
		if _, err := coltracev1.NewTraceServiceClient(conn).Export(ctx, &req); err != nil {
			t.Fatal(err)
		}
		want[tn.to][id], want[tn.to][id+1000] = 1, 1
	}
	if err := pg.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}

	// Each record carries its batch's tenant, and only that: none for the requests without one.
	for _, r := range readRecordsRaw(t, kc, "otlp_spans") {
		var hs []string
		for _, h := range r.Headers {
			hs = append(hs, h.Key+"="+string(h.Value))
		}
		if len(hs) > 1 || (len(hs) == 1 && !strings.HasPrefix(hs[0], "x-scope-orgid=")) {
			t.Errorf("record %d/%d has headers %v, want at most its tenant's", r.Partition, r.Offset, hs)
		}
	}

	got := func() string {
		var out []string
		for _, u := range []*upstream{a, b, rest} {
			u.mu.Lock()
			out = append(out, fmt.Sprint(u.ids))
			u.mu.Unlock()
		}
		return strings.Join(out, " ")
	}
	wanted := fmt.Sprint(want[a]) + " " + fmt.Sprint(want[b]) + " " + fmt.Sprint(want[rest])
	eventually(t, func() string { return "got " + got() + ", want " + wanted }, func() bool { return got() == wanted })
	if err := cg.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got() != wanted {
		t.Fatalf("after shutdown: got %s, want %s", got(), wanted)
	}
}

// readRecordsRaw is every record of topic now, read from the start.
func readRecordsRaw(t *testing.T, c interface{ ListenAddrs() []string }, topic string) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []*kgo.Record
	for empty := 0; empty < 2; {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		n := 0
		fs.EachRecord(func(r *kgo.Record) { n++; out = append(out, r) })
		if n == 0 {
			empty++
		} else {
			empty = 0
		}
	}
	return out
}
