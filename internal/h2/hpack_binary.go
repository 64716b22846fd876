package h2

// gRPC binary metadata: a field whose name ends in "-bin" carries base64 (gRPC over HTTP/2,
// "Binary-Header"), and grpc-go's server refuses a call one of whose values does not decode,
// INTERNAL with :status 400. It decodes a value as padded base64 when its length is a
// multiple of 4 and as unpadded base64 otherwise, with encoding/base64's rules either way
// (standard alphabet, '\r' and '\n' skipped wherever they are, the bits after the last
// symbol not checked). With Config.Binary the decoder checks every such value as it passes,
// kept or not, without a copy but where a Huffman-coded value must be decoded to be read,
// and Decode's caller asks BadBinary for the last one that failed: the call is the caller's
// to refuse, after the checks grpc-go makes before it (the content-type), and in the words
// grpc-go uses (which quote the field).

// binSuffix ends the name of a field that carries binary metadata.
const binSuffix = "-bin"

// isBinaryName reports whether a field of this name carries binary metadata.
func isBinaryName[T string | []byte](name T) bool {
	n := len(name)
	return n >= len(binSuffix) && string(name[n-len(binSuffix):]) == binSuffix
}

// What an entry of the dynamic table is to Config.Binary: its name does not end in -bin, or
// it does and its value decodes, or does not. Worked out once, when the entry is inserted.
const (
	binNone uint8 = iota
	binValid
	binBad
)

// base64Symbol marks the bytes of the standard base64 alphabet.
var base64Symbol = func() (t [256]bool) {
	for _, c := range "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/" {
		t[c] = true
	}
	return t
}()

// ValidBinary reports whether v decodes as grpc-go decodes a binary metadata value:
// base64.StdEncoding when len(v) is a multiple of 4, base64.RawStdEncoding otherwise. It
// follows encoding/base64's decoding quantum by quantum (FuzzValidBinary holds it to it)
// without writing the decoded bytes anywhere. Safe for concurrent use.
func ValidBinary(v []byte) bool {
	padded := len(v)%4 == 0
	i := 0
	for {
		// One quantum: up to 4 symbols, newlines passed over.
		for j := 0; j < 4; {
			if i == len(v) {
				// The end: between quanta, or after 2 or 3 symbols of an unpadded value.
				return j == 0 || j >= 2 && !padded
			}
			c := v[i]
			i++
			switch {
			case base64Symbol[c]:
				j++
			case c == '\n' || c == '\r':
			case c != '=' || !padded || j < 2:
				return false
			default:
				// Padding after 2 symbols is "==", after 3 "="; then only newlines, to the end.
				if j == 2 {
					i = skipNewlines(v, i)
					if i == len(v) || v[i] != '=' {
						return false
					}
					i++
				}
				return skipNewlines(v, i) == len(v)
			}
		}
	}
}

func skipNewlines(v []byte, i int) int {
	for i < len(v) && (v[i] == '\n' || v[i] == '\r') {
		i++
	}
	return i
}

// BadBinary is a field whose name ends in -bin and whose value is not valid binary metadata
// (ValidBinary), found by Decode with Config.Binary.
type BadBinary struct {
	Name, Value []byte // valid until the next Decode; copy to retain
	// Kept is how many of the fields Decode returned came before it in the block: its place
	// among them, for a caller that refuses whichever malformed field comes last, as grpc-go
	// does.
	Kept int
}

// BadBinary returns the last field of the block the last Decode accepted whose name ends in
// -bin and whose value is not valid binary metadata; false when there was none (or the
// decoder does not check them, Config.Binary).
func (d *Decoder) BadBinary() (BadBinary, bool) {
	return d.bad, d.hasBad
}

// recordBad records a field whose binary value is malformed as the block's last. Its name and
// value are copied into d.out, after the kept values: the field was counted in the header list
// (within the bound, or the block is refused), so d.out, whose capacity is the bound, has room.
// before is how many kept fields came before it.
func recordBad[T string | []byte](d *Decoder, name T, value []byte, before int) {
	start := len(d.out)
	d.out = append(d.out, value...)
	d.out = append(d.out, name...)
	b := d.out[start:len(d.out):len(d.out)]
	d.bad = BadBinary{Name: b[len(value):], Value: b[:len(value)], Kept: before}
	d.hasBad = true
}
