package h2

// HPACK's Huffman code (RFC 7541 §5.2, Appendix B). Decoding walks a tree of 256-way nodes, one
// input octet per step: a node's entry for the next eight bits is either a symbol whose code
// ends within them (with the number of those bits it used) or the node that reads the next
// eight. Codes are 5 to 30 bits long, so a symbol takes at most four steps. The tree is built
// once, when the package is initialised.

const (
	huffLeaf  = 1 << 15 // entry: a symbol, its code's bits used at this node in bits 8-11, the symbol in 0-7
	huffInner = 1 << 14 // entry: the index of the node that reads the next eight bits
	huffCtl   = 1 << 12 // leaf entry: the symbol is an octet no field value may hold (badValueOctet)
	huffNoTok = 1 << 13 // leaf entry: the symbol is an octet no regular field name may hold (nameOctet)
	huffEOS   = 256
)

var huffTree = buildHuffTree()

func buildHuffTree() [][256]uint16 {
	tree := make([][256]uint16, 1, 16)
	for sym := range huffEOS { // EOS is left out: its code in a string is an error (§5.2)
		code, bits := huffmanCode[sym]&0xffffffff, uint(huffmanCode[sym]>>32)
		node := 0
		for bits > 8 {
			idx := byte(code >> (bits - 8))
			e := tree[node][idx]
			if e == 0 {
				tree = append(tree, [256]uint16{})
				e = huffInner | uint16(len(tree)-1)
				tree[node][idx] = e
			}
			node = int(e &^ huffInner)
			bits -= 8
		}
		// The code ends within this node's eight bits: every entry that starts with its
		// remaining bits is the symbol.
		shift := 8 - bits
		first := int(code<<shift) & 0xff
		leaf := huffLeaf | uint16(bits)<<8 | uint16(sym)
		if badValueOctet[sym] {
			leaf |= huffCtl
		}
		if !nameOctet[sym] {
			leaf |= huffNoTok
		}
		for i := range 1 << shift {
			tree[node][first|i] = leaf
		}
	}
	return tree
}

// huffmanDecode decodes the Huffman-coded string src. It writes the decoded octets into dst as
// far as dst has room and returns the decoded length, which may be larger than len(dst): a
// caller learns a string's size and validity without keeping it (dst nil), or keeps it only
// within a bound. It refuses what §5.2 calls decoding errors: a code not in the table, the EOS
// symbol, padding longer than 7 bits or not the most significant bits of EOS (all ones).
func huffmanDecode(dst, src []byte) (int, error) {
	n, _, err := huffmanDecodeValue(dst, src)
	return n, err
}

// huffmanDecodeValue is huffmanDecode that also reports whether the string holds an octet no
// field value may hold (badValueOctet): one OR per symbol, so that a value that is only
// measured is checked too.
func huffmanDecodeValue(dst, src []byte) (int, bool, error) {
	n, seen, err := huffmanDecodeFlags(dst, src)
	return n, seen&huffCtl != 0, err
}

