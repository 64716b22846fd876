package otlpgen

import (
	"encoding/binary"
	"strconv"

	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	commonv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/common/v1"
	resourcev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/resource/v1"
	tracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/trace/v1"
)

// Semconv is the batch of the anchor benchmark (otlpbench anchor): 1000 server spans of an
// HTTP instrumentation, about 800 bytes each on the wire, with the attributes the HTTP
// semantic conventions name, as a Java or Go agent sends them. Unlike the Appendix B shapes,
// nearly all of its bytes are short strings, which is what a validating proxy meets in
// production and what it spends most on.
var Semconv = Shape{Spans: 1000, Semconv: true}

// semconvAttrs is the number of attributes of a semconv span.
const semconvAttrs = 16

// The values a semconv span picks from: routes with their path template, hosts, user agents.
// Real agents send the same few dozen keys and low-cardinality values again and again, with
// ids, addresses and ports that change per request.
var (
	semconvRoutes = []struct{ method, route, prefix, query string }{
		{"GET", "/api/v1/orders/{orderId}", "/api/v1/orders/", ""},
		{"GET", "/api/v1/customers/{customerId}/orders", "/api/v1/customers/", "page=2&size=50&sort=createdAt%2Cdesc"},
		{"POST", "/api/v1/checkout", "/api/v1/checkout", ""},
		{"GET", "/api/v2/catalog/products/{sku}", "/api/v2/catalog/products/", "fields=name,price,availability"},
		{"PUT", "/api/v1/carts/{cartId}/items/{itemId}", "/api/v1/carts/", ""},
		{"GET", "/healthz", "/healthz", ""},
	}
	semconvHosts      = []string{"shop.example.com", "api.shop.example.com", "checkout-service.prod.svc.cluster.local"}
	semconvUserAgents = []string{
		"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36",
		"Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1",
		"Mozilla/5.0 (Macintosh; Intel Mac OS X 10.15; rv:127.0) Gecko/20100101 Firefox/127.0",
		"okhttp/4.12.0",
		"Go-http-client/1.1",
		"Apache-HttpClient/4.5.14 (Java/17.0.11)",
	}
	semconvStatus = []int64{200, 200, 200, 200, 200, 200, 201, 204, 304, 404, 500}
)

