package bench

import (
	"encoding/base64"
	"encoding/hex"
	"math"
	"strconv"

	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	commonv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/common/v1"
	tracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/trace/v1"
)

// AppendTraceJSON renders a trace export request as OTLP/JSON, following the specification's
// mapping as SDKs write it: lowerCamelCase keys, trace and span ids in hex, enums as integers,
// 64-bit integers as decimal strings. It covers what the load generator produces (and span
// events, links and status are rendered too), not every corner of the schema: the bench sends
// it, the tests check it against the protobuf encoding of the same request.
func AppendTraceJSON(dst []byte, req *coltracev1.ExportTraceServiceRequest) []byte {
	dst = append(dst, `{"resourceSpans":[`...)
	for i, rs := range req.ResourceSpans {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '{')
		if r := rs.Resource; r != nil {
			dst = append(dst, `"resource":{"attributes":`...)
			dst = appendAttrs(dst, r.Attributes)
			dst = append(dst, "},"...)
		}
		dst = append(dst, `"scopeSpans":[`...)
		for j, ss := range rs.ScopeSpans {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, '{')
			if sc := ss.Scope; sc != nil {
				dst = append(dst, `"scope":{"name":`...)
				dst = appendJSONString(dst, sc.Name)
				if sc.Version != "" {
					dst = append(dst, `,"version":`...)
					dst = appendJSONString(dst, sc.Version)
				}
				dst = append(dst, "},"...)
			}
			dst = append(dst, `"spans":[`...)
			for k, sp := range ss.Spans {
				if k > 0 {
					dst = append(dst, ',')
				}
				dst = appendSpan(dst, sp)
			}
			dst = append(dst, ']')
			if ss.SchemaUrl != "" {
				dst = append(dst, `,"schemaUrl":`...)
				dst = appendJSONString(dst, ss.SchemaUrl)
			}
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
		if rs.SchemaUrl != "" {
			dst = append(dst, `,"schemaUrl":`...)
			dst = appendJSONString(dst, rs.SchemaUrl)
		}
		dst = append(dst, '}')
	}
	return append(dst, "]}"...)
}

func appendSpan(dst []byte, sp *tracev1.Span) []byte {
	dst = append(dst, `{"traceId":"`...)
	dst = hex.AppendEncode(dst, sp.TraceId)
	dst = append(dst, `","spanId":"`...)
	dst = hex.AppendEncode(dst, sp.SpanId)
	dst = append(dst, '"')
	if len(sp.ParentSpanId) > 0 {
		dst = append(dst, `,"parentSpanId":"`...)
		dst = hex.AppendEncode(dst, sp.ParentSpanId)
		dst = append(dst, '"')
	}
	if sp.TraceState != "" {
		dst = append(dst, `,"traceState":`...)
		dst = appendJSONString(dst, sp.TraceState)
	}
	dst = append(dst, `,"name":`...)
	dst = appendJSONString(dst, sp.Name)
	if sp.Kind != 0 {
		dst = append(dst, `,"kind":`...)
		dst = strconv.AppendInt(dst, int64(sp.Kind), 10)
	}
	dst = append(dst, `,"startTimeUnixNano":"`...)
	dst = strconv.AppendUint(dst, sp.StartTimeUnixNano, 10)
	dst = append(dst, `","endTimeUnixNano":"`...)
	dst = strconv.AppendUint(dst, sp.EndTimeUnixNano, 10)
	dst = append(dst, '"')
	if len(sp.Attributes) > 0 {
		dst = append(dst, `,"attributes":`...)
		dst = appendAttrs(dst, sp.Attributes)
	}
	if len(sp.Events) > 0 {
		dst = append(dst, `,"events":[`...)
		for i, ev := range sp.Events {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"timeUnixNano":"`...)
			dst = strconv.AppendUint(dst, ev.TimeUnixNano, 10)
			dst = append(dst, `","name":`...)
			dst = appendJSONString(dst, ev.Name)
			if len(ev.Attributes) > 0 {
				dst = append(dst, `,"attributes":`...)
				dst = appendAttrs(dst, ev.Attributes)
			}
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	if len(sp.Links) > 0 {
		dst = append(dst, `,"links":[`...)
		for i, l := range sp.Links {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"traceId":"`...)
			dst = hex.AppendEncode(dst, l.TraceId)
			dst = append(dst, `","spanId":"`...)
			dst = hex.AppendEncode(dst, l.SpanId)
			dst = append(dst, '"')
			if len(l.Attributes) > 0 {
				dst = append(dst, `,"attributes":`...)
				dst = appendAttrs(dst, l.Attributes)
			}
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	if st := sp.Status; st != nil {
		dst = append(dst, `,"status":{`...)
		sep := ""
		if st.Message != "" {
			dst = append(dst, `"message":`...)
			dst = appendJSONString(dst, st.Message)
			sep = ","
		}
		if st.Code != 0 {
			dst = append(dst, sep...)
			dst = append(dst, `"code":`...)
			dst = strconv.AppendInt(dst, int64(st.Code), 10)
		}
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

func appendAttrs(dst []byte, kvs []*commonv1.KeyValue) []byte {
	dst = append(dst, '[')
	for i, kv := range kvs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"key":`...)
		dst = appendJSONString(dst, kv.Key)
		dst = append(dst, `,"value":`...)
		dst = appendAnyValue(dst, kv.Value)
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

func appendAnyValue(dst []byte, v *commonv1.AnyValue) []byte {
	switch x := v.GetValue().(type) {
	case *commonv1.AnyValue_StringValue:
		dst = append(dst, `{"stringValue":`...)
		dst = appendJSONString(dst, x.StringValue)
	case *commonv1.AnyValue_IntValue:
		dst = append(dst, `{"intValue":"`...)
		dst = strconv.AppendInt(dst, x.IntValue, 10)
		dst = append(dst, '"')
	case *commonv1.AnyValue_BoolValue:
		dst = append(dst, `{"boolValue":`...)
		dst = strconv.AppendBool(dst, x.BoolValue)
	case *commonv1.AnyValue_DoubleValue:
		dst = append(dst, `{"doubleValue":`...)
		switch f := x.DoubleValue; {
		case math.IsNaN(f):
			dst = append(dst, `"NaN"`...)
		case math.IsInf(f, 1):
			dst = append(dst, `"Infinity"`...)
		case math.IsInf(f, -1):
			dst = append(dst, `"-Infinity"`...)
		default:
			dst = strconv.AppendFloat(dst, f, 'g', -1, 64)
		}
	case *commonv1.AnyValue_BytesValue:
		// bytes values are base64 in OTLP/JSON (only ids are hex).
		dst = append(dst, `{"bytesValue":"`...)
		dst = base64.StdEncoding.AppendEncode(dst, x.BytesValue)
		dst = append(dst, '"')
	case *commonv1.AnyValue_ArrayValue:
		dst = append(dst, `{"arrayValue":{"values":[`...)
		for i, e := range x.ArrayValue.GetValues() {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendAnyValue(dst, e)
		}
		dst = append(dst, "]}"...)
	case *commonv1.AnyValue_KvlistValue:
		dst = append(dst, `{"kvlistValue":{"values":`...)
		dst = appendAttrs(dst, x.KvlistValue.GetValues())
		dst = append(dst, '}')
	default:
		return append(dst, "{}"...)
	}
	return append(dst, '}')
}

// appendJSONString writes s as a JSON string. Bytes at or above 0x80 are copied as they are:
// JSON text is UTF-8, and OTLP strings are too.
func appendJSONString(dst []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&15])
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}