// huffmanDecodeFlags is huffmanDecode that also returns the leaf entries' flags (huffCtl,
// huffNoTok) of every symbol decoded, ORed.
func huffmanDecodeFlags(dst, src []byte) (int, uint16, error) {
	var (
		n     int
		seen  uint16 // the leaf entries' bits, ORed
		node  int
		cur   uint64 // input bits not yet used, in the low cbits
		cbits uint
		sbits uint // bits of the symbol being decoded read so far (across nodes)
	)
	for _, b := range src {
		cur = cur<<8 | uint64(b)
		cbits += 8
		sbits += 8
		for cbits >= 8 {
			e := huffTree[node][byte(cur>>(cbits-8))]
			switch {
			case e&huffLeaf != 0:
				if n < len(dst) {
					dst[n] = byte(e)
				}
				n++
				seen |= e
				cbits -= uint(e>>8) & 0xf
				node, sbits = 0, cbits
			case e != 0:
				node = int(e &^ huffInner)
				cbits -= 8
			default:
				return n, 0, ErrHuffman
			}
		}
	}
	// Fewer than eight bits remain: symbols with short codes may end in them; what is left
	// after them must be padding.
	for cbits > 0 {
		e := huffTree[node][byte(cur<<(8-cbits))]
		if e == 0 {
			return n, 0, ErrHuffman
		}
		if e&huffLeaf == 0 || uint(e>>8)&0xf > cbits {
			break
		}
		if n < len(dst) {
			dst[n] = byte(e)
		}
		n++
		seen |= e
		cbits -= uint(e>>8) & 0xf
		node, sbits = 0, cbits
	}
	if sbits > 7 {
		return n, 0, ErrHuffman // an unfinished symbol, or padding longer than 7 bits
	}
	if mask := uint64(1)<<cbits - 1; cur&mask != mask {
		return n, 0, ErrHuffman // padding that is not all ones
	}
	return n, seen, nil
}

// huffmanLen is the length of s Huffman-coded.
func huffmanLen(s string) int {
	bits := 0
	for i := 0; i < len(s); i++ {
		bits += int(huffmanCode[s[i]] >> 32)
	}
	return (bits + 7) / 8
}

// appendHuffman appends s Huffman-coded, padded with the most significant bits of EOS.
func appendHuffman(dst []byte, s string) []byte {
	var cur uint64
	var cbits uint
	for i := 0; i < len(s); i++ {
		c := huffmanCode[s[i]]
		cur = cur<<(c>>32) | c&0xffffffff
		cbits += uint(c >> 32)
		for cbits >= 8 {
			cbits -= 8
			dst = append(dst, byte(cur>>cbits))
		}
	}
	if cbits > 0 {
		dst = append(dst, byte(cur<<(8-cbits))|byte(0xff>>cbits))
	}
	return dst
}

