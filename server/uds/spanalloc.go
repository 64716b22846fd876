package uds

import (
	"strings"
	"unicode/utf8"

	commonv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/common/v1"
)

// patch points a string field at text[off:end] once the export's text becomes one string.
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
