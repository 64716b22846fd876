package uds

import (
	"encoding/hex"
	"strconv"
	"strings"
	"unicode/utf8"

	commonv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/common/v1"
	tracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/trace/v1"
)

// Attribute keys the converter adds to what the client sent.
const (
	attrStackTrace   = "code.stacktrace"
	attrThreadID     = "thread.id"
	attrStatusCode   = "opencensus.status_code"
	attrLinkType     = "opencensus.link.type"
	attrMessageType  = "message.type"
	attrMessageID    = "message.id"
	attrUncompressed = "message.uncompressed_size"
	attrCompressed   = "message.compressed_size"
	messageEventName = "message"
)

// spanConverter turns the JSON of one TRACE_EXPORT into OTLP spans. It is owned by one goroutine
// at a time (pooled between exports).
//
// What the real client sends and how it maps (see testdata/README.md):
//  1. traceId (32 hex) and spanId/parentSpanId (1 to 16 hex, often odd) are left-padded with
//     zeros to 16 and 8 bytes; a null or empty parent is a root span. An id that is not hex,
//     too long or all zero makes the span unconvertible.
//  2. startTime/endTime are serialised PHP DateTimes (or float seconds); both are required.
//  3. attributes is an object (or [] when empty); strings stay strings, JSON numbers and
//     booleans keep their type, nested values are kept as their JSON text, null is dropped and
//     counted in dropped_attributes_count.
//  4. stackTrace frames become one code.stacktrace attribute in PHP's own trace format.
//  5. timeEvents: annotations (description) and message events (type/id) become span events;
//     the client's objects serialise as {} (their properties are private), which carries
//     nothing and is counted in dropped_events_count. links likewise, in dropped_links_count.
//  6. status {code, message}: 0 is OK, anything else ERROR; null and {} leave it unset.
//  7. sameProcessAsParentSpan=false on a span with a parent sets the remote-parent flag.
type spanConverter struct {
	js      jsonScanner
	spans   []*tracev1.Span
	dropped int
	stack   []byte

	// The objects of an export are carved from chunks instead of allocated one by one. An
	// object is handed out once and never reused, so the spans of an earlier export stay intact
	// for as long as anyone holds them.
	spanC chunk[tracev1.Span]
	kvC   chunk[commonv1.KeyValue]
	avC   chunk[commonv1.AnyValue]
	svC   chunk[commonv1.AnyValue_StringValue]
	ivC   chunk[commonv1.AnyValue_IntValue]
	evC   chunk[tracev1.Span_Event]
	idC   chunk[byte]

	// Every string of an export is gathered in text and becomes one Go string at the end;
	// patches say which string fields point where into it.
	text    []byte
	patches []patch
}

type patch struct {
	dst      *string
	off, end int
}

// chunk hands out fresh values from arrays allocated chunkLen at a time.
type chunk[T any] struct{ free []T }

const chunkLen = 64

func (c *chunk[T]) next() *T {
	if len(c.free) == 0 {
		c.free = make([]T, chunkLen)
	}
	p := &c.free[0]
	c.free = c.free[1:]
	return p
}

// bytes returns n fresh zero bytes.
func (c *chunk[T]) bytes(n int) []T {
	if len(c.free) < n {
		c.free = make([]T, max(n, 1024))
	}
	b := c.free[:n:n]
	c.free = c.free[n:]
	return b
}

// setString makes *dst the text of b, valid UTF-8, once convert finishes.
func (c *spanConverter) setString(dst *string, b []byte) {
	off := len(c.text)
	if utf8.Valid(b) {
		c.text = append(c.text, b...)
	} else {
		c.text = append(c.text, strings.ToValidUTF8(string(b), "\uFFFD")...)
	}
	c.patches = append(c.patches, patch{dst: dst, off: off, end: len(c.text)})
}

// applyStrings turns the gathered text into one string and points the patched fields into it.
func (c *spanConverter) applyStrings() {
	all := string(c.text)
	for _, p := range c.patches {
		*p.dst = all[p.off:p.end]
	}
	clear(c.patches)
	c.patches, c.text = c.patches[:0], c.text[:0]
}

