package gateway

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatautil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/otlpgate/otlpgate/client"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	_ "github.com/otlpgate/otlpgate/internal/protoreg"
	"github.com/otlpgate/otlpgate/internal/testkit"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	commonv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/common/v1"
	resourcev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/resource/v1"
	tracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/trace/v1"
	"github.com/otlpgate/otlpgate/spool"
)

// brokersDieWhole makes a broker the cluster removes (RemoveNode) close the connections it
// accepted, as a broker process that stops takes its connections with it. kfake closes only the
// removed node's listener: a client's open connection to it stays answered by a broker that can
// never lead a partition again (AddNode makes a new one under the same id and port), and a client
// that did not see the node leave the metadata keeps its connection and asks that broker for the
// partitions the new one leads, for ever (TestKafkaConsumeBrokerRestart stalled so about one run
// in eight; a plain kgo consumer stalls the same way).
func brokersDieWhole() kfake.Opt {
	return kfake.ListenFn(func(network, addr string) (net.Listener, error) {
		ln, err := net.Listen(network, addr)
		if err != nil {
			return nil, err
		}
		return &dyingListener{Listener: ln, conns: map[net.Conn]struct{}{}}, nil
	})
}

// dyingListener closes the connections it accepted when it is closed.
type dyingListener struct {
	net.Listener
	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]struct{}
}

func (l *dyingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		c.Close()
		return nil, net.ErrClosed
	}
	l.conns[c] = struct{}{}
	return &dyingConn{Conn: c, l: l}, nil
}

func (l *dyingListener) Close() error {
	err := l.Listener.Close()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	for c := range l.conns {
		c.Close()
	}
	clear(l.conns)
	return err
}

// dyingConn forgets itself in its listener when it is closed.
type dyingConn struct {
	net.Conn
	l *dyingListener
}

func (c *dyingConn) Close() error {
	c.l.mu.Lock()
	delete(c.l.conns, c.Conn)
	c.l.mu.Unlock()
	return c.Conn.Close()
}

// kafkaPartitions is the partitions of each topic of the test clusters.
const kafkaPartitions = 6

// startKafka is a cluster of three brokers in the test process, with the Collector's three
// topics.
func startKafka(t *testing.T, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(3), kfake.SeedTopics(kafkaPartitions, "otlp_spans", "otlp_metrics", "otlp_logs")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// kafkaDest is a -dest of protocol kafka to c with extra keys, read as the command line reads it.
func kafkaDest(t *testing.T, c *kfake.Cluster, extra string) client.Config {
	t.Helper()
	spec := "name=kafka,protocol=kafka,brokers=" + strings.Join(c.ListenAddrs(), ",") + ",retry-initial=20ms,retry-max=200ms"
	if !strings.Contains(extra, "ack-timeout") {
		spec += ",ack-timeout=2s"
	}
	if extra != "" {
		spec += "," + extra
	}
	d, err := client.ParseDest(spec, client.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// kafkaRecord is one record read back, decoded by the Collector's own unmarshaler.
type kafkaRecord struct {
	size      int
	partition int32
	key       string
	traces    ptrace.Traces
}

// readSpans consumes topic from the start until it holds want spans (bounded), and returns its
// records decoded as a Collector's Kafka receiver decodes otlp_proto.
func readSpans(t *testing.T, c *kfake.Cluster, topic string, want int) []kafkaRecord {
	t.Helper()
	return readRecords(t, c, topic, want, &ptrace.ProtoUnmarshaler{})
}

// readRecords is readSpans with the Collector's decoder of the records' encoding, and the
// consumer's options (TLS, SASL).
func readRecords(t *testing.T, c *kfake.Cluster, topic string, want int, dec ptrace.Unmarshaler, opts ...kgo.Opt) []kafkaRecord {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []kafkaRecord
	spans := 0
	deadline := time.Now().Add(waitFor)
	for spans < want {
		if time.Now().After(deadline) {
			t.Fatalf("%d spans in %s within %v, want %d", spans, topic, waitFor, want)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			td, err := dec.UnmarshalTraces(r.Value)
			if err != nil {
				t.Fatalf("record at %d/%d: the Collector's decoder refuses it: %v", r.Partition, r.Offset, err)
			}
			spans += td.SpanCount()
			out = append(out, kafkaRecord{size: len(r.Value), partition: r.Partition, key: string(r.Key), traces: td})
		})
	}
	return out
}

// spanIDsOf is every span id of the records, with how often it came.
func spanIDsOf(recs []kafkaRecord) map[string]int {
	ids := map[string]int{}
	for _, r := range recs {
		rss := r.traces.ResourceSpans()
		for i := range rss.Len() {
			sss := rss.At(i).ScopeSpans()
			for j := range sss.Len() {
				spans := sss.At(j).Spans()
				for k := range spans.Len() {
					ids[spans.At(k).SpanID().String()]++
				}
			}
		}
	}
	return ids
}

// sdkSpans sends traces of spansPer spans each through the OpenTelemetry SDK to the gateway's
// OTLP/gRPC intake, and returns the spans the SDK ended.
func sdkSpans(t *testing.T, g *Gateway, traces, spansPer int) []sdktrace.ReadOnlySpan {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(g.GRPCAddr().String()), otlptracegrpc.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec),
		sdktrace.WithBatcher(exp, sdktrace.WithMaxExportBatchSize(50)),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "kafka-test"))))
	tr := tp.Tracer("otlpgate-kafka-test")
	for i := range traces {
		rctx, root := tr.Start(ctx, fmt.Sprintf("root-%d", i), trace.WithSpanKind(trace.SpanKindServer))
		for j := 1; j < spansPer; j++ {
			_, sp := tr.Start(rctx, fmt.Sprintf("child-%d-%d", i, j), trace.WithAttributes(attribute.Int("j", j)))
			sp.End()
		}
		root.End()
	}
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	return rec.Ended()
}