// semconvSpans builds s.Spans server spans of one service (see Semconv), from the generator's
// random source: the same seed gives the same bytes. s.Traces deals the spans out to traces as
// Spans does.
func (g *Generator) semconvSpans(s Shape) *coltracev1.ExportTraceServiceRequest {
	nTraces := max(s.Traces, 1)
	traceIDs := make([]byte, 16*nTraces)
	for t := range nTraces {
		g.traceSeq++
		binary.BigEndian.PutUint64(traceIDs[16*t:], g.rnd.Uint64())
		binary.BigEndian.PutUint64(traceIDs[16*t+8:], g.traceSeq)
	}
	var (
		spans  = make([]tracev1.Span, s.Spans)
		ptrs   = make([]*tracev1.Span, s.Spans)
		kvs    = make([]commonv1.KeyValue, s.Spans*semconvAttrs)
		kvPtrs = make([]*commonv1.KeyValue, s.Spans*semconvAttrs)
		vals   = make([]commonv1.AnyValue, s.Spans*semconvAttrs)
		ids    = make([]byte, 16*s.Spans)
		kvi    int
	)
	str := func(s string) *commonv1.AnyValue_StringValue { return &commonv1.AnyValue_StringValue{StringValue: s} }
	intv := func(n int64) *commonv1.AnyValue_IntValue { return &commonv1.AnyValue_IntValue{IntValue: n} }
	for i := range spans {
		g.spanSeq++
		sp := &spans[i]
		t := i % nTraces
		sp.TraceId = traceIDs[16*t : 16*t+16 : 16*t+16]
		binary.BigEndian.PutUint64(ids[16*i:], g.spanSeq)
		binary.BigEndian.PutUint64(ids[16*i+8:], g.rnd.Uint64())
		sp.SpanId = ids[16*i : 16*i+8 : 16*i+8]
		sp.ParentSpanId = ids[16*i+8 : 16*i+16 : 16*i+16] // the client's span: a remote parent
		sp.Flags = 0x301                                  // sampled; the parent is remote and known to be
		sp.Kind = tracev1.Span_SPAN_KIND_SERVER
		sp.StartTimeUnixNano = baseTime + uint64(i)*1_000_000
		sp.EndTimeUnixNano = sp.StartTimeUnixNano + 1_000_000 + g.rnd.Uint64N(80_000_000)

		r := semconvRoutes[g.rnd.IntN(len(semconvRoutes))]
		sp.Name = r.method + " " + r.route
		id := strconv.FormatUint(1_000_000+g.rnd.Uint64N(9_000_000), 10)
		path := r.prefix + id
		if r.prefix == r.route {
			path = r.route // no id in the path
		}
		code := semconvStatus[g.rnd.IntN(len(semconvStatus))]
		if code >= 500 {
			// An error, as an agent reports one: status and the exception as an event.
			sp.Status = &tracev1.Status{Code: tracev1.Status_STATUS_CODE_ERROR}
			sp.Events = []*tracev1.Span_Event{{
				TimeUnixNano: sp.EndTimeUnixNano - 1000,
				Name:         "exception",
				Attributes: []*commonv1.KeyValue{
					{Key: "exception.type", Value: &commonv1.AnyValue{Value: str("java.lang.IllegalStateException")}},
					{Key: "exception.message", Value: &commonv1.AnyValue{Value: str("inventory reservation failed for order " + id)}},
					{Key: "exception.stacktrace", Value: &commonv1.AnyValue{Value: str(semconvStack)}},
				},
			}}
		}
		attrs := kvPtrs[kvi : kvi : kvi+semconvAttrs]
		// add appends an attribute with key and returns its value to fill.
		add := func(key string) *commonv1.AnyValue {
			kv := &kvs[kvi]
			kv.Key = key
			kv.Value = &vals[kvi]
			kvPtrs[kvi] = kv
			attrs = attrs[:len(attrs)+1]
			kvi++
			return kv.Value
		}
		add("http.request.method").Value = str(r.method)
		add("url.scheme").Value = str("https")
		add("url.path").Value = str(path)
		if r.query != "" {
			add("url.query").Value = str(r.query)
		} else {
			add("http.request.body.size").Value = intv(int64(200 + g.rnd.IntN(4000)))
		}
		add("http.route").Value = str(r.route)
		add("http.response.status_code").Value = intv(code)
		add("network.protocol.version").Value = str("1.1")
		add("server.address").Value = str(semconvHosts[g.rnd.IntN(len(semconvHosts))])
		add("server.port").Value = intv(8443)
		add("client.address").Value = str("203.0.113." + strconv.Itoa(1+g.rnd.IntN(254)))
		add("network.peer.address").Value = str("10.42." + strconv.Itoa(g.rnd.IntN(256)) + "." + strconv.Itoa(1+g.rnd.IntN(254)))
		add("network.peer.port").Value = intv(int64(32768 + g.rnd.IntN(28000)))
		add("user_agent.original").Value = str(semconvUserAgents[g.rnd.IntN(len(semconvUserAgents))])
		add("http.response.body.size").Value = intv(int64(100 + g.rnd.IntN(20000)))
		add("thread.name").Value = str("http-nio-8443-exec-" + strconv.Itoa(1+g.rnd.IntN(200)))
		add("thread.id").Value = intv(int64(40 + g.rnd.IntN(200)))
		sp.Attributes = attrs
		ptrs[i] = sp
	}
	strv := func(s string) *commonv1.AnyValue {
		return &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: s}}
	}
	res := []*commonv1.KeyValue{
		{Key: "service.name", Value: strv("checkout-service")},
		{Key: "service.namespace", Value: strv("shop")},
		{Key: "service.version", Value: strv("2.14.3")},
		{Key: "service.instance.id", Value: strv("627cc493-f310-47de-96bd-71410b7dec09")},
		{Key: "deployment.environment.name", Value: strv("production")},
		{Key: "telemetry.sdk.name", Value: strv("opentelemetry")},
		{Key: "telemetry.sdk.language", Value: strv("java")},
		{Key: "telemetry.sdk.version", Value: strv("1.44.1")},
		{Key: "telemetry.distro.name", Value: strv("opentelemetry-java-instrumentation")},
		{Key: "host.name", Value: strv("checkout-service-7d9f8b6c5-x2x8q")},
		{Key: "host.arch", Value: strv("amd64")},
		{Key: "os.type", Value: strv("linux")},
		{Key: "process.pid", Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_IntValue{IntValue: 1}}},
		{Key: "process.runtime.name", Value: strv("OpenJDK Runtime Environment")},
		{Key: "process.runtime.version", Value: strv("17.0.11+9")},
		{Key: "container.id", Value: strv("4c1d3f5e8a2b9c7d6e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d")},
		{Key: "k8s.namespace.name", Value: strv("shop")},
		{Key: "k8s.pod.name", Value: strv("checkout-service-7d9f8b6c5-x2x8q")},
		{Key: "k8s.node.name", Value: strv("ip-10-42-3-17.eu-west-1.compute.internal")},
	}
	return &coltracev1.ExportTraceServiceRequest{ResourceSpans: []*tracev1.ResourceSpans{{
		Resource: &resourcev1.Resource{Attributes: res},
		ScopeSpans: []*tracev1.ScopeSpans{{
			Scope: &commonv1.InstrumentationScope{Name: "io.opentelemetry.tomcat-10.0", Version: "2.10.0-alpha"},
			Spans: ptrs,
		}},
		SchemaUrl: "https://opentelemetry.io/schemas/1.27.0",
	}}}
}