// kv returns a key/value with a constant key and the given value.
func (c *spanConverter) kv(key string, v *commonv1.AnyValue) *commonv1.KeyValue {
	kv := c.kvC.next()
	kv.Key, kv.Value = key, v
	return kv
}

// kvKey is kv with a key taken from the payload.
func (c *spanConverter) kvKey(key []byte, v *commonv1.AnyValue) *commonv1.KeyValue {
	kv := c.kvC.next()
	c.setString(&kv.Key, key)
	kv.Value = v
	return kv
}

func (c *spanConverter) anyString(b []byte) *commonv1.AnyValue {
	sv := c.svC.next()
	c.setString(&sv.StringValue, b)
	av := c.avC.next()
	av.Value = sv
	return av
}

func (c *spanConverter) anyInt(v int64) *commonv1.AnyValue {
	iv := c.ivC.next()
	iv.IntValue = v
	av := c.avC.next()
	av.Value = iv
	return av
}

// convert parses payload and fills c.spans; spans that cannot be converted are counted in
// c.dropped. It returns errJSON when payload is not a JSON array, in which case nothing of it
// may be used.
func (c *spanConverter) convert(payload []byte, tid uint64) error {
	c.js.reset(payload)
	c.spans, c.dropped = c.spans[:0], 0
	clear(c.patches)
	c.patches, c.text = c.patches[:0], c.text[:0]
	js := &c.js
	js.expect('[')
	for first := true; js.elem(&first); {
		if js.peek() != '{' {
			js.skip()
			c.dropped++
			continue
		}
		sp, ok := c.span()
		if js.err != nil {
			break
		}
		if !ok {
			c.dropped++
			continue
		}
		if tid != 0 {
			sp.Attributes = append(sp.Attributes, c.kv(attrThreadID, c.anyInt(int64(tid))))
		}
		c.spans = append(c.spans, sp)
	}
	if js.err == nil && !js.end() {
		js.fail()
	}
	if js.err != nil {
		clear(c.patches)
		c.spans, c.patches, c.text = c.spans[:0], c.patches[:0], c.text[:0]
		return js.err
	}
	c.applyStrings()
	return nil
}

func (c *spanConverter) span() (*tracev1.Span, bool) {
	js := &c.js
	js.expect('{')
	sp := c.spanC.next()
	ok := true
	var haveTrace, haveSpan, haveStart, haveEnd, hasParent, sameProcess bool
	c.stack = c.stack[:0]
	for first := true; ; {
		k, more := js.key(&first)
		if !more {
			break
		}
		switch string(k) {
		case "traceId":
			sp.TraceId, haveTrace = c.id(16)
		case "spanId":
			sp.SpanId, haveSpan = c.id(8)
		case "parentSpanId":
			if c.null() {
				continue
			}
			if s, isStr := c.strValue(); isStr && len(s) == 0 {
				continue
			} else if id, good := c.decodeID(s, 8); isStr && good {
				sp.ParentSpanId, hasParent = id, true
			} else {
				ok = false
			}
		case "name":
			if s, isStr := c.strValue(); isStr {
				c.setString(&sp.Name, s)
			}
		case "kind":
			if s, isStr := c.strValue(); isStr {
				sp.Kind = spanKind(s)
			}
		case "stackTrace":
			c.stackTrace()
		case "startTime":
			sp.StartTimeUnixNano, haveStart = c.time()
		case "endTime":
			sp.EndTimeUnixNano, haveEnd = c.time()
		case "status":
			c.status(sp)
		case "attributes":
			sp.Attributes, sp.DroppedAttributesCount = c.attributes(sp.Attributes)
		case "timeEvents":
			c.timeEvents(sp)
		case "links":
			c.links(sp)
		case "sameProcessAsParentSpan":
			sameProcess = c.boolValue()
		default:
			js.skip()
		}
	}
	if len(c.stack) > 0 {
		sp.Attributes = append(sp.Attributes, c.kv(attrStackTrace, c.anyString(c.stack)))
	}
	if hasParent {
		sp.Flags = uint32(tracev1.SpanFlags_SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK)
		if !sameProcess {
			sp.Flags |= uint32(tracev1.SpanFlags_SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK)
		}
	}
	return sp, ok && haveTrace && haveSpan && haveStart && haveEnd
}