// Spans sent by the OpenTelemetry SDK over OTLP/gRPC reach Kafka as records a Collector's
// Kafka receiver decodes, exactly once each, in the Collector's default topic; with
// partition=trace_id each trace is one record keyed by its trace id in hex, in the partition
// the Collector's exporter picks for that key, so every span of a trace lands in one partition.
func TestKafkaDestinationSDKSpans(t *testing.T) {
	for _, tc := range []struct {
		name, keys string
	}{
		{"round_robin", "compression=zstd"},
		{"trace_id", "partition=trace_id,compression=gzip"},
		{"trace_id_small_records", "partition=trace_id,max-message-bytes=2KiB,compression=lz4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kc := startKafka(t)
			cfg := testConfig()
			cfg.Destinations = []client.Config{kafkaDest(t, kc, tc.keys)}
			g := startGateway(t, cfg)
			ended := sdkSpans(t, g, 40, 5)
			if len(ended) != 200 {
				t.Fatalf("the SDK ended %d spans, want 200", len(ended))
			}
			if err := g.Shutdown(context.Background()); err != nil {
				t.Fatalf("Shutdown: %v", err)
			}
			recs := readSpans(t, kc, "otlp_spans", len(ended))
			got := spanIDsOf(recs)
			if len(got) != len(ended) {
				t.Errorf("%d distinct spans in Kafka, the SDK ended %d", len(got), len(ended))
			}
			for _, s := range ended {
				if n := got[s.SpanContext().SpanID().String()]; n != 1 {
					t.Errorf("span %s is in Kafka %d times", s.SpanContext().SpanID(), n)
				}
			}
			if !strings.HasPrefix(tc.name, "trace_id") {
				return
			}
			partOf := map[string]int32{}
			for _, r := range recs {
				rss := r.traces.ResourceSpans()
				for i := range rss.Len() {
					sss := rss.At(i).ScopeSpans()
					for j := range sss.Len() {
						spans := sss.At(j).Spans()
						for k := range spans.Len() {
							id := spans.At(k).TraceID()
							if r.key != hex.EncodeToString(id[:]) {
								t.Fatalf("a span of trace %x is in a record keyed %q", id, r.key)
							}
							if p, ok := partOf[r.key]; ok && p != r.partition {
								t.Fatalf("trace %s is in partitions %d and %d", r.key, p, r.partition)
							}
							partOf[r.key] = r.partition
						}
					}
				}
				if want := saramaPartition(r.key, kafkaPartitions); r.partition != want {
					t.Errorf("trace %s is in partition %d; the Collector's exporter puts it in %d", r.key, r.partition, want)
				}
			}
			if len(partOf) != 40 {
				t.Errorf("%d traces in Kafka, want 40", len(partOf))
			}
		})
	}
}

