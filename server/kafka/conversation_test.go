package kafka

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/otlpgate/otlpgate/internal/testkit"
	commonv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/common/v1"
	metricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/metrics/v1"
	resourcev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/resource/v1"
)

// testMetrics builds a MetricsData with one resource (carrying a spoofed client_id that the
// listener must override) and, per name, a gauge with one point or a sum with two.
func testMetrics(names ...string) *metricsv1.MetricsData {
	sm := &metricsv1.ScopeMetrics{}
	for i, name := range names {
		m := &metricsv1.Metric{Name: name}
		if i%2 == 0 {
			m.Data = &metricsv1.Metric_Gauge{Gauge: &metricsv1.Gauge{DataPoints: []*metricsv1.NumberDataPoint{
				{TimeUnixNano: 1, Value: &metricsv1.NumberDataPoint_AsInt{AsInt: int64(i)}},
			}}}
		} else {
			m.Data = &metricsv1.Metric_Sum{Sum: &metricsv1.Sum{
				AggregationTemporality: metricsv1.AggregationTemporality_AGGREGATION_TEMPORALITY_DELTA,
				IsMonotonic:            true,
				DataPoints: []*metricsv1.NumberDataPoint{
					{TimeUnixNano: 1, Value: &metricsv1.NumberDataPoint_AsDouble{AsDouble: 1.5}},
					{TimeUnixNano: 2, Value: &metricsv1.NumberDataPoint_AsDouble{AsDouble: 2.5}},
				},
			}}
		}
		sm.Metrics = append(sm.Metrics, m)
	}
	return &metricsv1.MetricsData{ResourceMetrics: []*metricsv1.ResourceMetrics{{
		Resource:     &resourcev1.Resource{Attributes: []*commonv1.KeyValue{strKV("client_rack", "r1"), strKV("client_id", "spoofed")}},
		ScopeMetrics: []*metricsv1.ScopeMetrics{sm},
	}}}
}

func zstdPayload(t testing.TB, md *metricsv1.MetricsData) []byte {
	t.Helper()
	raw, err := md.MarshalVT()
	if err != nil {
		t.Fatal(err)
	}
	e, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	return e.EncodeAll(raw, nil)
}

func writeFile(t testing.TB, name, content string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// metricNames lists the metric names of md in order.
func metricNames(md *metricsv1.MetricsData) []string {
	var names []string
	for _, rm := range md.ResourceMetrics {
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				names = append(names, m.Name)
			}
		}
	}
	return names
}

// resourceAttrs flattens the string attributes of md's first resource.
func resourceAttrs(md *metricsv1.MetricsData) [][2]string {
	var out [][2]string
	for _, kv := range md.ResourceMetrics[0].Resource.Attributes {
		out = append(out, [2]string{kv.Key, kv.Value.GetStringValue()})
	}
	return out
}