// id reads a hex id string of up to 2*n digits, left-padded to n bytes.
func (c *spanConverter) id(n int) ([]byte, bool) {
	s, isStr := c.strValue()
	if !isStr {
		return nil, false
	}
	return c.decodeID(s, n)
}

// decodeID is decodeID with the id's bytes carved from the converter's chunk.
func (c *spanConverter) decodeID(s []byte, n int) ([]byte, bool) {
	var buf [16]byte
	id, ok := decodeIDInto(buf[:n], s)
	if !ok {
		return nil, false
	}
	out := c.idC.bytes(n)
	copy(out, id)
	return out, true
}

// decodeID reads a hex id of up to 2*n digits, left-padded with zeros to n bytes; all-zero ids
// are invalid.
func decodeID(s []byte, n int) ([]byte, bool) {
	return decodeIDInto(make([]byte, n), s)
}

func decodeIDInto(id, s []byte) ([]byte, bool) {
	n := len(id)
	if len(s) == 0 || len(s) > 2*n {
		return nil, false
	}
	var digits [32]byte
	pad := 2*n - len(s)
	for i := range pad {
		digits[i] = '0'
	}
	copy(digits[pad:], s)
	if _, err := hex.Decode(id, digits[:2*n]); err != nil {
		return nil, false
	}
	for _, b := range id {
		if b != 0 {
			return id, true
		}
	}
	return nil, false
}

func spanKind(s []byte) tracev1.Span_SpanKind {
	switch strings.TrimPrefix(string(s), "SPAN_KIND_") {
	case "SERVER":
		return tracev1.Span_SPAN_KIND_SERVER
	case "CLIENT":
		return tracev1.Span_SPAN_KIND_CLIENT
	case "PRODUCER":
		return tracev1.Span_SPAN_KIND_PRODUCER
	case "CONSUMER":
		return tracev1.Span_SPAN_KIND_CONSUMER
	case "INTERNAL":
		return tracev1.Span_SPAN_KIND_INTERNAL
	}
	return tracev1.Span_SPAN_KIND_UNSPECIFIED
}

// null consumes a null and reports whether there was one.
func (c *spanConverter) null() bool {
	if c.js.peek() == 'n' {
		c.js.literal()
		return true
	}
	return false
}

// strValue reads a string; any other value is skipped and reported as not a string.
func (c *spanConverter) strValue() ([]byte, bool) {
	if c.js.peek() != '"' {
		c.js.skip()
		return nil, false
	}
	return c.js.str(), true
}

func (c *spanConverter) boolValue() bool {
	switch c.js.peek() {
	case 't':
		c.js.literal()
		return true
	case 'f':
		c.js.literal()
		return false
	}
	c.js.skip()
	return false
}

// intValue reads an integer given as a JSON number or a numeric string.
func (c *spanConverter) intValue() (int64, bool) {
	var text []byte
	switch c.js.peek() {
	case '"':
		text = c.js.str()
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		text, _ = c.js.number()
	default:
		c.js.skip()
		return 0, false
	}
	v, err := strconv.ParseInt(string(text), 10, 64)
	return v, err == nil
}

// time reads a serialised PHP DateTime, or float Unix seconds.
func (c *spanConverter) time() (uint64, bool) {
	js := &c.js
	switch js.peek() {
	case '{':
		js.i++
		var date, tz []byte
		var tzType int64
		for first := true; ; {
			k, more := js.key(&first)
			if !more {
				break
			}
			switch string(k) {
			case "date":
				date, _ = c.strValue()
			case "timezone_type":
				tzType, _ = c.intValue()
			case "timezone":
				tz, _ = c.strValue()
			default:
				js.skip()
			}
		}
		if js.err != nil {
			return 0, false
		}
		ns, ok := phpDate(date, tzType, tz)
		return uint64(ns), ok
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		text, _ := js.number()
		v, err := strconv.ParseFloat(string(text), 64)
		if err != nil {
			return 0, false
		}
		ns, ok := secondsToNano(v)
		return uint64(ns), ok
	}
	js.skip()
	return 0, false
}

