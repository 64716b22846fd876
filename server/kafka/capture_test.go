package kafka

import (
	"encoding/binary"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/otlpgate/otlpgate/internal/testkit"
	commonv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/common/v1"
	metricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/metrics/v1"
)

// captureMeta is the part of a capture's .meta.json the tests use.
type captureMeta struct {
	ClientID         string `json:"client_id"`
	ClientInstanceID string `json:"client_instance_id"`
	CompressionType  int8   `json:"compression_type"`
	SubscriptionID   int32  `json:"subscription_id"`
}

// parsedCapture is a captured PushTelemetry request with the offsets the tests patch.
type parsedCapture struct {
	name      string
	raw       []byte // size prefix included
	meta      captureMeta
	req       kmsg.PushTelemetryRequest
	subIDAt   int // offset of the subscription id in raw
	want      *metricsv1.MetricsData
	wantBytes []byte
}

func loadCapture(t testing.TB, file string) *parsedCapture {
	t.Helper()
	pc := &parsedCapture{name: strings.TrimSuffix(file[strings.LastIndexByte(file, '/')+1:], ".request.bin")}
	pc.raw = readFile(t, file)
	base := strings.TrimSuffix(file, ".request.bin")
	if err := json.Unmarshal(readFile(t, base+".meta.json"), &pc.meta); err != nil {
		t.Fatal(err)
	}
	pc.wantBytes = readFile(t, base+".metricsdata.pb")
	pc.want = &metricsv1.MetricsData{}
	if err := pc.want.UnmarshalVT(pc.wantBytes); err != nil {
		t.Fatal(err)
	}
	if int(binary.BigEndian.Uint32(pc.raw)) != len(pc.raw)-4 {
		t.Fatalf("%s: size prefix does not match the file", file)
	}
	var h header
	frame := pc.raw[4:]
	if err := parsePrefix(frame, &h); err != nil || h.key != keyPushTelemetry || h.version != 0 {
		t.Fatalf("%s: not a PushTelemetry v0: %v %+v", file, err, h)
	}
	if err := parseHeader(frame, &h, true); err != nil {
		t.Fatal(err)
	}
	if string(h.clientID) != pc.meta.ClientID {
		t.Fatalf("%s: client id %q, meta says %q", file, h.clientID, pc.meta.ClientID)
	}
	if err := pc.req.ReadFrom(h.body); err != nil {
		t.Fatal(err)
	}
	pc.subIDAt = len(pc.raw) - len(h.body) + 16
	if int32(binary.BigEndian.Uint32(pc.raw[pc.subIDAt:])) != pc.meta.SubscriptionID || pc.req.CompressionType != pc.meta.CompressionType {
		t.Fatalf("%s: request and meta disagree", file)
	}
	if idString(pc.req.ClientInstanceID) != pc.meta.ClientInstanceID {
		t.Fatalf("%s: instance id prints as %s, the client logged %s", file, idString(pc.req.ClientInstanceID), pc.meta.ClientInstanceID)
	}
	return pc
}

// withSubID returns the captured request with its subscription id replaced.
func (pc *parsedCapture) withSubID(id int32) []byte {
	b := append([]byte(nil), pc.raw...)
	binary.BigEndian.PutUint32(b[pc.subIDAt:], uint32(id))
	return b
}

func strKV(k, v string) *commonv1.KeyValue {
	return &commonv1.KeyValue{Key: k, Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: v}}}
}

// points counts the data points of md the way a reader of the OTLP spec would.
func points(md *metricsv1.MetricsData) int {
	n := 0
	for _, rm := range md.ResourceMetrics {
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				n += len(m.GetGauge().GetDataPoints()) + len(m.GetSum().GetDataPoints()) +
					len(m.GetHistogram().GetDataPoints()) + len(m.GetExponentialHistogram().GetDataPoints()) +
					len(m.GetSummary().GetDataPoints())
			}
		}
	}
	return n
}

// TestCaptures sends every real request over TCP: first as captured (otlpgate has never seen
// the instance, as after a restart: UNKNOWN_SUBSCRIPTION_ID), then, after the client's
// re-fetch, with the subscription id otlpgate handed out. What reaches the pipeline must be the
// capture's MetricsData, exactly, with the client labels added to its resource.
func TestCaptures(t *testing.T) {
	for _, file := range captureFiles(t) {
		pc := loadCapture(t, file)
		t.Run(pc.name, func(t *testing.T) {
			rec := &testkit.Recorder{}
			s, _ := startServer(t, testConfig(), rec)
			c := dial(t, s, pc.meta.ClientID)
			if av := c.apiVersions(3, "librdkafka", "2.15.1"); av.ErrorCode != 0 {
				t.Fatalf("ApiVersions error %d", av.ErrorCode)
			}

			if code := c.rawPush(pc.raw); code != errUnknownSubscriptionID {
				t.Fatalf("push from an unknown instance: code %d, want %d", code, errUnknownSubscriptionID)
			}
			if rec.Count() != 0 {
				t.Fatal("an unknown instance's push was forwarded")
			}
			sub := c.get(pc.req.ClientInstanceID)
			if sub.ErrorCode != 0 || sub.ClientInstanceID != pc.req.ClientInstanceID {
				t.Fatalf("re-fetch: error %d, instance %s, want %s", sub.ErrorCode, idString(sub.ClientInstanceID), pc.meta.ClientInstanceID)
			}
			if code := c.rawPush(pc.withSubID(sub.SubscriptionID)); code != errNone {
				t.Fatalf("push: code %d", code)
			}

			n, got, items := lastMetrics(t, rec)
			if n != 1 {
				t.Fatalf("%d payloads forwarded, want 1", n)
			}
			_, port, _ := strings.Cut(c.nc.LocalAddr().String(), ":")
			if _, err := strconv.Atoi(port); err != nil {
				t.Fatal(err)
			}
			want := pc.want.CloneVT()
			for _, rm := range want.ResourceMetrics {
				rm.Resource.Attributes = append(rm.Resource.Attributes,
					strKV("client_instance_id", pc.meta.ClientInstanceID),
					strKV("client_id", pc.meta.ClientID),
					strKV("client_software_name", "librdkafka"),
					strKV("client_software_version", "2.15.1"),
					strKV("client_source_address", "127.0.0.1"),
					strKV("client_source_port", port),
				)
			}
			if !got.EqualVT(want) {
				t.Fatalf("forwarded metrics differ from the capture plus labels\ngot:  %v\nwant: %v", got, want)
			}
			if wantItems := points(pc.want); items != wantItems || items == 0 {
				t.Fatalf("items %d, want %d data points", items, wantItems)
			}
		})
	}
}