// saramaPartition is the partition the Collector's Kafka exporter (franz-go with its Sarama
// compatible hasher) picks for key: 32-bit FNV-1a, as a signed number, modulo n, made positive.
func saramaPartition(key string, n int32) int32 {
	h := uint32(2166136261)
	for i := 0; i < len(key); i++ {
		h ^= uint32(key[i])
		h *= 16777619
	}
	p := int32(h) % n
	if p < 0 {
		p = -p
	}
	return p
}

// refuseProduce makes every broker close the connection of each produce request until the
// returned function is called; it reports how many it refused.
func refuseProduce(c *kfake.Cluster) (restore func(), refused *atomic.Int64) {
	var down atomic.Bool
	down.Store(true)
	refused = new(atomic.Int64)
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		if !down.Load() {
			c.DropControl()
			return nil, nil, false
		}
		c.KeepControl()
		refused.Add(1)
		return nil, fmt.Errorf("broker down"), true
	})
	var once sync.Once
	return func() { once.Do(func() { down.Store(false) }) }, refused
}

// exportIDs sends one span per id over OTLP/gRPC, each in its own trace, and returns each
// call's error.
func exportIDs(t *testing.T, g *Gateway, ids ...uint64) []error {
	t.Helper()
	conn, err := grpc.NewClient(g.GRPCAddr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() {
			var req coltracev1.ExportTraceServiceRequest
			if err := req.UnmarshalVT(traceBody(t, 0, id)); err != nil {
				errs[i] = err
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), waitFor)
			defer cancel()
			_, errs[i] = coltracev1.NewTraceServiceClient(conn).Export(ctx, &req)
		})
	}
	wg.Wait()
	return errs
}

// While the brokers refuse every produce request, nothing is acknowledged that Kafka did not
// take: with -ack=upstream the client is answered with a failure once the destination's retry
// budget is spent, and the status shows the destination down with the broker's error; once
// the brokers take produce requests again, everything is delivered.
func TestKafkaDestinationBrokersDownAckUpstream(t *testing.T) {
	kc := startKafka(t)
	restore, refused := refuseProduce(kc)
	defer restore()
	cfg := testConfig()
	cfg.Pipeline.Ack = pipeline.AckUpstream
	cfg.Destinations = []client.Config{kafkaDest(t, kc, "retry-max-elapsed=1500ms,ack-timeout=1s")}
	g := startGateway(t, cfg)
	for i, err := range exportIDs(t, g, 1, 2, 3) {
		if err == nil {
			t.Errorf("span %d: acknowledged though no broker took it", i+1)
		}
	}
	if refused.Load() == 0 {
		t.Fatal("no produce request reached the brokers")
	}
	eventually(t, func() string {
		_, b := get(t, g, "/status.json")
		return "the status does not show the destination down with its last error: " + b
	}, func() bool {
		_, body := get(t, g, "/status.json")
		return strings.Contains(body, `"state": "down"`) && strings.Contains(body, `"last_error": "broker `)
	})
	restore()
	for i, err := range exportIDs(t, g, 4, 5, 6) {
		if err != nil {
			t.Errorf("span %d after the brokers came back: %v", i+4, err)
		}
	}
	if err := g.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	// The producer had sent spans 1 to 3 before their clients were told of the failure: an
	// idempotent producer keeps such records until the brokers answer, so they arrive once the
	// brokers are back, as a duplicate of whatever the clients send again (at least once).
	got := spanIDsOf(readSpans(t, kc, "otlp_spans", 6))
	for id := uint64(1); id <= 6; id++ {
		if n := got[fmt.Sprintf("%016x", id)]; n != 1 {
			t.Errorf("span %d is in Kafka %d times, want 1", id, n)
		}
	}
}