// stackTrace renders the frames like PHP's Exception::getTraceAsString into c.stack.
func (c *spanConverter) stackTrace() {
	js := &c.js
	if js.peek() != '[' {
		js.skip()
		return
	}
	js.i++
	n := 0
	for first := true; js.elem(&first); {
		if js.peek() != '{' {
			js.skip()
			continue
		}
		js.i++
		var file, function, class, typ []byte
		line := int64(-1)
		for kf := true; ; {
			k, more := js.key(&kf)
			if !more {
				break
			}
			switch string(k) {
			case "file":
				file, _ = c.strValue()
			case "line":
				if v, ok := c.intValue(); ok {
					line = v
				}
			case "function":
				function, _ = c.strValue()
			case "class":
				class, _ = c.strValue()
			case "type":
				typ, _ = c.strValue()
			default:
				js.skip()
			}
		}
		b := c.stack
		if n > 0 {
			b = append(b, '\n')
		}
		b = append(b, '#')
		b = strconv.AppendInt(b, int64(n), 10)
		b = append(b, ' ')
		if len(file) > 0 {
			b = append(b, file...)
			if line >= 0 {
				b = append(b, '(')
				b = strconv.AppendInt(b, line, 10)
				b = append(b, ')')
			}
		} else {
			b = append(b, "[internal function]"...)
		}
		b = append(b, ": "...)
		b = append(b, class...)
		b = append(b, typ...)
		b = append(b, function...)
		b = append(b, "()"...)
		c.stack = b
		n++
	}
}

func (c *spanConverter) status(sp *tracev1.Span) {
	js := &c.js
	if js.peek() != '{' {
		js.skip()
		return
	}
	js.i++
	var code int64
	var haveCode bool
	var msg []byte
	for first := true; ; {
		k, more := js.key(&first)
		if !more {
			break
		}
		switch string(k) {
		case "code":
			code, haveCode = c.intValue()
		case "message":
			msg, _ = c.strValue()
		default:
			js.skip()
		}
	}
	if !haveCode {
		return
	}
	sp.Status = &tracev1.Status{Code: tracev1.Status_STATUS_CODE_OK}
	c.setString(&sp.Status.Message, msg)
	if code != 0 {
		sp.Status.Code = tracev1.Status_STATUS_CODE_ERROR
		sp.Attributes = append(sp.Attributes, c.kv(attrStatusCode, c.anyInt(code)))
	}
}

// attributes appends the attributes of an object (or a PHP list) and returns the count of
// values that could not be kept.
func (c *spanConverter) attributes(dst []*commonv1.KeyValue) ([]*commonv1.KeyValue, uint32) {
	js := &c.js
	var dropped uint32
	switch js.peek() {
	case '{':
		js.i++
		for first := true; ; {
			k, more := js.key(&first)
			if !more {
				break
			}
			// The key's bytes may sit in the scanner's arena, which later strings only append to.
			if v := c.anyValue(); v != nil {
				dst = append(dst, c.kvKey(k, v))
			} else {
				dropped++
			}
		}
	case '[':
		// json_encode writes an empty PHP array, or a list, as a JSON array: keys are indexes.
		js.i++
		for i, first := 0, true; js.elem(&first); i++ {
			if v := c.anyValue(); v != nil {
				dst = append(dst, c.kv(strconv.Itoa(i), v))
			} else {
				dropped++
			}
		}
	default:
		if !c.null() {
			js.skip()
			dropped++
		}
	}
	return dst, dropped
}

// anyValue converts one JSON value; nil for null.
func (c *spanConverter) anyValue() *commonv1.AnyValue {
	js := &c.js
	switch js.peek() {
	case '"':
		return c.anyString(js.str())
	case 't', 'f':
		return &commonv1.AnyValue{Value: &commonv1.AnyValue_BoolValue{BoolValue: js.literal() == 't'}}
	case 'n':
		js.literal()
		return nil
	case '{', '[':
		return c.anyString(js.skip())
	}
	text, isInt := js.number()
	if isInt {
		if v, err := strconv.ParseInt(string(text), 10, 64); err == nil {
			return c.anyInt(v)
		}
	}
	v, _ := strconv.ParseFloat(string(text), 64)
	return &commonv1.AnyValue{Value: &commonv1.AnyValue_DoubleValue{DoubleValue: v}}
}

