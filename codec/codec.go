package codec

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"
)

// Name is the codec's name, and so the content-subtype it speaks: the same as grpc-go's default
// codec, which it replaces wherever it is installed.
const Name = "proto"

// vtMarshaler is what protoc-gen-go-vtproto generates for marshalling.
type vtMarshaler interface {
	SizeVT() int
	MarshalToSizedBufferVT(dAtA []byte) (int, error)
}

// vtUnmarshaler is what protoc-gen-go-vtproto generates for unmarshalling. UnmarshalVT copies
// every bytes and string field out of its input (the generator's unsafe feature is off, see the
// Makefile), which is what lets Unmarshal decode straight from gRPC's receive buffer.
type vtUnmarshaler interface {
	UnmarshalVT(dAtA []byte) error
}

// vtResetter is generated for messages that have a vtprotobuf pool; it keeps the capacity of
// repeated fields for reuse, where Reset would drop it.
type vtResetter interface {
	ResetVT()
}

type resetter interface {
	Reset()
}

var (
	errSizeChanged = errors.New("codec: message changed size while being marshalled")
	errNotMessage  = errors.New("codec: value is neither *codec.Raw nor a protobuf message")
)

var unmarshalErrors = promauto.NewCounterVec(prometheus.CounterOpts{
	Name: "otlpgate_codec_unmarshal_errors_total",
	Help: "Received gRPC messages that failed to decode, by decoder (vtproto for otlpgate's own types, proto for others).",
}, []string{"decoder"})

var (
	unmarshalErrorsVT    = unmarshalErrors.WithLabelValues("vtproto")
	unmarshalErrorsProto = unmarshalErrors.WithLabelValues("proto")
)

// grpcCodec is the encoding.CodecV2 New returns.
type grpcCodec struct {
	pool mem.BufferPool
}

// New returns the codec (see the package doc), drawing marshal and scratch buffers from p, or
// from mem.DefaultBufferPool() when p is nil. MemPool{} serves them from pool/'s tiers without
// zeroing them first. The codec is safe for concurrent use.
func New(p mem.BufferPool) encoding.CodecV2 {
	if p == nil {
		p = mem.DefaultBufferPool()
	}
	return &grpcCodec{pool: p}
}

// Name returns "proto".
func (c *grpcCodec) Name() string { return Name }

// Marshal encodes v into buffers that gRPC frees when it has sent them. Safe for concurrent use.
func (c *grpcCodec) Marshal(v any) (mem.BufferSlice, error) {
	switch m := v.(type) {
	case *Raw:
		return c.marshalRaw(m), nil
	case vtMarshaler:
		return c.marshalVT(m)
	}
	return c.marshalProto(v)
}

func (c *grpcCodec) marshalVT(m vtMarshaler) (mem.BufferSlice, error) {
	size := m.SizeVT()
	if size == 0 {
		return nil, nil // gRPC sends a nil slice as an empty message
	}
	buf := c.pool.Get(max(size, MinTracked))
	// MarshalToSizedBufferVT fills its argument from the end, so it must be exactly size long.
	n, err := m.MarshalToSizedBufferVT((*buf)[:size])
	if err == nil && n != size {
		err = errSizeChanged
	}
	if err != nil {
		c.pool.Put(buf)
		return nil, err
	}
	*buf = (*buf)[:size]
	return sendPooled(buf, c.pool), nil
}

// marshalProto serves messages without vtprotobuf methods (health checks, reflection). It is
// not a hot path; it still marshals into a pooled buffer.
func (c *grpcCodec) marshalProto(v any) (mem.BufferSlice, error) {
	m := messageV2(v)
	if m == nil {
		return nil, fmt.Errorf("%w: %T", errNotMessage, v)
	}
	// Size first, then UseCachedSize: the marshaller reuses the sizes just computed.
	size := proto.Size(m)
	if size == 0 {
		return nil, nil
	}
	buf := c.pool.Get(max(size, MinTracked))
	out, err := proto.MarshalOptions{UseCachedSize: true}.MarshalAppend((*buf)[:0], m)
	if err == nil && len(out) != size {
		err = errSizeChanged
	}
	if err != nil {
		c.pool.Put(buf)
		return nil, fmt.Errorf("codec: cannot marshal %T: %w", v, err)
	}
	*buf = out
	return sendPooled(buf, c.pool), nil
}

// Unmarshal decodes data into v. data is gRPC's and is freed when Unmarshal returns; a *Raw
// takes its own reference or copy (see Raw). Safe for concurrent use.
func (c *grpcCodec) Unmarshal(data mem.BufferSlice, v any) error {
	switch m := v.(type) {
	case *Raw:
		m.receive(data)
		return nil
	case vtUnmarshaler:
		if err := c.unmarshalVT(data, m); err != nil {
			unmarshalErrorsVT.Inc()
			return err
		}
		return nil
	}
	m := messageV2(v)
	if m == nil {
		return fmt.Errorf("%w: %T", errNotMessage, v)
	}
	if err := c.unmarshalProto(data, m); err != nil {
		unmarshalErrorsProto.Inc()
		return fmt.Errorf("codec: cannot unmarshal %T: %w", v, err)
	}
	return nil
}

// unmarshalVT replaces m's content, as proto.Unmarshal does (UnmarshalVT alone would merge).
// A message from a vtprotobuf pool keeps the capacity of its repeated fields.
func (c *grpcCodec) unmarshalVT(data mem.BufferSlice, m vtUnmarshaler) error {
	switch r := m.(type) {
	case vtResetter:
		r.ResetVT()
	case resetter:
		r.Reset()
	}
	switch len(data) {
	case 0:
		return nil
	case 1:
		err := m.UnmarshalVT(data[0].ReadOnlyData())
		releaseWire(data)
		return err
	}
	// Several buffers (a message spread over HTTP/2 frames): decode from one pooled copy, which
	// UnmarshalVT does not retain.
	n := data.Len()
	buf := c.pool.Get(n)
	data.CopyTo(*buf)
	err := m.UnmarshalVT((*buf)[:n])
	c.pool.Put(buf)
	return err
}

func (c *grpcCodec) unmarshalProto(data mem.BufferSlice, m proto.Message) error {
	switch len(data) {
	case 0:
		proto.Reset(m)
		return nil
	case 1:
		err := proto.Unmarshal(data[0].ReadOnlyData(), m)
		releaseWire(data)
		return err
	}
	n := data.Len()
	buf := c.pool.Get(n)
	data.CopyTo(*buf)
	err := proto.Unmarshal((*buf)[:n], m)
	c.pool.Put(buf)
	return err
}

func messageV2(v any) proto.Message {
	switch m := v.(type) {
	case protoadapt.MessageV2:
		return m
	case protoadapt.MessageV1:
		return protoadapt.MessageV2Of(m)
	}
	return nil
}
