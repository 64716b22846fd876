package uds

import (
	"encoding/binary"
	"math"

	"google.golang.org/protobuf/encoding/protowire"

	commonv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/common/v1"
	resourcev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/resource/v1"
)

// The encoder of a converted export: an ExportTraceServiceRequest with one resource, one scope
// and the converter's spans, byte for byte what vtprotobuf's marshaller writes for the same
// messages (fields in number order, proto3 zero values left out, a oneof member always
// written). Like that marshaller it sizes the request first and then writes it back to front,
// so that every length prefix is known when it is written. TestSpanWireMatchesMarshal holds
// the two to the same bytes.

// Field numbers of the trace messages, from opentelemetry/proto/trace/v1/trace.proto.
const (
	fSpanTraceID, fSpanSpanID, fSpanParentID, fSpanName, fSpanKind = 1, 2, 4, 5, 6
	fSpanStart, fSpanEnd, fSpanAttrs, fSpanDroppedAttrs            = 7, 8, 9, 10
	fSpanEvents, fSpanDroppedEvents, fSpanLinks, fSpanDroppedLinks = 11, 12, 13, 14
	fSpanStatus, fSpanFlags                                        = 15, 16
	fEventTime, fEventName, fEventAttrs, fEventDropped             = 1, 2, 3, 4
	fLinkTraceID, fLinkSpanID, fLinkAttrs, fLinkDropped            = 1, 2, 4, 5
	fStatusMessage, fStatusCode                                    = 2, 3
	fKVKey, fKVValue                                               = 1, 2
	fAnyString, fAnyBool, fAnyInt, fAnyDouble                      = 1, 2, 3, 4
)

// sizeLen is the size of a length-delimited field of n bytes.
func sizeLen(num protowire.Number, n int) int {
	return protowire.SizeTag(num) + protowire.SizeVarint(uint64(n)) + n
}

