package uds

import (
	"encoding/hex"
	"strings"

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
	spans   []span
	dropped int
	stack   []byte

	// text holds every string and id of the export; the spans refer to ranges of it.
	text []byte
}

// convert parses payload and fills c.spans; spans that cannot be converted are counted in
// c.dropped. It returns errJSON when payload is not a JSON array, in which case nothing of it
// may be used.
func (c *spanConverter) convert(payload []byte, tid uint64) error {
	c.js.reset(payload)
	c.spans, c.dropped, c.text = c.spans[:0], 0, c.text[:0]
	js := &c.js
	js.expect('[')
	for first := true; js.elem(&first); {
		if js.peek() != '{' {
			js.skip()
			c.dropped++
			continue
		}
		var sp *span
		c.spans, sp = extend(c.spans)
		sp.reset()
		ok := c.span(sp)
		if js.err != nil {
			break
		}
		if !ok {
			c.spans = c.spans[:len(c.spans)-1]
			c.dropped++
			continue
		}
		if tid != 0 {
			sp.attrs = c.addKV(sp.attrs, attrThreadID, anyIntValue(int64(tid)))
		}
	}
	if js.err == nil && !js.end() {
		js.fail()
	}
	if js.err != nil {
		c.spans, c.text = c.spans[:0], c.text[:0]
		return js.err
	}
	return nil
}

// span fills sp from the object at the scanner and reports whether it is a convertible span.
func (c *spanConverter) span(sp *span) bool {
	js := &c.js
	js.expect('{')
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
			sp.traceID, haveTrace = c.id(16)
		case "spanId":
			sp.spanID, haveSpan = c.id(8)
		case "parentSpanId":
			if c.null() {
				continue
			}
			if s, isStr := c.strValue(); isStr && len(s) == 0 {
				continue
			} else if id, good := c.decodeID(s, 8); isStr && good {
				sp.parentID, hasParent = id, true
			} else {
				ok = false
			}
		case "name":
			if s, isStr := c.strValue(); isStr {
				sp.name = c.addText(s)
			}
		case "kind":
			if s, isStr := c.strValue(); isStr {
				sp.kind = int32(spanKind(s))
			}
		case "stackTrace":
			c.stackTrace()
		case "startTime":
			sp.start, haveStart = c.time()
		case "endTime":
			sp.end, haveEnd = c.time()
		case "status":
			c.status(sp)
		case "attributes":
			sp.attrs, sp.droppedAttrs = c.attributes(sp.attrs)
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
		sp.attrs = c.addKV(sp.attrs, attrStackTrace, c.anyString(c.stack))
	}
	if hasParent {
		sp.flags = uint32(tracev1.SpanFlags_SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK)
		if !sameProcess {
			sp.flags |= uint32(tracev1.SpanFlags_SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK)
		}
	}
	return ok && haveTrace && haveSpan && haveStart && haveEnd
}

// id reads a hex id string of up to 2*n digits, left-padded to n bytes.
func (c *spanConverter) id(n int) (textRef, bool) {
	s, isStr := c.strValue()
	if !isStr {
		return textRef{}, false
	}
	return c.decodeID(s, n)
}

// decodeID decodes like the function decodeID, into the arena.
func (c *spanConverter) decodeID(s []byte, n int) (textRef, bool) {
	var buf [16]byte
	id, ok := decodeIDInto(buf[:n], s)
	if !ok {
		return textRef{}, false
	}
	return c.addRaw(id), true
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