func (c *spanConverter) timeEvents(sp *tracev1.Span) {
	js := &c.js
	if js.peek() != '[' {
		js.skip()
		return
	}
	js.i++
	for first := true; js.elem(&first); {
		if js.peek() != '{' {
			js.skip()
			sp.DroppedEventsCount++
			continue
		}
		js.i++
		ev := c.evC.next()
		var haveTime, annotation, message bool
		var typ, id []byte
		var uncompressed, compressed int64
		var haveUncompressed, haveCompressed bool
		for kf := true; ; {
			k, more := js.key(&kf)
			if !more {
				break
			}
			switch string(k) {
			case "time":
				ev.TimeUnixNano, haveTime = c.time()
			case "description":
				if s, ok := c.strValue(); ok {
					c.setString(&ev.Name, s)
					annotation = true
				}
			case "attributes":
				ev.Attributes, ev.DroppedAttributesCount = c.attributes(ev.Attributes)
			case "type":
				typ, _ = c.strValue()
				message = true
			case "id":
				if js.peek() == '"' {
					id = js.str()
				} else {
					id = js.skip()
				}
				message = true
			case "uncompressedSize":
				uncompressed, haveUncompressed = c.intValue()
			case "compressedSize":
				compressed, haveCompressed = c.intValue()
			default:
				js.skip()
			}
		}
		if !haveTime || !(annotation || message) {
			sp.DroppedEventsCount++
			continue
		}
		if !annotation {
			ev.Name = messageEventName
			ev.Attributes = append(ev.Attributes, c.kv(attrMessageType, c.anyString(typ)))
			if len(id) > 0 {
				ev.Attributes = append(ev.Attributes, c.kv(attrMessageID, c.anyString(id)))
			}
			if haveUncompressed {
				ev.Attributes = append(ev.Attributes, c.kv(attrUncompressed, c.anyInt(uncompressed)))
			}
			if haveCompressed {
				ev.Attributes = append(ev.Attributes, c.kv(attrCompressed, c.anyInt(compressed)))
			}
		}
		sp.Events = append(sp.Events, ev)
	}
}

func (c *spanConverter) links(sp *tracev1.Span) {
	js := &c.js
	if js.peek() != '[' {
		js.skip()
		return
	}
	js.i++
	for first := true; js.elem(&first); {
		if js.peek() != '{' {
			js.skip()
			sp.DroppedLinksCount++
			continue
		}
		js.i++
		l := &tracev1.Span_Link{}
		var haveTrace, haveSpan bool
		for kf := true; ; {
			k, more := js.key(&kf)
			if !more {
				break
			}
			switch string(k) {
			case "traceId":
				l.TraceId, haveTrace = c.id(16)
			case "spanId":
				l.SpanId, haveSpan = c.id(8)
			case "type":
				if s, ok := c.strValue(); ok && len(s) > 0 && string(s) != "TYPE_UNSPECIFIED" {
					l.Attributes = append(l.Attributes, c.kv(attrLinkType, c.anyString(s)))
				}
			case "attributes":
				var dropped uint32
				l.Attributes, dropped = c.attributes(l.Attributes)
				l.DroppedAttributesCount += dropped
			default:
				js.skip()
			}
		}
		if !haveTrace || !haveSpan {
			sp.DroppedLinksCount++
			continue
		}
		sp.Links = append(sp.Links, l)
	}
}

// toString copies b into a string that is valid UTF-8, as protobuf string fields must be.
func toString(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

func stringKV(k, v string) *commonv1.KeyValue {
	return &commonv1.KeyValue{Key: k, Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: v}}}
}

func intKV(k string, v int64) *commonv1.KeyValue {
	return &commonv1.KeyValue{Key: k, Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_IntValue{IntValue: v}}}
}

func boolKV(k string, v bool) *commonv1.KeyValue {
	return &commonv1.KeyValue{Key: k, Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_BoolValue{BoolValue: v}}}
}
