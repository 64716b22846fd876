package fastpath

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"

	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
)

// sdkTraceJSON renders a batch of n spans the way the OpenTelemetry JavaScript SDK's OTLP/HTTP
// JSON exporter writes a web service's traces (JSON.stringify of its transformer's objects:
// no whitespace, its key order, zero counts and empty lists written out, times as decimal
// strings, int attributes as JSON numbers, absent fields left out): one resource with the
// SDK's attributes, one instrumentation scope, HTTP server spans with their semantic-convention
// attributes (about 1150 bytes each), every fourth a child client span, every tenth with an
// exception event and an error status. The values are deterministic.
func sdkTraceJSON(n int) []byte {
	rnd := rand.New(rand.NewPCG(7, 11))
	methods := []string{"GET", "GET", "GET", "POST", "PUT", "DELETE"}
	routes := []string{"/api/v1/orders/:id", "/api/v1/cart", "/api/v1/products/:sku/reviews", "/healthz", "/api/v1/users/:id/preferences"}
	agents := []string{
		"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36",
		"Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1",
		"okhttp/4.12.0",
	}
	b := []byte(`{"resourceSpans":[{"resource":{"attributes":[` +
		`{"key":"service.name","value":{"stringValue":"checkout-api"}},` +
		`{"key":"service.version","value":{"stringValue":"2.14.3"}},` +
		`{"key":"deployment.environment.name","value":{"stringValue":"production"}},` +
		`{"key":"host.name","value":{"stringValue":"checkout-api-7d9f8b6c5-x2kqz"}},` +
		`{"key":"process.pid","value":{"intValue":27}},` +
		`{"key":"process.runtime.name","value":{"stringValue":"nodejs"}},` +
		`{"key":"process.runtime.version","value":{"stringValue":"20.15.1"}},` +
		`{"key":"telemetry.sdk.language","value":{"stringValue":"nodejs"}},` +
		`{"key":"telemetry.sdk.name","value":{"stringValue":"opentelemetry"}},` +
		`{"key":"telemetry.sdk.version","value":{"stringValue":"1.25.1"}}],"droppedAttributesCount":0},` +
		`"scopeSpans":[{"scope":{"name":"@opentelemetry/instrumentation-http","version":"0.52.1"},"spans":[`)
	str := func(k, v string) {
		b = append(b, `{"key":"`...)
		b = append(b, k...)
		b = append(b, `","value":{"stringValue":"`...)
		b = append(b, v...)
		b = append(b, `"}},`...)
	}
	num := func(k string, v int) {
		b = append(b, `{"key":"`...)
		b = append(b, k...)
		b = append(b, `","value":{"intValue":`...)
		b = strconv.AppendInt(b, int64(v), 10)
		b = append(b, `}},`...)
	}
	var trace [16]byte
	var parent [8]byte
	start := uint64(1718000000_000000000)
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		child := i%4 == 3
		if !child {
			for k := range trace {
				trace[k] = byte(rnd.Uint32())
			}
		}
		var span [8]byte
		for k := range span {
			span[k] = byte(rnd.Uint32())
		}
		b = append(b, `{"traceId":"`...)
		b = hex.AppendEncode(b, trace[:])
		b = append(b, `","spanId":"`...)
		b = hex.AppendEncode(b, span[:])
		b = append(b, '"')
		if child {
			b = append(b, `,"parentSpanId":"`...)
			b = hex.AppendEncode(b, parent[:])
			b = append(b, '"')
		} else {
			parent = span
		}
		method := methods[rnd.IntN(len(methods))]
		route := routes[rnd.IntN(len(routes))]
		kind := 2 // SERVER
		name := method + " " + route
		if child {
			kind, name = 3, method // CLIENT
		}
		b = append(b, `,"name":"`...)
		b = append(b, name...)
		b = append(b, `","kind":`...)
		b = strconv.AppendInt(b, int64(kind), 10)
		t0 := start + uint64(i)*1_250_000 + uint64(rnd.IntN(1000))
		b = append(b, `,"startTimeUnixNano":"`...)
		b = strconv.AppendUint(b, t0, 10)
		b = append(b, `","endTimeUnixNano":"`...)
		b = strconv.AppendUint(b, t0+uint64(200_000+rnd.IntN(30_000_000)), 10)
		b = append(b, `","attributes":[`...)
		status := 200
		if i%10 == 9 {
			status = 500
		}
		id := strconv.Itoa(10000 + rnd.IntN(90000))
		str("http.request.method", method)
		str("url.scheme", "https")
		if child {
			str("url.full", "http://inventory.internal.svc.cluster.local:8080/api/v2/stock/"+id+"?warehouse=eu-west-1")
			str("server.address", "inventory.internal.svc.cluster.local")
			num("server.port", 8080)
		} else {
			str("url.path", "/api/v1/orders/"+id)
			str("http.route", route)
			str("server.address", "shop.example.com")
			num("server.port", 443)
			str("client.address", "203.0.113."+strconv.Itoa(rnd.IntN(255)))
			str("user_agent.original", agents[rnd.IntN(len(agents))])
		}
		str("network.protocol.version", "1.1")
		str("network.peer.address", "10.42."+strconv.Itoa(rnd.IntN(255))+"."+strconv.Itoa(rnd.IntN(255)))
		num("network.peer.port", 30000+rnd.IntN(30000))
		num("http.response.status_code", status)
		b = b[:len(b)-1] // the last attribute's comma
		b = append(b, `],"droppedAttributesCount":0,"events":[`...)
		if status == 500 {
			b = append(b, `{"attributes":[`...)
			str("exception.type", "Error")
			str("exception.message", "connect ECONNREFUSED 10.96.0.12:5432")
			b = b[:len(b)-1]
			b = append(b, `],"name":"exception","timeUnixNano":"`...)
			b = strconv.AppendUint(b, t0+150_000, 10)
			b = append(b, `","droppedAttributesCount":0}`...)
		}
		b = append(b, `],"droppedEventsCount":0,"status":{"code":`...)
		if status == 500 {
			b = append(b, `2,"message":"connect ECONNREFUSED 10.96.0.12:5432"`...)
		} else {
			b = append(b, '0')
		}
		b = append(b, `},"links":[],"droppedLinksCount":0,"flags":257}`...)
	}
	return append(b, `]}]}]}`...)
}

