package kafkacompress

import (
	"bytes"
	"encoding/binary"

	"github.com/pierrec/lz4/v4"
)

// lz4Decoder pairs an lz4 frame reader with its bytes.Reader.
type lz4Decoder struct {
	src   bytes.Reader
	zr    *lz4.Reader
	probe [1]byte
}

func (d *Decompressor) getLZ4() *lz4Decoder {
	if l, _ := d.lz4.Get().(*lz4Decoder); l != nil {
		return l
	}
	l := &lz4Decoder{zr: lz4.NewReader(nil)}
	// Concurrency 1 keeps decoding on the caller's goroutine; a concurrent lz4 reader would
	// start goroutines per frame.
	_ = l.zr.Apply(lz4.ConcurrencyOption(1))
	return l
}

func (d *Decompressor) putLZ4(l *lz4Decoder) {
	l.src.Reset(nil)
	l.zr.Reset(nil)
	d.lz4.Put(l)
}

// unlz4 decodes one or more concatenated LZ4 frames (the standard frame format; Kafka's
// pre-0.10 frames with the broken header checksum never carry telemetry). The frames are
// walked first: see checkLZ4Frames.
func (d *Decompressor) unlz4(dst, src []byte) ([]byte, error) {
	if err := checkLZ4Frames(src, lz4MaxBlock(d.limit)); err != nil {
		return dst, err
	}
	l := d.getLZ4()
	defer d.putLZ4(l)
	l.src.Reset(src)
	l.zr.Reset(&l.src)
	return readCapped(dst, l.zr, d.limit, l.probe[:])
}

// The lz4 frame format (lz4_Frame_format.md): magic, FLG and BD bytes, an optional content size
// and dictionary id, a header checksum byte; then blocks, each a little-endian uint32 size (high
// bit: stored uncompressed) and, when FLG says so, a 4-byte checksum; a zero size ends the
// frame, which an optional 4-byte content checksum closes.
const (
	lz4Magic         = 0x184d2204
	lz4SkipMagic     = 0x184d2a50 // the low 4 bits are free
	lz4FlagVersion   = 0x40
	lz4FlagBlockSum  = 0x10
	lz4FlagSize      = 0x08
	lz4FlagSum       = 0x04
	lz4FlagDictID    = 0x01
	lz4Uncompressed  = 1 << 31
	lz4MinBlockIndex = 4 // BD block size index 4..7: 64 KiB, 256 KiB, 1 MiB, 4 MiB
	lz4MaxBlockIndex = 7
)

// lz4BlockSize returns the block size a BD index declares.
func lz4BlockSize(idx byte) int { return 1 << (8 + 2*int(idx)) }

// lz4MaxBlock returns the largest block size accepted under limit: the smallest size the
// format offers that holds limit bytes.
func lz4MaxBlock(limit int) int {
	for idx := byte(lz4MinBlockIndex); idx < lz4MaxBlockIndex; idx++ {
		if lz4BlockSize(idx) >= limit {
			return lz4BlockSize(idx)
		}
	}
	return lz4BlockSize(lz4MaxBlockIndex)
}

// checkLZ4Frames walks the frames of src without decoding them. The lz4 reader reserves a
// buffer of the size a frame declares for its blocks (up to 4 MiB; 8 MiB for the legacy
// format) before it decodes a byte, so a 20-byte frame could make it allocate far past the
// output cap. A frame declaring blocks larger than maxBlock is refused with ErrTooLarge; a
// legacy frame, a dictionary, or framing that breaks off, with ErrCorrupt. Kafka clients write
// 64 KiB blocks. Decoding then reserves at most maxBlock per frame.
func checkLZ4Frames(src []byte, maxBlock int) error {
	for len(src) > 0 {
		if len(src) < 4 {
			return ErrCorrupt
		}
		magic := binary.LittleEndian.Uint32(src)
		if magic&^0xf == lz4SkipMagic {
			if len(src) < 8 || uint64(binary.LittleEndian.Uint32(src[4:])) > uint64(len(src)-8) {
				return ErrCorrupt
			}
			src = src[8+binary.LittleEndian.Uint32(src[4:]):]
			continue
		}
		if magic != lz4Magic || len(src) < 7 {
			return ErrCorrupt
		}
		flg, bd := src[4], src[5]
		idx := bd >> 4 & 7
		if flg&0xc0 != lz4FlagVersion || flg&lz4FlagDictID != 0 || idx < lz4MinBlockIndex {
			return ErrCorrupt
		}
		block := lz4BlockSize(idx)
		if block > maxBlock {
			return ErrTooLarge
		}
		hdr := 7
		if flg&lz4FlagSize != 0 {
			hdr += 8
		}
		if len(src) < hdr {
			return ErrCorrupt
		}
		src = src[hdr:]
		for {
			if len(src) < 4 {
				return ErrCorrupt
			}
			n := binary.LittleEndian.Uint32(src)
			src = src[4:]
			if n == 0 {
				break
			}
			size := uint64(n &^ lz4Uncompressed)
			if size > uint64(block) {
				return ErrCorrupt
			}
			if flg&lz4FlagBlockSum != 0 {
				size += 4
			}
			if size > uint64(len(src)) {
				return ErrCorrupt
			}
			src = src[size:]
		}
		if flg&lz4FlagSum != 0 {
			if len(src) < 4 {
				return ErrCorrupt
			}
			src = src[4:]
		}
	}
	return nil
}