// semconvStack is the stack trace of the exception event of a failed request.
const semconvStack = `java.lang.IllegalStateException: inventory reservation failed
	at com.example.shop.checkout.InventoryClient.reserve(InventoryClient.java:142)
	at com.example.shop.checkout.CheckoutService.placeOrder(CheckoutService.java:87)
	at com.example.shop.checkout.CheckoutController.checkout(CheckoutController.java:54)
	at java.base/jdk.internal.reflect.DirectMethodHandleAccessor.invoke(DirectMethodHandleAccessor.java:103)
	at java.base/java.lang.reflect.Method.invoke(Method.java:580)
	at org.springframework.web.method.support.InvocableHandlerMethod.doInvoke(InvocableHandlerMethod.java:255)
	at org.springframework.web.method.support.InvocableHandlerMethod.invokeForRequest(InvocableHandlerMethod.java:188)
	at org.springframework.web.servlet.mvc.method.annotation.ServletInvocableHandlerMethod.invokeAndHandle(ServletInvocableHandlerMethod.java:118)
	at org.springframework.web.servlet.DispatcherServlet.doDispatch(DispatcherServlet.java:1089)
	at org.springframework.web.servlet.FrameworkServlet.service(FrameworkServlet.java:885)
	at org.apache.catalina.core.ApplicationFilterChain.internalDoFilter(ApplicationFilterChain.java:195)
	at org.apache.catalina.core.StandardWrapperValve.invoke(StandardWrapperValve.java:166)
	at org.apache.coyote.http11.Http11Processor.service(Http11Processor.java:391)
	at org.apache.tomcat.util.net.NioEndpoint$SocketProcessor.doRun(NioEndpoint.java:1736)
	at java.base/java.lang.Thread.run(Thread.java:1583)
`
