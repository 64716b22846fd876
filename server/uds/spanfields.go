package uds

import (
	"strconv"

	tracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/trace/v1"
)

// The readers of the span fields. Each consumes exactly one JSON value; a value of an
// unexpected type is skipped, so one odd field never derails the parse of the export.

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

func (c *spanConverter) status(sp *span) {
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
	sp.status = spanStatus{set: true, code: int32(tracev1.Status_STATUS_CODE_OK), message: c.addText(msg)}
	if code != 0 {
		sp.status.code = int32(tracev1.Status_STATUS_CODE_ERROR)
		sp.attrs = c.addKV(sp.attrs, attrStatusCode, anyIntValue(code))
	}
}

// attributes appends the attributes of an object (or a PHP list) and returns the count of
// values that could not be kept.
func (c *spanConverter) attributes(dst []keyValue) ([]keyValue, uint32) {
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
			if v, ok := c.anyValue(); ok {
				var kv *keyValue
				dst, kv = extend(dst)
				kv.key, kv.value = c.addText(k), v
			} else {
				dropped++
			}
		}
	case '[':
		// json_encode writes an empty PHP array, or a list, as a JSON array: keys are indexes.
		js.i++
		for i, first := 0, true; js.elem(&first); i++ {
			if v, ok := c.anyValue(); ok {
				var kv *keyValue
				dst, kv = extend(dst)
				off := len(c.text)
				c.text = strconv.AppendInt(c.text, int64(i), 10)
				kv.key, kv.value = textRef{off, len(c.text)}, v
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

// anyValue converts one JSON value; false for null.
func (c *spanConverter) anyValue() (anyValue, bool) {
	js := &c.js
	switch js.peek() {
	case '"':
		return c.anyString(js.str()), true
	case 't', 'f':
		v := anyValue{kind: anyBool}
		if js.literal() == 't' {
			v.i = 1
		}
		return v, true
	case 'n':
		js.literal()
		return anyValue{}, false
	case '{', '[':
		return c.anyString(js.skip()), true
	}
	text, isInt := js.number()
	if isInt {
		if v, err := strconv.ParseInt(string(text), 10, 64); err == nil {
			return anyIntValue(v), true
		}
	}
	v, _ := strconv.ParseFloat(string(text), 64)
	return anyValue{kind: anyDouble, d: v}, true
}

func (c *spanConverter) timeEvents(sp *span) {
	js := &c.js
	if js.peek() != '[' {
		js.skip()
		return
	}
	js.i++
	for first := true; js.elem(&first); {
		if js.peek() != '{' {
			js.skip()
			sp.droppedEvents++
			continue
		}
		js.i++
		var ev *spanEvent
		sp.events, ev = extend(sp.events)
		ev.reset()
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
				ev.time, haveTime = c.time()
			case "description":
				if s, ok := c.strValue(); ok {
					ev.name = c.addText(s)
					annotation = true
				}
			case "attributes":
				ev.attrs, ev.dropped = c.attributes(ev.attrs)
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
			sp.events = sp.events[:len(sp.events)-1]
			sp.droppedEvents++
			continue
		}
		if !annotation {
			ev.name = c.addConst(messageEventName)
			ev.attrs = c.addKV(ev.attrs, attrMessageType, c.anyString(typ))
			if len(id) > 0 {
				ev.attrs = c.addKV(ev.attrs, attrMessageID, c.anyString(id))
			}
			if haveUncompressed {
				ev.attrs = c.addKV(ev.attrs, attrUncompressed, anyIntValue(uncompressed))
			}
			if haveCompressed {
				ev.attrs = c.addKV(ev.attrs, attrCompressed, anyIntValue(compressed))
			}
		}
	}
}

func (c *spanConverter) links(sp *span) {
	js := &c.js
	if js.peek() != '[' {
		js.skip()
		return
	}
	js.i++
	for first := true; js.elem(&first); {
		if js.peek() != '{' {
			js.skip()
			sp.droppedLinks++
			continue
		}
		js.i++
		var l *spanLink
		sp.links, l = extend(sp.links)
		l.reset()
		var haveTrace, haveSpan bool
		for kf := true; ; {
			k, more := js.key(&kf)
			if !more {
				break
			}
			switch string(k) {
			case "traceId":
				l.traceID, haveTrace = c.id(16)
			case "spanId":
				l.spanID, haveSpan = c.id(8)
			case "type":
				if s, ok := c.strValue(); ok && len(s) > 0 && string(s) != "TYPE_UNSPECIFIED" {
					l.attrs = c.addKV(l.attrs, attrLinkType, c.anyString(s))
				}
			case "attributes":
				var dropped uint32
				l.attrs, dropped = c.attributes(l.attrs)
				l.dropped += dropped
			default:
				js.skip()
			}
		}
		if !haveTrace || !haveSpan {
			sp.links = sp.links[:len(sp.links)-1]
			sp.droppedLinks++
			continue
		}
	}
}