// With a spool, what clients sent while the brokers refused every produce request is kept
// and delivered once they take produce requests again: nothing acknowledged is lost.
func TestKafkaDestinationBrokersDownSpool(t *testing.T) {
	kc := startKafka(t)
	restore, refused := refuseProduce(kc)
	defer restore()
	cfg := testConfig()
	cfg.Spool = spool.DefaultConfig()
	cfg.Spool.Dir = t.TempDir()
	cfg.Spool.Sync = spool.SyncNone
	d := kafkaDest(t, kc, "ack-timeout=1s")
	d.RetryMaxElapsed = 0 // the spool's destinations retry until the spool is full
	cfg.Destinations = []client.Config{d}
	g := startGateway(t, cfg)
	ids := []uint64{11, 12, 13, 14, 15}
	for i, err := range exportIDs(t, g, ids...) {
		if err != nil {
			t.Fatalf("span %d: %v", ids[i], err)
		}
	}
	eventually(t, func() string { return "no produce request was refused" }, func() bool { return refused.Load() > 0 })
	eventually(t, func() string {
		_, b := get(t, g, "/status.json")
		return "the status does not show the destination down with its last error: " + b
	}, func() bool {
		_, body := get(t, g, "/status.json")
		return strings.Contains(body, `"state": "down"`) && strings.Contains(body, `"last_error": "broker `)
	})
	restore()
	got := spanIDsOf(readSpans(t, kc, "otlp_spans", len(ids)))
	if err := g.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	for _, id := range ids {
		if n := got[fmt.Sprintf("%016x", id)]; n < 1 {
			t.Errorf("span %d is not in Kafka", id)
		}
	}
}

// Records in OTLP/JSON, and over SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) and TLS, reach the
// brokers and decode with the Collector's decoder of their encoding: every span id once.
func TestKafkaDestinationEncodingAndSecurity(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := testkit.SelfSigned(t, dir)
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	for _, tc := range []struct {
		name     string
		cluster  []kfake.Opt
		keys     string
		dec      ptrace.Unmarshaler
		consumer []kgo.Opt
	}{
		{name: "otlp_json", keys: "encoding=otlp_json,partition=trace_id", dec: &ptrace.JSONUnmarshaler{}},
		{name: "sasl_plain", cluster: []kfake.Opt{kfake.EnableSASL(), kfake.Superuser("PLAIN", "otlpgate", "s3cret")},
			keys:     "sasl-mechanism=plain,sasl-username=otlpgate,sasl-password-file=" + pw,
			consumer: []kgo.Opt{kgo.SASL(plain.Auth{User: "otlpgate", Pass: "s3cret"}.AsMechanism())}},
		{name: "sasl_scram_sha256", cluster: []kfake.Opt{kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "otlpgate", "s3cret")},
			keys:     "sasl-mechanism=scram-sha-256,sasl-username=otlpgate,sasl-password-file=" + pw,
			consumer: []kgo.Opt{kgo.SASL(scram.Auth{User: "otlpgate", Pass: "s3cret"}.AsSha256Mechanism())}},
		{name: "sasl_scram_sha512", cluster: []kfake.Opt{kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", "otlpgate", "s3cret")},
			keys:     "sasl-mechanism=scram-sha-512,sasl-username=otlpgate,sasl-password-file=" + pw,
			consumer: []kgo.Opt{kgo.SASL(scram.Auth{User: "otlpgate", Pass: "s3cret"}.AsSha512Mechanism())}},
		{name: "tls", cluster: []kfake.Opt{kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})},
			keys:     "tls-ca=" + certFile,
			consumer: []kgo.Opt{kgo.DialTLSConfig(&tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12})}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kc := startKafka(t, tc.cluster...)
			cfg := testConfig()
			cfg.Destinations = []client.Config{kafkaDest(t, kc, tc.keys)}
			g := startGateway(t, cfg)
			ended := sdkSpans(t, g, 10, 3)
			if err := g.Shutdown(context.Background()); err != nil {
				t.Fatalf("Shutdown: %v", err)
			}
			dec := tc.dec
			if dec == nil {
				dec = &ptrace.ProtoUnmarshaler{}
			}
			got := spanIDsOf(readRecords(t, kc, "otlp_spans", len(ended), dec, tc.consumer...))
			if len(got) != len(ended) || len(ended) != 30 {
				t.Errorf("%d distinct spans in Kafka, the SDK ended %d, want 30", len(got), len(ended))
			}
			for _, s := range ended {
				if n := got[s.SpanContext().SpanID().String()]; n != 1 {
					t.Errorf("span %s is in Kafka %d times", s.SpanContext().SpanID(), n)
				}
			}
		})
	}
}

