package kafkacompress

import (
	"errors"

	"github.com/klauspost/compress/zstd"
)

// zstdMaxWindow is the largest window a frame may declare. RFC 8878 asks decoders to support
// 8 MiB; Java clients stream without a pledged size, which declares a window (2 MiB at level 3)
// larger than the payload, so the window limit cannot simply be the output limit.
const zstdMaxWindow = 8 << 20

func (d *Decompressor) getZstd() (*zstd.Decoder, error) {
	if z, _ := d.zstd.Get().(*zstd.Decoder); z != nil {
		return z, nil
	}
	// The output cap is enforced through the capacity of dst (WithDecodeAllCapLimit): the
	// decoder's own memory limit also clamps the window, so it must stay at the window size.
	return zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxWindow(zstdMaxWindow),
		zstd.WithDecoderMaxMemory(uint64(max(d.limit, zstdMaxWindow))),
		zstd.WithDecodeAllCapLimit(true),
	)
}

// unzstd decodes one or more concatenated zstd frames. A frame that announces a content size
// over the room left is rejected before decoding; one that does not is stopped after the block
// that crosses the cap (blocks hold at most 128 KiB).
func (d *Decompressor) unzstd(dst, src []byte) ([]byte, error) {
	z, err := d.getZstd()
	if err != nil {
		return dst, ErrCorrupt
	}
	defer d.zstd.Put(z)
	start := len(dst)

	// Size the output from the first frame's announced content size when there is one, so a
	// small payload does not reserve the whole limit. Only a second concatenated frame can
	// make the output longer than that; it costs one more pass with the full limit.
	room := d.limit
	var h zstd.Header
	if h.Decode(src) == nil && h.HasFCS {
		if h.FrameContentSize > uint64(d.limit) {
			return dst, ErrTooLarge
		}
		room = int(h.FrameContentSize)
	}
	for {
		dst = growTo(dst, room)
		out, err := z.DecodeAll(src, dst[:start:start+room])
		if err == nil {
			return out, nil
		}
		if !errors.Is(err, zstd.ErrDecoderSizeExceeded) {
			return dst[:start], ErrCorrupt
		}
		if room == d.limit {
			return dst[:start], ErrTooLarge
		}
		room = d.limit
	}
}

// growTo makes room for n more bytes after len(dst).
func growTo(dst []byte, n int) []byte {
	if cap(dst)-len(dst) >= n {
		return dst
	}
	g := make([]byte, len(dst), len(dst)+n)
	copy(g, dst)
	return g
}