// fromOTLPJSON is the protobuf encoding of an OTLP/JSON trace request as protobuf's own JSON
// reader sees it, the ids turned from the hex of the OTLP mapping into protojson's base64
// first (otlpJSON's inverse).
func fromOTLPJSON(tb testing.TB, body []byte) []byte {
	tb.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		tb.Fatal(err)
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && (k == "traceId" || k == "spanId" || k == "parentSpanId") {
					raw, err := hex.DecodeString(s)
					if err != nil {
						tb.Fatal(err)
					}
					v[k] = base64.StdEncoding.EncodeToString(raw)
					continue
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(tree)
	b, err := json.Marshal(tree)
	if err != nil {
		tb.Fatal(err)
	}
	var req coltracev1.ExportTraceServiceRequest
	if err := protojson.Unmarshal(b, &req); err != nil {
		tb.Fatal(err)
	}
	want, err := req.MarshalVT()
	if err != nil {
		tb.Fatal(err)
	}
	return want
}

// TestSDKTraceJSON checks the benchmark's SDK-shaped batch: its spans have the size they are
// said to have, and the transcoder writes what protobuf's JSON reader reads from them.
func TestSDKTraceJSON(t *testing.T) {
	body := sdkTraceJSON(100)
	if per := len(body) / 100; per < 1000 || per > 1300 {
		t.Fatalf("%d bytes per span, want about 1150", per)
	}
	var tr JSONTranscoder
	got, s, err := tr.AppendRequest(nil, Traces, body)
	if err != nil {
		t.Fatal(err)
	}
	if want := fromOTLPJSON(t, body); !bytes.Equal(got, want) {
		t.Fatalf("transcoded\n%x\nwant\n%x", got, want)
	}
	if s.Resources != 1 || s.Items != 100 {
		t.Fatalf("Scan %+v, want 1 resource and 100 items", s)
	}
}
