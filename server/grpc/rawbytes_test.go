package grpcserver

import "github.com/otlpgate/otlpgate/codec"

// rawBytes sends a byte slice as a message through codec.Raw.
type rawBytes []byte

func (b rawBytes) raw() *codec.Raw {
	var r codec.Raw
	r.SetBytes(b)
	return &r
}