// sizeVarint is the size of a varint field, 0 for a zero value (left out).
func sizeVarint(num protowire.Number, v uint64) int {
	if v == 0 {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeVarint(v)
}

func sizeText(num protowire.Number, r textRef) int {
	if r.len() == 0 {
		return 0
	}
	return sizeLen(num, r.len())
}

func sizeFixed64(num protowire.Number, v uint64) int {
	if v == 0 {
		return 0
	}
	return protowire.SizeTag(num) + 8
}

func (v *anyValue) size() int {
	switch v.kind {
	case anyString:
		return sizeLen(fAnyString, v.s.len())
	case anyBool:
		return 2
	case anyInt:
		return 1 + protowire.SizeVarint(uint64(v.i))
	}
	return 1 + 8
}

func (kv *keyValue) size() int { return sizeText(fKVKey, kv.key) + sizeLen(fKVValue, kv.value.size()) }

func sizeAttrs(num protowire.Number, attrs []keyValue) int {
	n := 0
	for i := range attrs {
		n += sizeLen(num, attrs[i].size())
	}
	return n
}

func (ev *spanEvent) size() int {
	return sizeFixed64(fEventTime, ev.time) + sizeText(fEventName, ev.name) +
		sizeAttrs(fEventAttrs, ev.attrs) + sizeVarint(fEventDropped, uint64(ev.dropped))
}

func (l *spanLink) size() int {
	return sizeText(fLinkTraceID, l.traceID) + sizeText(fLinkSpanID, l.spanID) +
		sizeAttrs(fLinkAttrs, l.attrs) + sizeVarint(fLinkDropped, uint64(l.dropped))
}

func (s *spanStatus) size() int {
	return sizeText(fStatusMessage, s.message) + sizeVarint(fStatusCode, uint64(s.code))
}

func (sp *span) size() int {
	n := sizeText(fSpanTraceID, sp.traceID) + sizeText(fSpanSpanID, sp.spanID) +
		sizeText(fSpanParentID, sp.parentID) + sizeText(fSpanName, sp.name) +
		sizeVarint(fSpanKind, uint64(sp.kind)) +
		sizeFixed64(fSpanStart, sp.start) + sizeFixed64(fSpanEnd, sp.end) +
		sizeAttrs(fSpanAttrs, sp.attrs) + sizeVarint(fSpanDroppedAttrs, uint64(sp.droppedAttrs)) +
		sizeVarint(fSpanDroppedEvents, uint64(sp.droppedEvents)) +
		sizeVarint(fSpanDroppedLinks, uint64(sp.droppedLinks))
	for i := range sp.events {
		n += sizeLen(fSpanEvents, sp.events[i].size())
	}
	for i := range sp.links {
		n += sizeLen(fSpanLinks, sp.links[i].size())
	}
	if sp.status.set {
		n += sizeLen(fSpanStatus, sp.status.size())
	}
	if sp.flags != 0 {
		n += protowire.SizeTag(fSpanFlags) + 4
	}
	return n
}

// scopeSpansSize is the size of the ScopeSpans holding scope and the spans.
func (c *spanConverter) scopeSpansSize(scope *commonv1.InstrumentationScope) int {
	n := sizeLen(1, scope.SizeVT())
	for i := range c.spans {
		n += sizeLen(2, c.spans[i].size())
	}
	return n
}

// requestSize is the size of the request appendRequest writes.
func (c *spanConverter) requestSize(res *resourcev1.Resource, scope *commonv1.InstrumentationScope) int {
	return sizeLen(1, sizeLen(1, res.SizeVT())+sizeLen(2, c.scopeSpansSize(scope)))
}

// writeRequest writes into dst, of exactly requestSize bytes, the ExportTraceServiceRequest
// of one ResourceSpans (res, then one ScopeSpans of scope and the spans).
func (c *spanConverter) writeRequest(dst []byte, res *resourcev1.Resource, scope *commonv1.InstrumentationScope) {
	w := backWriter{b: dst, i: len(dst)}
	rsEnd := w.i
	ssEnd := w.i
	for i := len(c.spans) - 1; i >= 0; i-- {
		end := w.i
		c.writeSpan(&w, &c.spans[i])
		w.closeLen(2, end)
	}
	w.message(1, scope)
	w.closeLen(2, ssEnd)
	w.message(1, res)
	w.closeLen(1, rsEnd)
	if w.i != 0 {
		panic("BUG: span request written in other than its computed size")
	}
}

func (c *spanConverter) writeSpan(w *backWriter, sp *span) {
	if sp.flags != 0 {
		w.i -= 4
		binary.LittleEndian.PutUint32(w.b[w.i:], sp.flags)
		w.tag(fSpanFlags, protowire.Fixed32Type)
	}
	if sp.status.set {
		end := w.i
		w.varintField(fStatusCode, uint64(sp.status.code))
		c.writeText(w, fStatusMessage, sp.status.message)
		w.closeLen(fSpanStatus, end)
	}
	w.varintField(fSpanDroppedLinks, uint64(sp.droppedLinks))
	for i := len(sp.links) - 1; i >= 0; i-- {
		l := &sp.links[i]
		end := w.i
		w.varintField(fLinkDropped, uint64(l.dropped))
		c.writeAttrs(w, fLinkAttrs, l.attrs)
		c.writeText(w, fLinkSpanID, l.spanID)
		c.writeText(w, fLinkTraceID, l.traceID)
		w.closeLen(fSpanLinks, end)
	}
	w.varintField(fSpanDroppedEvents, uint64(sp.droppedEvents))
	for i := len(sp.events) - 1; i >= 0; i-- {
		ev := &sp.events[i]
		end := w.i
		w.varintField(fEventDropped, uint64(ev.dropped))
		c.writeAttrs(w, fEventAttrs, ev.attrs)
		c.writeText(w, fEventName, ev.name)
		w.fixed64Field(fEventTime, ev.time)
		w.closeLen(fSpanEvents, end)
	}
	w.varintField(fSpanDroppedAttrs, uint64(sp.droppedAttrs))
	c.writeAttrs(w, fSpanAttrs, sp.attrs)
	w.fixed64Field(fSpanEnd, sp.end)
	w.fixed64Field(fSpanStart, sp.start)
	w.varintField(fSpanKind, uint64(sp.kind))
	c.writeText(w, fSpanName, sp.name)
	c.writeText(w, fSpanParentID, sp.parentID)
	c.writeText(w, fSpanSpanID, sp.spanID)
	c.writeText(w, fSpanTraceID, sp.traceID)
}

func (c *spanConverter) writeAttrs(w *backWriter, num protowire.Number, attrs []keyValue) {
	for i := len(attrs) - 1; i >= 0; i-- {
		kv := &attrs[i]
		end := w.i
		valEnd := w.i
		switch v := &kv.value; v.kind {
		case anyString:
			w.bytes(c.bytesOf(v.s))
			w.closeLen(fAnyString, w.i+v.s.len())
		case anyBool:
			w.varint(uint64(v.i))
			w.tag(fAnyBool, protowire.VarintType)
		case anyInt:
			w.varint(uint64(v.i))
			w.tag(fAnyInt, protowire.VarintType)
		case anyDouble:
			w.i -= 8
			binary.LittleEndian.PutUint64(w.b[w.i:], math.Float64bits(v.d))
			w.tag(fAnyDouble, protowire.Fixed64Type)
		}
		w.closeLen(fKVValue, valEnd)
		c.writeText(w, fKVKey, kv.key)
		w.closeLen(num, end)
	}
}

// writeText writes a string or bytes field, left out when empty.
func (c *spanConverter) writeText(w *backWriter, num protowire.Number, r textRef) {
	if r.len() == 0 {
		return
	}
	w.bytes(c.bytesOf(r))
	w.closeLen(num, w.i+r.len())
}

// backWriter writes a message from its end towards its start: b[i:] is written.
type backWriter struct {
	b []byte
	i int
}

func (w *backWriter) bytes(p []byte) {
	w.i -= len(p)
	copy(w.b[w.i:], p)
}

func (w *backWriter) varint(v uint64) {
	w.i -= protowire.SizeVarint(v)
	protowire.AppendVarint(w.b[w.i:w.i], v)
}

func (w *backWriter) tag(num protowire.Number, typ protowire.Type) {
	w.varint(protowire.EncodeTag(num, typ))
}

// closeLen prefixes what was written since end was w.i with its length and the tag of num.
func (w *backWriter) closeLen(num protowire.Number, end int) {
	w.varint(uint64(end - w.i))
	w.tag(num, protowire.BytesType)
}

// varintField writes a varint field, left out when zero.
func (w *backWriter) varintField(num protowire.Number, v uint64) {
	if v != 0 {
		w.varint(v)
		w.tag(num, protowire.VarintType)
	}
}

// fixed64Field writes a fixed64 field, left out when zero.
func (w *backWriter) fixed64Field(num protowire.Number, v uint64) {
	if v != 0 {
		w.i -= 8
		binary.LittleEndian.PutUint64(w.b[w.i:], v)
		w.tag(num, protowire.Fixed64Type)
	}
}

// sizedMarshaler is a vtprotobuf message.
type sizedMarshaler interface {
	SizeVT() int
	MarshalToSizedBufferVT([]byte) (int, error)
}

// message writes m, encoded by vtprotobuf, as field num.
func (w *backWriter) message(num protowire.Number, m sizedMarshaler) {
	end := w.i
	n, err := m.MarshalToSizedBufferVT(w.b[:w.i])
	if err != nil {
		panic("BUG: marshal of a shared message: " + err.Error())
	}
	w.i -= n
	w.closeLen(num, end)
}
