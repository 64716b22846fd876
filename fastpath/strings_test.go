package fastpath_test

import (
	"math/rand/v2"
	"unicode/utf8"

	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	commonv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/common/v1"
	resourcev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/resource/v1"
	tracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/trace/v1"
)

// phrases are the text the string-heavy batch draws its values from: log lines, queries and
// messages in scripts of one, two, three and four bytes per character, as services in many
// languages log them.
var phrases = []string{
	"SELECT id, name, price FROM products WHERE category = $1 ORDER BY price LIMIT 50; ",
	"GET /api/v2/orders?customer=8812&status=open HTTP/1.1 200 OK in 12.7ms; ",
	"Bestellung für Kunde Jürgen Weiß konnte nicht zugestellt werden: Straße unbekannt. ",
	"Le paiement a échoué : carte refusée par la banque émettrice, réessayez plus tard. ",
	"Ошибка подключения к базе данных: превышено время ожидания ответа сервера. ",
	"注文処理中にエラーが発生しました。在庫サービスが応答していません。",
	"用户请求超时，正在重试第三次，请稍后检查支付服务的状态。",
	"배송 주소를 확인할 수 없습니다. 우편번호를 다시 입력해 주세요. ",
	"deploy finished ✅ rollout 3/3 healthy 🚀 latency p99 🔥 above budget ⚠️ ",
}

// stringHeavy returns a trace request of 100 spans whose names and attribute values are long
// text, nearly half of its bytes outside ASCII: the batch on which the UTF-8 check weighs most.
func stringHeavy() *coltracev1.ExportTraceServiceRequest {
	rnd := rand.New(rand.NewPCG(16, 61))
	text := func(n int) string {
		var b []byte
		for len(b) <= n {
			b = append(b, phrases[rnd.IntN(len(phrases))]...)
		}
		// Cut at a character boundary, so that the value stays UTF-8.
		for n > 0 && !utf8.RuneStart(b[n]) {
			n--
		}
		return string(b[:n])
	}
	keys := []string{"db.statement", "http.url", "exception.message", "message", "user.comment",
		"error.detail", "log.original", "messaging.payload"}
	spans := make([]*tracev1.Span, 100)
	for i := range spans {
		sp := &tracev1.Span{
			TraceId: traceID, SpanId: spanID, Name: text(20 + rnd.IntN(40)),
			Kind: tracev1.Span_SPAN_KIND_SERVER, StartTimeUnixNano: 1, EndTimeUnixNano: 2,
		}
		for _, k := range keys {
			sp.Attributes = append(sp.Attributes, &commonv1.KeyValue{Key: k, Value: str(text(64 + rnd.IntN(512)))})
		}
		spans[i] = sp
	}
	return &coltracev1.ExportTraceServiceRequest{ResourceSpans: []*tracev1.ResourceSpans{{
		Resource:   &resourcev1.Resource{Attributes: []*commonv1.KeyValue{{Key: "service.name", Value: str("überweisungs-dienst")}}},
		ScopeSpans: []*tracev1.ScopeSpans{{Scope: &commonv1.InstrumentationScope{Name: "strings"}, Spans: spans}},
	}}}
}