// A topic that takes smaller record batches than max-message-bytes costs no span: the
// destination reads the topic's max.message.bytes before it produces, and cuts records, and
// has the producer build record batches, below it.
func TestKafkaDestinationTopicMaxMessageBytes(t *testing.T) {
	const small = 8192
	kc := startKafka(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, "otlp_spans"
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Value = "max.message.bytes", kmsg.StringPtr(fmt.Sprint(small))
	r.Configs = append(r.Configs, c)
	req.Resources = append(req.Resources, r)
	resp, err := req.RequestWith(context.Background(), cl)
	cl.Close()
	if err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("cannot set the topic's max.message.bytes: %v %+v", err, resp)
	}
	dropped := testkit.Counter(t, "otlpgate_client_dropped_items_total", "destination", "kafka")
	cfg := testConfig()
	cfg.Destinations = []client.Config{kafkaDest(t, kc, "")}
	g := startGateway(t, cfg)
	var ids []uint64
	for id := uint64(1); id <= 200; id++ {
		ids = append(ids, id)
	}
	conn, err := grpc.NewClient(g.GRPCAddr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var ereq coltracev1.ExportTraceServiceRequest
	if err := ereq.UnmarshalVT(traceBody(t, 300, ids...)); err != nil { // about 70KB
		t.Fatal(err)
	}
	if _, err := coltracev1.NewTraceServiceClient(conn).Export(context.Background(), &ereq); err != nil {
		t.Fatal(err)
	}
	if err := g.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	recs := readSpans(t, kc, "otlp_spans", len(ids))
	got := spanIDsOf(recs)
	for _, id := range ids {
		if n := got[fmt.Sprintf("%016x", id)]; n != 1 {
			t.Errorf("span %d is in Kafka %d times, want 1", id, n)
		}
	}
	if len(recs) < 9 {
		t.Errorf("%d records, want the batch cut into records below %d bytes", len(recs), small)
	}
	for _, r := range recs {
		if r.size > small-256 {
			t.Errorf("a record of %d bytes", r.size)
		}
	}
	if n := testkit.Counter(t, "otlpgate_client_dropped_items_total", "destination", "kafka") - dropped; n != 0 {
		t.Errorf("%v items dropped", n)
	}
}

// With partition=resource each resource's spans land in one partition, in records of that
// resource alone keyed alike, whichever request and batch brought them: the key and the
// partition a Collector's Kafka exporter gives them.
func TestKafkaDestinationByResource(t *testing.T) {
	kc := startKafka(t)
	cfg := testConfig()
	cfg.Destinations = []client.Config{kafkaDest(t, kc, "partition=resource")}
	g := startGateway(t, cfg)
	conn, err := grpc.NewClient(g.GRPCAddr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	services := []string{"cart", "checkout", "payment", "search", "ads"}
	id := uint64(0)
	for range 10 {
		req := &coltracev1.ExportTraceServiceRequest{}
		for _, svc := range services {
			ss := &tracev1.ScopeSpans{}
			for range 3 {
				id++
				ss.Spans = append(ss.Spans, &tracev1.Span{TraceId: bytes.Repeat([]byte{byte(id)}, 16), SpanId: binary.BigEndian.AppendUint64(nil, id), Name: "op"})
			}
			req.ResourceSpans = append(req.ResourceSpans, &tracev1.ResourceSpans{ScopeSpans: []*tracev1.ScopeSpans{ss},
				Resource: &resourcev1.Resource{Attributes: []*commonv1.KeyValue{{Key: "service.name",
					Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: svc}}}}}})
		}
		if _, err := coltracev1.NewTraceServiceClient(conn).Export(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	recs := readSpans(t, kc, "otlp_spans", int(id))
	if got := spanIDsOf(recs); len(got) != int(id) {
		t.Errorf("%d distinct spans in Kafka, want %d", len(got), id)
	}
	keyOf, partOf := map[string]string{}, map[string]int32{}
	for _, r := range recs {
		rss := r.traces.ResourceSpans()
		for i := range rss.Len() {
			v, _ := rss.At(i).Resource().Attributes().Get("service.name")
			svc := v.Str()
			if k, ok := keyOf[svc]; ok && k != r.key {
				t.Errorf("resource %s in records keyed %q and %q", svc, k, r.key)
			}
			if p, ok := partOf[svc]; ok && p != r.partition {
				t.Errorf("resource %s in partitions %d and %d", svc, p, r.partition)
			}
			keyOf[svc], partOf[svc] = r.key, r.partition
			// The key is the Collector's partition_*_by_resource_attributes key, computed by its
			// own code, and the partition the one its exporter's partitioner picks for it.
			if want := pdatautil.MapHash(rss.At(i).Resource().Attributes()); r.key != string(want[:]) {
				t.Errorf("resource %s keyed %x; the Collector keys it %x", svc, r.key, want)
			}
			if want := saramaPartition(r.key, kafkaPartitions); r.partition != want {
				t.Errorf("resource %s is in partition %d; the Collector's exporter puts it in %d", svc, r.partition, want)
			}
		}
		if rss.Len() != 1 && r.key != "" {
			for i := 1; i < rss.Len(); i++ {
				a, _ := rss.At(0).Resource().Attributes().Get("service.name")
				b, _ := rss.At(i).Resource().Attributes().Get("service.name")
				if a.Str() != b.Str() {
					t.Errorf("a record keyed %q holds resources %s and %s", r.key, a.Str(), b.Str())
				}
			}
		}
	}
	if len(keyOf) != len(services) {
		t.Errorf("%d resources in Kafka, want %d", len(keyOf), len(services))
	}
}

// A shutdown while the brokers refuse every produce request: without a spool what they never
// acknowledged is reported lost (a *LossError); with the spool it stays there and the next
// start delivers it once they take produce requests again, every span once at least.
func TestKafkaDestinationShutdownWhileBrokersDown(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		kc := startKafka(t)
		restore, refused := refuseProduce(kc)
		defer restore()
		cfg := testConfig()
		cfg.ShutdownTimeout = time.Second
		cfg.Destinations = []client.Config{kafkaDest(t, kc, "")}
		g := startGateway(t, cfg)
		for i, err := range exportIDs(t, g, 21, 22) {
			if err != nil {
				t.Fatalf("span %d: %v", 21+i, err)
			}
		}
		eventually(t, func() string { return "no produce request was refused" }, func() bool { return refused.Load() > 0 })
		err := g.Shutdown(context.Background())
		var lost *LossError
		if !errors.As(err, &lost) || len(lost.Errs) == 0 {
			t.Fatalf("Shutdown returned %v, want a *LossError", err)
		}
	})
	t.Run("spool", func(t *testing.T) {
		kc := startKafka(t)
		restore, refused := refuseProduce(kc)
		defer restore()
		cfg := testConfig()
		cfg.ShutdownTimeout = time.Second
		cfg.Spool = spool.DefaultConfig()
		cfg.Spool.Dir = t.TempDir()
		cfg.Spool.Sync = spool.SyncNone
		d := kafkaDest(t, kc, "")
		d.RetryMaxElapsed = 0
		cfg.Destinations = []client.Config{d}
		g := startGateway(t, cfg)
		ids := []uint64{31, 32, 33}
		for i, err := range exportIDs(t, g, ids...) {
			if err != nil {
				t.Fatalf("span %d: %v", ids[i], err)
			}
		}
		eventually(t, func() string { return "no produce request was refused" }, func() bool { return refused.Load() > 0 })
		if err := g.Shutdown(context.Background()); err != nil {
			t.Fatalf("Shutdown with the spool: %v, want nothing lost", err)
		}
		restore()
		g = startGateway(t, cfg)
		got := spanIDsOf(readSpans(t, kc, "otlp_spans", len(ids)))
		if err := g.Shutdown(context.Background()); err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
		for _, id := range ids {
			if n := got[fmt.Sprintf("%016x", id)]; n < 1 {
				t.Errorf("span %d is not in Kafka after the restart", id)
			}
		}
	})
}