// huffmanCode holds, for each symbol (the 256 octets and EOS, 256), its code in the low bits
// and the code's length in bits in the top byte, as RFC 7541 Appendix B lists them.
var huffmanCode = [257]uint64{
	13<<32 | 0x1ff8, 23<<32 | 0x7fffd8, 28<<32 | 0xfffffe2, 28<<32 | 0xfffffe3,
	28<<32 | 0xfffffe4, 28<<32 | 0xfffffe5, 28<<32 | 0xfffffe6, 28<<32 | 0xfffffe7,
	28<<32 | 0xfffffe8, 24<<32 | 0xffffea, 30<<32 | 0x3ffffffc, 28<<32 | 0xfffffe9,
	28<<32 | 0xfffffea, 30<<32 | 0x3ffffffd, 28<<32 | 0xfffffeb, 28<<32 | 0xfffffec,
	28<<32 | 0xfffffed, 28<<32 | 0xfffffee, 28<<32 | 0xfffffef, 28<<32 | 0xffffff0,
	28<<32 | 0xffffff1, 28<<32 | 0xffffff2, 30<<32 | 0x3ffffffe, 28<<32 | 0xffffff3,
	28<<32 | 0xffffff4, 28<<32 | 0xffffff5, 28<<32 | 0xffffff6, 28<<32 | 0xffffff7,
	28<<32 | 0xffffff8, 28<<32 | 0xffffff9, 28<<32 | 0xffffffa, 28<<32 | 0xffffffb,
	6<<32 | 0x14, 10<<32 | 0x3f8, 10<<32 | 0x3f9, 12<<32 | 0xffa,
	13<<32 | 0x1ff9, 6<<32 | 0x15, 8<<32 | 0xf8, 11<<32 | 0x7fa,
	10<<32 | 0x3fa, 10<<32 | 0x3fb, 8<<32 | 0xf9, 11<<32 | 0x7fb,
	8<<32 | 0xfa, 6<<32 | 0x16, 6<<32 | 0x17, 6<<32 | 0x18,
	5 << 32, 5<<32 | 0x1, 5<<32 | 0x2, 6<<32 | 0x19, // '0' has the all-zero code
	6<<32 | 0x1a, 6<<32 | 0x1b, 6<<32 | 0x1c, 6<<32 | 0x1d,
	6<<32 | 0x1e, 6<<32 | 0x1f, 7<<32 | 0x5c, 8<<32 | 0xfb,
	15<<32 | 0x7ffc, 6<<32 | 0x20, 12<<32 | 0xffb, 10<<32 | 0x3fc,
	13<<32 | 0x1ffa, 6<<32 | 0x21, 7<<32 | 0x5d, 7<<32 | 0x5e,
	7<<32 | 0x5f, 7<<32 | 0x60, 7<<32 | 0x61, 7<<32 | 0x62,
	7<<32 | 0x63, 7<<32 | 0x64, 7<<32 | 0x65, 7<<32 | 0x66,
	7<<32 | 0x67, 7<<32 | 0x68, 7<<32 | 0x69, 7<<32 | 0x6a,
	7<<32 | 0x6b, 7<<32 | 0x6c, 7<<32 | 0x6d, 7<<32 | 0x6e,
	7<<32 | 0x6f, 7<<32 | 0x70, 7<<32 | 0x71, 7<<32 | 0x72,
	8<<32 | 0xfc, 7<<32 | 0x73, 8<<32 | 0xfd, 13<<32 | 0x1ffb,
	19<<32 | 0x7fff0, 13<<32 | 0x1ffc, 14<<32 | 0x3ffc, 6<<32 | 0x22,
	15<<32 | 0x7ffd, 5<<32 | 0x3, 6<<32 | 0x23, 5<<32 | 0x4,
	6<<32 | 0x24, 5<<32 | 0x5, 6<<32 | 0x25, 6<<32 | 0x26,
	6<<32 | 0x27, 5<<32 | 0x6, 7<<32 | 0x74, 7<<32 | 0x75,
	6<<32 | 0x28, 6<<32 | 0x29, 6<<32 | 0x2a, 5<<32 | 0x7,
	6<<32 | 0x2b, 7<<32 | 0x76, 6<<32 | 0x2c, 5<<32 | 0x8,
	5<<32 | 0x9, 6<<32 | 0x2d, 7<<32 | 0x77, 7<<32 | 0x78,
	7<<32 | 0x79, 7<<32 | 0x7a, 7<<32 | 0x7b, 15<<32 | 0x7ffe,
	11<<32 | 0x7fc, 14<<32 | 0x3ffd, 13<<32 | 0x1ffd, 28<<32 | 0xffffffc,
	20<<32 | 0xfffe6, 22<<32 | 0x3fffd2, 20<<32 | 0xfffe7, 20<<32 | 0xfffe8,
	22<<32 | 0x3fffd3, 22<<32 | 0x3fffd4, 22<<32 | 0x3fffd5, 23<<32 | 0x7fffd9,
	22<<32 | 0x3fffd6, 23<<32 | 0x7fffda, 23<<32 | 0x7fffdb, 23<<32 | 0x7fffdc,
	23<<32 | 0x7fffdd, 23<<32 | 0x7fffde, 24<<32 | 0xffffeb, 23<<32 | 0x7fffdf,
	24<<32 | 0xffffec, 24<<32 | 0xffffed, 22<<32 | 0x3fffd7, 23<<32 | 0x7fffe0,
	24<<32 | 0xffffee, 23<<32 | 0x7fffe1, 23<<32 | 0x7fffe2, 23<<32 | 0x7fffe3,
	23<<32 | 0x7fffe4, 21<<32 | 0x1fffdc, 22<<32 | 0x3fffd8, 23<<32 | 0x7fffe5,
	22<<32 | 0x3fffd9, 23<<32 | 0x7fffe6, 23<<32 | 0x7fffe7, 24<<32 | 0xffffef,
	22<<32 | 0x3fffda, 21<<32 | 0x1fffdd, 20<<32 | 0xfffe9, 22<<32 | 0x3fffdb,
	22<<32 | 0x3fffdc, 23<<32 | 0x7fffe8, 23<<32 | 0x7fffe9, 21<<32 | 0x1fffde,
	23<<32 | 0x7fffea, 22<<32 | 0x3fffdd, 22<<32 | 0x3fffde, 24<<32 | 0xfffff0,
	21<<32 | 0x1fffdf, 22<<32 | 0x3fffdf, 23<<32 | 0x7fffeb, 23<<32 | 0x7fffec,
	21<<32 | 0x1fffe0, 21<<32 | 0x1fffe1, 22<<32 | 0x3fffe0, 21<<32 | 0x1fffe2,
	23<<32 | 0x7fffed, 22<<32 | 0x3fffe1, 23<<32 | 0x7fffee, 23<<32 | 0x7fffef,
	20<<32 | 0xfffea, 22<<32 | 0x3fffe2, 22<<32 | 0x3fffe3, 22<<32 | 0x3fffe4,
	23<<32 | 0x7ffff0, 22<<32 | 0x3fffe5, 22<<32 | 0x3fffe6, 23<<32 | 0x7ffff1,
	26<<32 | 0x3ffffe0, 26<<32 | 0x3ffffe1, 20<<32 | 0xfffeb, 19<<32 | 0x7fff1,
	22<<32 | 0x3fffe7, 23<<32 | 0x7ffff2, 22<<32 | 0x3fffe8, 25<<32 | 0x1ffffec,
	26<<32 | 0x3ffffe2, 26<<32 | 0x3ffffe3, 26<<32 | 0x3ffffe4, 27<<32 | 0x7ffffde,
	27<<32 | 0x7ffffdf, 26<<32 | 0x3ffffe5, 24<<32 | 0xfffff1, 25<<32 | 0x1ffffed,
	19<<32 | 0x7fff2, 21<<32 | 0x1fffe3, 26<<32 | 0x3ffffe6, 27<<32 | 0x7ffffe0,
	27<<32 | 0x7ffffe1, 26<<32 | 0x3ffffe7, 27<<32 | 0x7ffffe2, 24<<32 | 0xfffff2,
	21<<32 | 0x1fffe4, 21<<32 | 0x1fffe5, 26<<32 | 0x3ffffe8, 26<<32 | 0x3ffffe9,
	28<<32 | 0xffffffd, 27<<32 | 0x7ffffe3, 27<<32 | 0x7ffffe4, 27<<32 | 0x7ffffe5,
	20<<32 | 0xfffec, 24<<32 | 0xfffff3, 20<<32 | 0xfffed, 21<<32 | 0x1fffe6,
	22<<32 | 0x3fffe9, 21<<32 | 0x1fffe7, 21<<32 | 0x1fffe8, 23<<32 | 0x7ffff3,
	22<<32 | 0x3fffea, 22<<32 | 0x3fffeb, 25<<32 | 0x1ffffee, 25<<32 | 0x1ffffef,
	24<<32 | 0xfffff4, 24<<32 | 0xfffff5, 26<<32 | 0x3ffffea, 23<<32 | 0x7ffff4,
	26<<32 | 0x3ffffeb, 27<<32 | 0x7ffffe6, 26<<32 | 0x3ffffec, 26<<32 | 0x3ffffed,
	27<<32 | 0x7ffffe7, 27<<32 | 0x7ffffe8, 27<<32 | 0x7ffffe9, 27<<32 | 0x7ffffea,
	27<<32 | 0x7ffffeb, 28<<32 | 0xffffffe, 27<<32 | 0x7ffffec, 27<<32 | 0x7ffffed,
	27<<32 | 0x7ffffee, 27<<32 | 0x7ffffef, 27<<32 | 0x7fffff0, 26<<32 | 0x3ffffee,
	30<<32 | 0x3fffffff,
}