// TestConversation walks a whole client session over one TCP connection with a client built on
// kmsg: version negotiation, metadata, subscription, pushes (throttled and not), a live change
// of the subscriptions file, and the terminating push.
func TestConversation(t *testing.T) {
	dir := t.TempDir()
	subsFile := filepath.Join(dir, "subs.yaml")
	writeFile(t, subsFile, `
subscriptions:
  - name: producers
    metrics: [org.apache.kafka.producer.node.]
    interval: 2s
    match:
      client_software_name: librdkafka
      client_id: "app-.*"
  - name: java-only
    metrics: ["*"]
    interval: 500ms
    match:
      client_software_name: apache-kafka-java
`)
	cfg := testConfig()
	cfg.SubscriptionsFile = subsFile
	cfg.DefaultMetrics = nil
	cfg.AdvertisedAddress = "kafka.example:19093"
	rec := &testkit.Recorder{}
	s, clk := startServer(t, cfg, rec)
	c := dial(t, s, "app-1")

	// KIP-511: a too-new ApiVersions is answered in the v0 layout with what is supported.
	av := c.apiVersions(5, "librdkafka", "2.15.1")
	wantKeys := []kmsg.ApiVersionsResponseApiKey{{ApiKey: 3, MinVersion: 0, MaxVersion: 13}, {ApiKey: 18, MinVersion: 0, MaxVersion: 4}, {ApiKey: 71}, {ApiKey: 72}}
	if av.ErrorCode != errUnsupportedVersion || !slices.EqualFunc(av.ApiKeys, wantKeys, sameKey) {
		t.Fatalf("ApiVersions v5: error %d keys %+v", av.ErrorCode, av.ApiKeys)
	}
	av = c.apiVersions(3, "librdkafka", "2.15.1")
	if av.ErrorCode != 0 || !slices.EqualFunc(av.ApiKeys, wantKeys, sameKey) {
		t.Fatalf("ApiVersions v3: error %d keys %+v", av.ErrorCode, av.ApiKeys)
	}

	// Metadata: this listener, as advertised, is the only broker; there are no topics.
	mreq := kmsg.NewPtrMetadataRequest()
	mreq.Version = 12
	md := c.request(mreq).(*kmsg.MetadataResponse)
	if len(md.Brokers) != 1 || md.Brokers[0].Host != "kafka.example" || md.Brokers[0].Port != 19093 || md.Brokers[0].NodeID != 0 ||
		len(md.Topics) != 0 || md.ControllerID != 0 || md.ClusterID == nil || *md.ClusterID != "otlpgate" {
		t.Fatalf("Metadata v12: %+v", md)
	}
	mreq = kmsg.NewPtrMetadataRequest()
	mreq.Version = 1
	topic := kmsg.NewMetadataRequestTopic()
	topic.Topic = kmsg.StringPtr("orders")
	mreq.Topics = append(mreq.Topics, topic)
	md = c.request(mreq).(*kmsg.MetadataResponse)
	if len(md.Brokers) != 1 || len(md.Topics) != 1 || *md.Topics[0].Topic != "orders" || md.Topics[0].ErrorCode != errUnknownTopicOrPartition {
		t.Fatalf("Metadata v1 for a topic: %+v", md)
	}

	// First subscription request: a zero id gets a fresh one.
	sub := c.get([16]byte{})
	id := sub.ClientInstanceID
	if sub.ErrorCode != 0 || reservedID(id) {
		t.Fatalf("Get: error %d, id %x", sub.ErrorCode, id)
	}
	if sub.PushIntervalMillis != 2000 || !slices.Equal(sub.RequestedMetrics, []string{"org.apache.kafka.producer.node."}) ||
		!slices.Equal(sub.AcceptedCompressionTypes, []int8{4, 3, 1, 2}) || sub.TelemetryMaxBytes != 1<<20 || !sub.DeltaTemporality {
		t.Fatalf("Get: %+v", sub)
	}
	again := c.get(id)
	if again.ClientInstanceID != id || again.SubscriptionID != sub.SubscriptionID {
		t.Fatalf("second Get: id %x sub %d, want %x %d", again.ClientInstanceID, again.SubscriptionID, id, sub.SubscriptionID)
	}

	// A push: the unsubscribed metric is dropped, the labels are set.
	payload := zstdPayload(t, testMetrics("org.apache.kafka.producer.node.request.latency.avg", "org.apache.kafka.producer.record.queue.time.max", "org.apache.kafka.producer.node.request.total"))
	if code := c.push(id, sub.SubscriptionID, 4, payload, false); code != errNone {
		t.Fatalf("push: code %d", code)
	}
	n, got, items := lastMetrics(t, rec)
	if n != 1 || items != 2 { // two gauges of one point each; the sum (two points) is filtered out
		t.Fatalf("forwarded %d payloads, last with %d items; want 1 with 2", n, items)
	}
	if names := metricNames(got); !slices.Equal(names, []string{"org.apache.kafka.producer.node.request.latency.avg", "org.apache.kafka.producer.node.request.total"}) {
		t.Fatalf("forwarded metrics %v", names)
	}
	_, port := splitAddr(c.nc.LocalAddr())
	wantAttrs := [][2]string{
		{"client_rack", "r1"},
		{"client_instance_id", idString(id)},
		{"client_id", "app-1"},
		{"client_software_name", "librdkafka"},
		{"client_software_version", "2.15.1"},
		{"client_source_address", "127.0.0.1"},
		{"client_source_port", port},
	}
	if attrs := resourceAttrs(got); !slices.Equal(attrs, wantAttrs) {
		t.Fatalf("resource attributes %v, want %v", attrs, wantAttrs)
	}

	// Too early: throttled, and nothing forwarded. After the interval: accepted.
	clk.Advance(1999 * time.Millisecond)
	if code := c.push(id, sub.SubscriptionID, 4, payload, false); code != errThrottlingQuotaExceeded {
		t.Fatalf("early push: code %d", code)
	}
	clk.Advance(time.Millisecond)
	if code := c.push(id, sub.SubscriptionID, 4, payload, false); code != errNone {
		t.Fatalf("push after the interval: code %d", code)
	}
	if rec.Count() != 2 {
		t.Fatalf("%d payloads forwarded, want 2", rec.Count())
	}

	// The operator changes the subscription; the client's id goes stale.
	writeFile(t, subsFile, `
subscriptions:
  - name: producers
    metrics: [org.apache.kafka.producer.node., org.apache.kafka.producer.record.]
    interval: 1s
    match:
      client_software_name: librdkafka
`)
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Second)
	if code := c.push(id, sub.SubscriptionID, 4, payload, false); code != errUnknownSubscriptionID {
		t.Fatalf("push with a stale subscription id: code %d", code)
	}
	sub2 := c.get(id)
	if sub2.ClientInstanceID != id || sub2.SubscriptionID == sub.SubscriptionID || sub2.PushIntervalMillis != 1000 ||
		!slices.Equal(sub2.RequestedMetrics, []string{"org.apache.kafka.producer.node.", "org.apache.kafka.producer.record."}) {
		t.Fatalf("Get after reload: %+v (old subscription id %d)", sub2, sub.SubscriptionID)
	}
	// Right after a re-fetch the push is not early.
	if code := c.push(id, sub2.SubscriptionID, 4, payload, false); code != errNone {
		t.Fatalf("push after re-fetch: code %d", code)
	}
	if _, got, _ := lastMetrics(t, rec); len(metricNames(got)) != 3 {
		t.Fatalf("after the change, forwarded %v", metricNames(got))
	}

	// Close(): the terminating push is exempt from the interval; nothing may follow it.
	if code := c.push(id, sub2.SubscriptionID, 4, payload, true); code != errNone {
		t.Fatalf("terminating push: code %d", code)
	}
	if rec.Count() != 4 {
		t.Fatalf("%d payloads forwarded, want 4", rec.Count())
	}
	clk.Advance(2 * time.Second) // past the interval, within the instance's lifetime
	if code := c.push(id, sub2.SubscriptionID, 4, payload, false); code != errInvalidRequest {
		t.Fatalf("push after terminating: code %d", code)
	}
	if rec.Count() != 4 {
		t.Fatal("a push after the terminating one was forwarded")
	}
}

func sameKey(a, b kmsg.ApiVersionsResponseApiKey) bool {
	return a.ApiKey == b.ApiKey && a.MinVersion == b.MinVersion && a.MaxVersion == b.MaxVersion
}