// A topic that does not exist yet costs nothing acknowledged: its records are produced again
// after the backoff, the status shows the brokers' answer, and they are delivered once the
// topic is created.
func TestKafkaDestinationTopicCreatedLater(t *testing.T) {
	kc := startKafka(t)
	cfg := testConfig()
	cfg.Spool = spool.DefaultConfig()
	cfg.Spool.Dir = t.TempDir()
	cfg.Spool.Sync = spool.SyncNone
	d := kafkaDest(t, kc, "traces-topic=later")
	d.RetryMaxElapsed = 0
	cfg.Destinations = []client.Config{d}
	g := startGateway(t, cfg)
	for i, err := range exportIDs(t, g, 41, 42) {
		if err != nil {
			t.Fatalf("span %d: %v", 41+i, err)
		}
	}
	eventually(t, func() string {
		_, b := get(t, g, "/status.json")
		return "the status does not show the unknown topic: " + b
	}, func() bool {
		_, body := get(t, g, "/status.json")
		return strings.Contains(body, `"last_error": "produce to later: UNKNOWN_TOPIC_OR_PARTITION`)
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "later", kafkaPartitions, 3
	req.Topics = append(req.Topics, ct)
	resp, err := req.RequestWith(context.Background(), cl)
	cl.Close()
	if err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("cannot create the topic: %v %+v", err, resp)
	}
	got := spanIDsOf(readSpans(t, kc, "later", 2))
	if err := g.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	for _, id := range []uint64{41, 42} {
		if n := got[fmt.Sprintf("%016x", id)]; n < 1 {
			t.Errorf("span %d is not in Kafka", id)
		}
	}
}

// Records the brokers refuse for good (INVALID_RECORD; MESSAGE_TOO_LARGE, a topic whose
// max.message.bytes was lowered while otlpgate ran) cost their batch, counted by reason, and
// the -ack=upstream client is told; they are not produced again for ever, and what comes after
// is delivered.
func TestKafkaDestinationRejected(t *testing.T) {
	for _, tc := range []struct {
		code   int16
		reason string
	}{{kerr.InvalidRecord.Code, "rejected"}, {kerr.MessageTooLarge.Code, "too_large"}} {
		t.Run(tc.reason, func(t *testing.T) {
			kc := startKafka(t)
			var refused atomic.Int64
			kc.ControlKey(int16(kmsg.Produce), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
				req := kreq.(*kmsg.ProduceRequest)
				resp := req.ResponseKind().(*kmsg.ProduceResponse)
				for _, rt := range req.Topics {
					st := kmsg.NewProduceResponseTopic()
					st.Topic, st.TopicID = rt.Topic, rt.TopicID
					for _, rp := range rt.Partitions {
						sp := kmsg.NewProduceResponseTopicPartition()
						sp.Partition, sp.ErrorCode = rp.Partition, tc.code
						st.Partitions = append(st.Partitions, sp)
					}
					resp.Topics = append(resp.Topics, st)
				}
				refused.Add(1)
				return resp, nil, true // handled once: the next produce request is taken
			})
			before := testkit.Counter(t, "otlpgate_client_dropped_items_total", "destination", "kafka", "reason", tc.reason)
			cfg := testConfig()
			cfg.Pipeline.Ack = pipeline.AckUpstream
			cfg.Destinations = []client.Config{kafkaDest(t, kc, "")}
			g := startGateway(t, cfg)
			if err := exportIDs(t, g, 51)[0]; err == nil {
				t.Fatal("span 51, refused by the brokers, was acknowledged to its client")
			}
			if refused.Load() != 1 {
				t.Fatalf("%d produce requests refused, want 1", refused.Load())
			}
			if n := testkit.Counter(t, "otlpgate_client_dropped_items_total", "destination", "kafka", "reason", tc.reason) - before; n != 1 {
				t.Errorf("%v items dropped as %s, want 1", n, tc.reason)
			}
			if err := exportIDs(t, g, 52)[0]; err != nil {
				t.Fatalf("span 52: %v", err)
			}
			if err := g.Shutdown(context.Background()); err != nil {
				t.Fatalf("Shutdown: %v", err)
			}
			got := spanIDsOf(readSpans(t, kc, "otlp_spans", 1))
			if got[fmt.Sprintf("%016x", 52)] != 1 || got[fmt.Sprintf("%016x", 51)] != 0 {
				t.Errorf("spans in Kafka %v, want 52 alone", got)
			}
		})
	}
}
