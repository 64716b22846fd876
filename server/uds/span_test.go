package uds

import (
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	commonv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/common/v1"
	tracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/trace/v1"
)

// baseSpan is a span as the client writes it; fields are replaced per case.
const baseSpan = `{"traceId":"0af7651916cd43dd8448eb211c80319c","spanId":"77ec8364","parentSpanId":"3039",` +
	`"name":"n","kind":"SERVER","stackTrace":[],` +
	`"startTime":{"date":"2023-11-14 22:13:20.123456","timezone_type":3,"timezone":"UTC"},` +
	`"endTime":{"date":"2023-11-14 22:13:21.000000","timezone_type":1,"timezone":"+00:00"},` +
	`"status":null,"attributes":[],"timeEvents":[],"links":[],"sameProcessAsParentSpan":true}`

// with replaces the value of key in baseSpan.
func with(key, value string) string {
	i := strings.Index(baseSpan, `"`+key+`":`)
	if i < 0 {
		panic(key)
	}
	start := i + len(key) + 3
	depth, end := 0, start
	for inStr := false; end < len(baseSpan); end++ {
		c := baseSpan[end]
		if inStr {
			if c == '"' && baseSpan[end-1] != '\\' {
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		}
		if depth < 0 || (depth == 0 && c == ',') {
			break
		}
	}
	return baseSpan[:start] + value + baseSpan[end:]
}

func convertOne(t *testing.T, span string) *tracev1.Span {
	t.Helper()
	var c spanConverter
	if err := c.convert([]byte("["+span+"]"), 0); err != nil {
		t.Fatalf("convert: %v", err)
	}
	if len(c.spans) != 1 || c.dropped != 0 {
		t.Fatalf("%d spans, %d dropped", len(c.spans), c.dropped)
	}
	return otlpSpans(&c)[0]
}

func attrs(kvs []*commonv1.KeyValue) string {
	var parts []string
	for _, kv := range kvs {
		var v any
		switch x := kv.Value.Value.(type) {
		case *commonv1.AnyValue_StringValue:
			v = fmt.Sprintf("%q", x.StringValue)
		case *commonv1.AnyValue_IntValue:
			v = x.IntValue
		case *commonv1.AnyValue_DoubleValue:
			v = x.DoubleValue
		case *commonv1.AnyValue_BoolValue:
			v = x.BoolValue
		}
		parts = append(parts, fmt.Sprintf("%s=%v", kv.Key, v))
	}
	return strings.Join(parts, " ")
}

func TestSpanFields(t *testing.T) {
	sp := convertOne(t, baseSpan)
	if hex.EncodeToString(sp.TraceId) != "0af7651916cd43dd8448eb211c80319c" ||
		hex.EncodeToString(sp.SpanId) != "0000000077ec8364" ||
		hex.EncodeToString(sp.ParentSpanId) != "0000000000003039" {
		t.Errorf("ids %x %x %x", sp.TraceId, sp.SpanId, sp.ParentSpanId)
	}
	if sp.Kind != tracev1.Span_SPAN_KIND_SERVER || sp.Name != "n" {
		t.Errorf("kind %v name %q", sp.Kind, sp.Name)
	}
	if sp.StartTimeUnixNano != 1700000000123456000 || sp.EndTimeUnixNano != 1700000001000000000 {
		t.Errorf("times %d %d", sp.StartTimeUnixNano, sp.EndTimeUnixNano)
	}
	if sp.Flags != uint32(tracev1.SpanFlags_SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK) || sp.Status != nil {
		t.Errorf("flags %x status %v", sp.Flags, sp.Status)
	}
}

func TestSpanConversions(t *testing.T) {
	f := func(name, span string, check func(*tracev1.Span) string) {
		t.Helper()
		if msg := check(convertOne(t, span)); msg != "" {
			t.Errorf("%s: %s", name, msg)
		}
	}
	f("remote parent", with("sameProcessAsParentSpan", "false"), func(sp *tracev1.Span) string {
		if sp.Flags != 0x300 {
			return fmt.Sprintf("flags %x", sp.Flags)
		}
		return ""
	})
	f("root span", with("parentSpanId", "null"), func(sp *tracev1.Span) string {
		if sp.ParentSpanId != nil || sp.Flags != 0 {
			return fmt.Sprintf("parent %x flags %x", sp.ParentSpanId, sp.Flags)
		}
		return ""
	})
	f("odd-length span id", with("spanId", `"abc"`), func(sp *tracev1.Span) string {
		if hex.EncodeToString(sp.SpanId) != "0000000000000abc" {
			return fmt.Sprintf("span id %x", sp.SpanId)
		}
		return ""
	})
	for kind, want := range map[string]tracev1.Span_SpanKind{
		"CLIENT": tracev1.Span_SPAN_KIND_CLIENT, "SPAN_KIND_UNSPECIFIED": tracev1.Span_SPAN_KIND_UNSPECIFIED,
		"PRODUCER": tracev1.Span_SPAN_KIND_PRODUCER, "bogus": tracev1.Span_SPAN_KIND_UNSPECIFIED,
	} {
		f("kind "+kind, with("kind", `"`+kind+`"`), func(sp *tracev1.Span) string {
			if sp.Kind != want {
				return fmt.Sprintf("kind %v", sp.Kind)
			}
			return ""
		})
	}
	f("offset time zone", with("startTime", `{"date":"2023-11-14 17:13:20.5","timezone_type":1,"timezone":"-05:00"}`), func(sp *tracev1.Span) string {
		if sp.StartTimeUnixNano != 1700000000500000000 {
			return fmt.Sprintf("start %d", sp.StartTimeUnixNano)
		}
		return ""
	})
	f("named time zone", with("startTime", `{"date":"2023-11-14 23:13:20.000000","timezone_type":3,"timezone":"Europe\/Berlin"}`), func(sp *tracev1.Span) string {
		if _, err := time.LoadLocation("Europe/Berlin"); err != nil {
			return "" // no zone database on this machine
		}
		if sp.StartTimeUnixNano != 1700000000000000000 {
			return fmt.Sprintf("start %d", sp.StartTimeUnixNano)
		}
		return ""
	})
	f("float seconds", with("startTime", `1700000000.25`), func(sp *tracev1.Span) string {
		if sp.StartTimeUnixNano != 1700000000250000000 {
			return fmt.Sprintf("start %d", sp.StartTimeUnixNano)
		}
		return ""
	})
	f("attributes", with("attributes", `{"s":"caf\u00e9 \ud83d\ude00","i":42,"d":1.5,"b":true,"n":null,"o":{"x":[1]},"p":"\/a"}`), func(sp *tracev1.Span) string {
		want := `s="café 😀" i=42 d=1.5 b=true o="{\"x\":[1]}" p="/a"`
		if got := attrs(sp.Attributes); got != want || sp.DroppedAttributesCount != 1 {
			return fmt.Sprintf("attributes %s (dropped %d), want %s", got, sp.DroppedAttributesCount, want)
		}
		return ""
	})
	f("stack trace", with("stackTrace", `[{"file":"\/srv\/a.php","line":33,"function":"handler"},{"function":"run","class":"App","type":"->"},{"file":"\/srv\/index.php","line":"7","function":"{main}"}]`), func(sp *tracev1.Span) string {
		want := "code.stacktrace=\"#0 /srv/a.php(33): handler()\\n#1 [internal function]: App->run()\\n#2 /srv/index.php(7): {main}()\""
		if got := attrs(sp.Attributes); got != want {
			return fmt.Sprintf("got %s\nwant %s", got, want)
		}
		return ""
	})
	f("status error", with("status", `{"code":5,"message":"not found"}`), func(sp *tracev1.Span) string {
		if sp.Status == nil || sp.Status.Code != tracev1.Status_STATUS_CODE_ERROR || sp.Status.Message != "not found" ||
			attrs(sp.Attributes) != "opencensus.status_code=5" {
			return fmt.Sprintf("status %v attributes %s", sp.Status, attrs(sp.Attributes))
		}
		return ""
	})
	f("status ok", with("status", `{"code":0,"message":"fine"}`), func(sp *tracev1.Span) string {
		if sp.Status == nil || sp.Status.Code != tracev1.Status_STATUS_CODE_OK {
			return fmt.Sprintf("status %v", sp.Status)
		}
		return ""
	})
	f("empty status", with("status", `{}`), func(sp *tracev1.Span) string {
		if sp.Status != nil {
			return fmt.Sprintf("status %v", sp.Status)
		}
		return ""
	})
	f("time events", with("timeEvents", `[{},{"time":1700000000.5,"description":"cache miss","attributes":{"key":"k"}},`+
		`{"time":{"date":"2023-11-14 22:13:20.750000","timezone_type":3,"timezone":"UTC"},"type":"SENT","id":"7","uncompressedSize":100,"compressedSize":40},`+
		`{"description":"no time"}]`), func(sp *tracev1.Span) string {
		if len(sp.Events) != 2 || sp.DroppedEventsCount != 2 {
			return fmt.Sprintf("%d events, %d dropped", len(sp.Events), sp.DroppedEventsCount)
		}
		a, m := sp.Events[0], sp.Events[1]
		if a.Name != "cache miss" || a.TimeUnixNano != 1700000000500000000 || attrs(a.Attributes) != `key="k"` {
			return fmt.Sprintf("annotation %v", a)
		}
		if m.Name != "message" || m.TimeUnixNano != 1700000000750000000 ||
			attrs(m.Attributes) != `message.type="SENT" message.id="7" message.uncompressed_size=100 message.compressed_size=40` {
			return fmt.Sprintf("message event %v", m)
		}
		return ""
	})
	f("links", with("links", `[{},{"traceId":"0af7651916cd43dd8448eb211c80319c","spanId":"1","type":"PARENT_LINKED_SPAN","attributes":{"a":"b"}}]`), func(sp *tracev1.Span) string {
		if len(sp.Links) != 1 || sp.DroppedLinksCount != 1 {
			return fmt.Sprintf("%d links, %d dropped", len(sp.Links), sp.DroppedLinksCount)
		}
		l := sp.Links[0]
		if hex.EncodeToString(l.SpanId) != "0000000000000001" || attrs(l.Attributes) != `opencensus.link.type="PARENT_LINKED_SPAN" a="b"` {
			return fmt.Sprintf("link %v", l)
		}
		return ""
	})
	f("invalid UTF-8 is replaced", with("name", "\"a\xffb\""), func(sp *tracev1.Span) string {
		if sp.Name != "a\uFFFDb" {
			return fmt.Sprintf("name %q", sp.Name)
		}
		return ""
	})
}

func TestSpanDropped(t *testing.T) {
	bad := []string{
		with("traceId", `"xyz"`),
		with("traceId", `"00000000000000000000000000000000"`),
		with("traceId", `"0af7651916cd43dd8448eb211c80319c00"`),
		with("spanId", `"0"`),
		with("spanId", `12`),
		with("parentSpanId", `"nothex"`),
		with("startTime", `{"date":"yesterday","timezone_type":3,"timezone":"UTC"}`),
		with("endTime", `{"date":"2023-11-14 22:13:21","timezone_type":3,"timezone":"Mars\/Olympus"}`),
		with("endTime", `null`),
		`{"traceId":"0af7651916cd43dd8448eb211c80319c"}`,
		`"not an object"`,
	}
	for _, span := range bad {
		var c spanConverter
		payload := "[" + baseSpan + "," + span + "," + baseSpan + "]"
		if err := c.convert([]byte(payload), 0); err != nil {
			t.Fatalf("%s: %v", span, err)
		}
		if len(c.spans) != 2 || c.dropped != 1 {
			t.Errorf("%s: %d kept, %d dropped; want 2 and 1", span, len(c.spans), c.dropped)
		}
	}
}

func TestSpanSyntaxErrors(t *testing.T) {
	for _, payload := range []string{
		``, `{}`, `[`, `[{]`, `[` + baseSpan, `[` + baseSpan + `,]`, `[` + baseSpan + `] x`,
		`[{"name":"a\x01"}]`, `[{"name":"\u12"}]`, `[{"n":01}]`, `[{"n":tru}]`,
		`[{"n":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}]`,
	} {
		var c spanConverter
		if err := c.convert([]byte(payload), 0); err == nil {
			t.Errorf("%q: accepted", payload)
		}
		if len(c.spans) != 0 {
			t.Errorf("%q: spans kept from a malformed export", payload)
		}
	}
}

func TestThreadID(t *testing.T) {
	var c spanConverter
	if err := c.convert([]byte("["+baseSpan+"]"), 12); err != nil {
		t.Fatal(err)
	}
	if got := attrs(otlpSpans(&c)[0].Attributes); got != "thread.id=12" {
		t.Fatalf("attributes %s", got)
	}
}
