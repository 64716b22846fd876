package kafka

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/otlpgate/otlpgate/internal/testkit"
	metricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/metrics/v1"
)

// resourceLabels returns the string attributes of the first resource of md.
func resourceLabels(md *metricsv1.MetricsData) map[string]string {
	out := map[string]string{}
	for _, kv := range md.ResourceMetrics[0].GetResource().GetAttributes() {
		out[kv.Key] = kv.GetValue().GetStringValue()
	}
	return out
}

// A client id or software name and version longer than their caps is never kept: ApiVersions
// with an oversized software name or version is answered INVALID_REQUEST, telemetry requests
// with an oversized client id too (no instance is made for them), each counted; values at the
// caps are labels like any other.
func TestLabelCaps(t *testing.T) {
	cfg := testConfig()
	cfg.MaxClientIDBytes, cfg.MaxSoftwareBytes = 40, 20
	rec := &testkit.Recorder{}
	s, clk := startServer(t, cfg, rec)
	payload, _ := testMetrics("m").MarshalVT()

	t.Run("software", func(t *testing.T) {
		c := dial(t, s, "app")
		for _, tc := range []struct {
			name, version string
			counter       string
		}{
			{strings.Repeat("n", 21), "1.0", labelClientSoftwareName},
			{"librdkafka", strings.Repeat("9", 21), labelClientSoftwareVersion},
			// The reviewer's request: a 4 MB name of valid characters.
			{strings.Repeat("a", 4<<20-64), "1.0", labelClientSoftwareName},
		} {
			before := counterValue(t, oversizedLabels.WithLabelValues(tc.counter))
			if r := c.apiVersions(3, tc.name, tc.version); r.ErrorCode != errInvalidRequest {
				t.Fatalf("%d-byte name, %d-byte version: code %d, want INVALID_REQUEST", len(tc.name), len(tc.version), r.ErrorCode)
			}
			if d := counterValue(t, oversizedLabels.WithLabelValues(tc.counter)) - before; d != 1 {
				t.Fatalf("%s counted %v, want 1", tc.counter, d)
			}
		}
		// At the caps the software is taken, and labels what the client pushes.
		name, version := strings.Repeat("n", 20), strings.Repeat("9", 20)
		if r := c.apiVersions(3, name, version); r.ErrorCode != errNone {
			t.Fatalf("software at the caps: code %d", r.ErrorCode)
		}
		sub := c.get([16]byte{})
		clk.Advance(cfg.DefaultInterval)
		if code := c.push(sub.ClientInstanceID, sub.SubscriptionID, 0, payload, false); code != errNone {
			t.Fatalf("push: code %d", code)
		}
		_, md, _ := lastMetrics(t, rec)
		if l := resourceLabels(md); l[labelClientSoftwareName] != name || l[labelClientSoftwareVersion] != version || l[labelClientID] != "app" {
			t.Fatalf("labels %v", l)
		}
	})

	t.Run("client id", func(t *testing.T) {
		long := strings.Repeat("x", 41)
		c := dial(t, s, long)
		counted := func() float64 { return counterValue(t, oversizedClientID) }
		before, instances, forwarded := counted(), s.reg.len(), rec.Count()
		// Requests that do not label anything are answered as usual.
		if r := c.apiVersions(3, "librdkafka", "2.5.0"); r.ErrorCode != errNone {
			t.Fatalf("ApiVersions: code %d", r.ErrorCode)
		}
		md := kmsg.NewPtrMetadataRequest()
		md.Version = 12
		if r := c.request(md).(*kmsg.MetadataResponse); len(r.Brokers) != 1 {
			t.Fatalf("Metadata: %+v", r)
		}
		if r := c.get([16]byte{}); r.ErrorCode != errInvalidRequest {
			t.Fatalf("Get: code %d, want INVALID_REQUEST", r.ErrorCode)
		}
		if code := c.push(newID(), 1, 0, payload, false); code != errInvalidRequest {
			t.Fatalf("push: code %d, want INVALID_REQUEST", code)
		}
		if d := counted() - before; d != 2 {
			t.Fatalf("client_id counted %v, want 2", d)
		}
		// No instance is made for the refused id (the earlier subtest's may go meanwhile, as
		// its connection closed).
		if s.reg.len() > instances || rec.Count() != forwarded {
			t.Fatalf("%d instances (was %d), %d forwarded (was %d)", s.reg.len(), instances, rec.Count(), forwarded)
		}
		// The same connection with an id at the cap gets its telemetry through.
		c.fmt = kmsg.NewRequestFormatter(kmsg.FormatterClientID(long[:40]))
		sub := c.get([16]byte{})
		if sub.ErrorCode != errNone {
			t.Fatalf("Get at the cap: code %d", sub.ErrorCode)
		}
		clk.Advance(cfg.DefaultInterval)
		if code := c.push(sub.ClientInstanceID, sub.SubscriptionID, 0, payload, false); code != errNone {
			t.Fatalf("push at the cap: code %d", code)
		}
		_, got, _ := lastMetrics(t, rec)
		if l := resourceLabels(got); l[labelClientID] != long[:40] {
			t.Fatalf("client_id label %q", l[labelClientID])
		}
	})
}
