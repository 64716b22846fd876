package uds

import (
	"strings"
	"unicode/utf8"
)

// The converter's own form of the spans of one export. Every string and id is a range of the
// converter's text arena, and every slice keeps its capacity from one export to the next, so
// that a steady stream of exports converts and encodes (spanwire.go) without allocating. The
// values are valid until the converter's next convert.

// textRef is text[off:end] of the converter that made it; the zero value is empty.
type textRef struct{ off, end int }

func (r textRef) len() int { return r.end - r.off }

type anyKind uint8

const (
	anyString anyKind = iota
	anyBool
	anyInt
	anyDouble
)

// anyValue is an AnyValue of one of four kinds; i holds an int, or a bool as 0 or 1.
type anyValue struct {
	kind anyKind
	s    textRef
	i    int64
	d    float64
}

type keyValue struct {
	key   textRef
	value anyValue
}

type spanEvent struct {
	time    uint64
	name    textRef
	attrs   []keyValue
	dropped uint32
}

type spanLink struct {
	traceID, spanID textRef
	attrs           []keyValue
	dropped         uint32
}

type spanStatus struct {
	set     bool
	code    int32
	message textRef
}

type span struct {
	traceID, spanID, parentID textRef
	name                      textRef
	kind                      int32
	start, end                uint64
	attrs                     []keyValue
	droppedAttrs              uint32
	events                    []spanEvent
	droppedEvents             uint32
	links                     []spanLink
	droppedLinks              uint32
	status                    spanStatus
	flags                     uint32
}

// extend lengthens s by one element and returns it. The element may be one an earlier export
// used: the caller resets it, keeping the capacity of its slices.
func extend[T any](s []T) ([]T, *T) {
	if len(s) < cap(s) {
		s = s[:len(s)+1]
	} else {
		var zero T
		s = append(s, zero)
	}
	return s, &s[len(s)-1]
}

func (sp *span) reset() {
	*sp = span{attrs: sp.attrs[:0], events: sp.events[:0], links: sp.links[:0]}
}

func (ev *spanEvent) reset() { *ev = spanEvent{attrs: ev.attrs[:0]} }

func (l *spanLink) reset() { *l = spanLink{attrs: l.attrs[:0]} }

// addText copies b, made valid UTF-8, into the arena.
func (c *spanConverter) addText(b []byte) textRef {
	off := len(c.text)
	if utf8.Valid(b) {
		c.text = append(c.text, b...)
	} else {
		// Only broken input takes this path, and pays an allocation for it.
		c.text = append(c.text, strings.ToValidUTF8(string(b), "\uFFFD")...)
	}
	return textRef{off, len(c.text)}
}

// addConst copies a constant into the arena.
func (c *spanConverter) addConst(s string) textRef {
	off := len(c.text)
	c.text = append(c.text, s...)
	return textRef{off, len(c.text)}
}

// addRaw copies bytes that are not text (ids) into the arena.
func (c *spanConverter) addRaw(b []byte) textRef {
	off := len(c.text)
	c.text = append(c.text, b...)
	return textRef{off, len(c.text)}
}

// bytesOf returns the bytes r refers to; valid until the next convert.
func (c *spanConverter) bytesOf(r textRef) []byte { return c.text[r.off:r.end] }

// addKV appends a key/value with a constant key to dst.
func (c *spanConverter) addKV(dst []keyValue, key string, v anyValue) []keyValue {
	dst, kv := extend(dst)
	kv.key, kv.value = c.addConst(key), v
	return dst
}

func (c *spanConverter) anyString(b []byte) anyValue {
	return anyValue{kind: anyString, s: c.addText(b)}
}

func anyIntValue(v int64) anyValue { return anyValue{kind: anyInt, i: v} }
