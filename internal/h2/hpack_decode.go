package h2

import (
	"errors"
	"fmt"
)

// Config bounds an HPACK Decoder and names the fields it keeps.
type Config struct {
	// HeaderTableSize is the SETTINGS_HEADER_TABLE_SIZE this endpoint advertises: the largest
	// dynamic table the peer's encoder may use, and the size the table starts at.
	HeaderTableSize uint32
	// MaxHeaderListSize is the SETTINGS_MAX_HEADER_LIST_SIZE this endpoint advertises: a block
	// whose fields, as decoded, count more (each its name, its value and 32, RFC 9113 §6.5.2)
	// is refused with ErrHeaderListTooLarge.
	MaxHeaderListSize uint32
	// Keep names the fields Decode returns, lower case as HTTP/2 writes them. Every other field
	// is checked and measured but not kept.
	Keep []string
	// MaxKeptFields is how many fields of the kept names one block may carry; more are refused
	// with ErrTooManyFields.
	MaxKeptFields int
	// Request checks every field of a block as a request's must be (RFC 9113 §8.2.1, §8.3),
	// as far as grpc-go's server holds a client to it (hpack_fieldcheck.go): names of token
	// characters in lower case, values without control characters, pseudo-fields only those
	// a request has (:method, :scheme, :authority, :path, :protocol) and before every other
	// field; a block that breaks a rule is refused with ErrMalformedFields, for its stream
	// (InvalidEnd tells a caller when the connection must end instead). Fields the decoder
	// does not keep are checked as they pass, never copied but to decode a Huffman-coded name.
	Request bool
	// Binary checks the value of every field whose name ends in -bin as gRPC binary metadata
	// (base64, as grpc-go decodes it: ValidBinary), kept or not; Decode still accepts the
	// block, and BadBinary returns the last field that failed. It needs Request, which has
	// every name decoded whole.
	Binary bool
}

// GRPCServerKeep are the fields a gRPC server reads from a call's headers.
var GRPCServerKeep = []string{":method", ":path", "content-type", "te", "grpc-encoding", "grpc-accept-encoding", "grpc-timeout"}

// Bounds of Config.Validate: a decoder holds about 3*HeaderTableSize + MaxHeaderListSize bytes.
const (
	maxHeaderTableSize   = 1 << 20
	maxHeaderListSize    = 1 << 20
	maxKeep              = 64
	maxKeptFieldsAllowed = 4096
)

// DefaultConfig is the HTTP/2 default table size (4096), a 16 KiB header list (as
// -grpc.max-header-bytes), and the fields of GRPCServerKeep.
func DefaultConfig() Config {
	return Config{
		HeaderTableSize:   4096,
		MaxHeaderListSize: 16 << 10,
		Keep:              append([]string(nil), GRPCServerKeep...),
		MaxKeptFields:     64,
	}
}

// Validate reports a Config a Decoder cannot be made from.
func (c Config) Validate() error {
	if c.HeaderTableSize > maxHeaderTableSize {
		return fmt.Errorf("h2: header table size %d above %d", c.HeaderTableSize, maxHeaderTableSize)
	}
	if c.MaxHeaderListSize == 0 || c.MaxHeaderListSize > maxHeaderListSize {
		return fmt.Errorf("h2: max header list size %d outside 1..%d", c.MaxHeaderListSize, maxHeaderListSize)
	}
	if len(c.Keep) > maxKeep {
		return fmt.Errorf("h2: %d kept names, at most %d", len(c.Keep), maxKeep)
	}
	if c.Binary && !c.Request {
		return errors.New("h2: Binary needs Request")
	}
	if c.MaxKeptFields < 1 || c.MaxKeptFields > maxKeptFieldsAllowed {
		return fmt.Errorf("h2: max kept fields %d outside 1..%d", c.MaxKeptFields, maxKeptFieldsAllowed)
	}
	seen := map[string]bool{}
	for _, k := range c.Keep {
		if k == "" {
			return errors.New("h2: an empty kept name")
		}
		for i := 0; i < len(k); i++ {
			if 'A' <= k[i] && k[i] <= 'Z' {
				return fmt.Errorf("h2: kept name %q is not lower case (HTTP/2 field names are)", k)
			}
		}
		if seen[k] {
			return fmt.Errorf("h2: kept name %q twice", k)
		}
		seen[k] = true
	}
	return nil
}

// Field is a decoded field of one of the kept names.
type Field struct {
	Name      string // the kept name, as Config.Keep spells it
	Keep      int    // its index in Config.Keep
	Value     []byte // valid until the next Decode; copy to retain
	Sensitive bool   // sent as never indexed (RFC 7541 §6.2.3): not to be indexed when forwarded
}

// Decoder is the receiving end of one connection's HPACK context (RFC 7541). It allocates
// everything when it is made and nothing after: the dynamic table, a scratch buffer for the
// entry being inserted, and the kept fields' values, each bounded by its Config. Decode keeps
// only the fields whose names Config.Keep lists; the others are decoded only as far as the
// dynamic table needs (an entry it inserts) and otherwise only measured, their Huffman coding
// checked without a copy. Owned by the goroutine that reads the connection.
type Decoder struct {
	keep       []string
	maxKeepLen int
	staticKeep [staticLen + 1]int16
	table      dynTable
	maxList    uint64
	scratch    []byte
	out        []byte
	fields     []Field

	request bool // Config.Request
	binary  bool // Config.Binary

	// The block being decoded.
	list       uint64 // its header list size so far
	over       bool   // list passed maxList: nothing more is kept
	tooMany    bool
	started    bool // a field was decoded: size updates are no longer allowed
	regular    bool // a field that is not a pseudo-field was decoded (Request)
	malformed  bool // a field broke a rule of Config.Request
	invalid    bool // a field broke a rule checked field by field (hpack_fieldcheck.go)
	invalidEnd int  // where the first such field ended in the block
	bad        BadBinary
	hasBad     bool // bad is the block's last field with a malformed binary value (Config.Binary)
}

// NewDecoder makes a decoder for c, which must be valid.
func NewDecoder(c Config) *Decoder {
	if err := c.Validate(); err != nil {
		panic("BUG: " + err.Error())
	}
	d := &Decoder{
		keep:    append([]string(nil), c.Keep...),
		table:   newDynTable(c.HeaderTableSize),
		maxList: uint64(c.MaxHeaderListSize),
		request: c.Request,
		binary:  c.Binary,
		out:     make([]byte, 0, c.MaxHeaderListSize),
		fields:  make([]Field, 0, c.MaxKeptFields),
	}
	for _, k := range d.keep {
		d.maxKeepLen = max(d.maxKeepLen, len(k))
	}
	d.scratch = make([]byte, max(int(c.HeaderTableSize), d.maxKeepLen))
	for i := 1; i <= staticLen; i++ {
		d.staticKeep[i] = d.match([]byte(staticTable[i].name))
	}
	return d
}

// match returns the index of name among the kept names, or -1.
func (d *Decoder) match(name []byte) int16 {
	if len(name) > d.maxKeepLen {
		return -1
	}
	for i, k := range d.keep {
		if string(name) == k {
			return int16(i)
		}
	}
	return -1
}

// TableSize is the dynamic table's size as RFC 7541 §4.1 counts it.
func (d *Decoder) TableSize() uint32 { return d.table.size }

// Decode decodes one whole field block (a HEADERS frame's fragment with those of its
// CONTINUATION frames, joined) and returns the fields of the kept names, in order; the slice
// and its values are valid until the next Decode. Every field counts toward the header list
// bound before any of its bytes is copied (an indexed field's size is known from the table, a
// literal's before it is copied, a Huffman-coded value is written only within the bytes the
// bound leaves), so a block that repeats a large entry many times costs no more than its
// length. A block over the bound, or with too many kept fields, is still processed to its end
// so that the dynamic table stays in step with the peer's, and refused with a stream error
// (ErrHeaderListTooLarge, ErrTooManyFields); a block that breaks RFC 7541 is refused with a
// connection error (COMPRESSION_ERROR), after which the decoder must not be used.
func (d *Decoder) Decode(block []byte) ([]Field, error) {
	d.out = d.out[:0]
	d.fields = d.fields[:0]
	d.list, d.over, d.tooMany, d.started = 0, false, false, false
	d.regular, d.malformed, d.invalid, d.invalidEnd = false, false, false, 0
	d.bad, d.hasBad = BadBinary{}, false
	p := block
	var err error
	for len(p) > 0 {
		b := p[0]
		switch {
		case b&0x80 != 0: // indexed field, §6.1
			p, err = d.indexed(p)
		case b&0xc0 == 0x40: // literal with incremental indexing, §6.2.1
			p, err = d.literal(p, 6, true, false)
		case b&0xe0 == 0x20: // dynamic table size update, §6.3
			p, err = d.sizeUpdate(p)
		default: // literal without indexing (0000), never indexed (0001), §6.2.2, §6.2.3
			p, err = d.literal(p, 4, false, b&0x10 != 0)
		}
		if err != nil {
			return nil, err
		}
		if d.invalid && d.invalidEnd == 0 {
			d.invalidEnd = len(block) - len(p)
		}
	}
	// A field found malformed was so before the list passed its bound: checks stop there.
	switch {
	case d.malformed:
		return nil, ErrMalformedFields
	case d.over:
		return nil, ErrHeaderListTooLarge
	case d.tooMany:
		return nil, ErrTooManyFields
	}
	return d.fields, nil
}

// readString reads a string literal's header and returns its coded bytes (§5.2).
func readString(p []byte) (huff bool, s, rest []byte, err error) {
	if len(p) == 0 {
		return false, nil, nil, ErrTruncated
	}
	huff = p[0]&0x80 != 0
	n, p, err := readInt(p, 7)
	if err != nil {
		return false, nil, nil, err
	}
	if uint64(n) > uint64(len(p)) {
		return false, nil, nil, ErrTruncated
	}
	return huff, p[:n], p[n:], nil
}

// decodeString decodes s into dst as far as dst has room and returns its decoded length.
func decodeString(dst []byte, huff bool, s []byte) (int, error) {
	if huff {
		return huffmanDecode(dst, s)
	}
	copy(dst, s)
	return len(s), nil
}

// count adds a field's size to the block's header list size and reports whether the field may
// still be kept.
func (d *Decoder) count(nameLen, valLen uint64) bool {
	d.list += nameLen + valLen + entryOverhead
	if d.list > d.maxList {
		d.over = true
	}
	return !d.over
}

// emit records a kept field whose value is d.out[start:].
func (d *Decoder) emit(keep int16, start int, sensitive bool) {
	if len(d.fields) == cap(d.fields) {
		d.tooMany = true
		d.out = d.out[:start]
		return
	}
	d.fields = append(d.fields, Field{Name: d.keep[keep], Keep: int(keep), Value: d.out[start:len(d.out):len(d.out)], Sensitive: sensitive})
}

func (d *Decoder) indexed(p []byte) ([]byte, error) {
	idx, p, err := readInt(p, 7)
	if err != nil {
		return nil, err
	}
	d.started = true
	switch {
	case idx == 0:
		return nil, ErrIndex
	case idx <= staticLen:
		e := &staticTable[idx]
		keep := d.staticKeep[idx]
		d.checkName(staticNameKind[idx])
		if d.count(uint64(len(e.name)), uint64(len(e.value))) && keep >= 0 {
			start := len(d.out)
			d.out = append(d.out, e.value...)
			d.emit(keep, start, false)
		}
	case int(idx-staticLen-1) < d.table.n:
		e, name, value := d.table.at(int(idx - staticLen - 1))
		d.checkName(e.kind)
		d.checkValue(e.ctl)
		// The size is the table's record of the entry: counted before a byte is copied, so
		// that an entry repeated many times is refused when the sum passes the bound.
		if d.count(uint64(e.nameLen), uint64(e.valLen)) {
			before := len(d.fields)
			if e.keep >= 0 {
				start := len(d.out)
				d.out = append(d.out, value...)
				d.emit(e.keep, start, false)
			}
			if e.bin == binBad {
				recordBad(d, name, value, before)
			}
		}
	default:
		return nil, ErrIndex
	}
	return p, nil
}

func (d *Decoder) sizeUpdate(p []byte) ([]byte, error) {
	// §4.2: updates come at the start of a block (RFC 7541 allows two there; any number
	// before the first field is accepted).
	if d.started {
		return nil, ErrSizeUpdatePlace
	}
	v, p, err := readInt(p, 5)
	if err != nil {
		return nil, err
	}
	if v > d.table.bound {
		return nil, ErrSizeUpdateTooLarge
	}
	d.table.setMax(v)
	return p, nil
}

// literal decodes a literal field (§6.2). An entry to insert is assembled in d.scratch (name,
// then value), which holds any entry the table can take; a kept value not inserted is decoded
// straight into d.out within the room the list bound leaves; the rest is only measured.
func (d *Decoder) literal(p []byte, prefix uint, indexing, sensitive bool) ([]byte, error) {
	nameIdx, p, err := readInt(p, prefix)
	if err != nil {
		return nil, err
	}
	d.started = true
	scr := d.scratch
	var (
		nameLen int
		keep    int16  = -1
		bin     bool   // the name ends in -bin, and Config.Binary
		name    []byte // the name, when bin
		kind    uint8  // nameKindOf the name, with Config.Request
	)
	switch {
	case nameIdx == 0:
		huff, s, rest, err := readString(p)
		if err != nil {
			return nil, err
		}
		p = rest
		if !huff && !indexing {
			nameLen, keep = len(s), d.match(s) // read in place
			if d.request {
				kind = nameKindOf(s)
				d.checkName(kind)
			}
			bin, name = d.binary && isBinaryName(s), s
			break
		}
		// Decoded into the scratch buffer: whole for an entry to insert or a name to check,
		// else only as far as the longest kept name (a longer one is not kept, and only
		// measured).
		dst := scr[:min(len(scr), d.maxKeepLen)]
		if indexing || d.request {
			dst = scr
		}
		if nameLen, err = decodeString(dst, huff, s); err != nil {
			return nil, err
		}
		if nameLen <= len(dst) {
			keep = d.match(dst[:nameLen])
			if d.request {
				kind = nameKindOf(dst[:nameLen])
				d.checkName(kind)
			}
			bin, name = d.binary && isBinaryName(dst[:nameLen]), dst[:nameLen]
		} else if d.request && !d.over {
			// A name longer than the scratch: no request has one, and it is refused. Its kind
			// is still read, from its first octet and its octets' flags, as x/net's framer
			// reads it: one that holds an octet no name may hold is refused as it passes.
			if huff {
				var first [1]byte
				_, seen, _ := huffmanDecodeFlags(first[:], s)
				switch {
				case first[0] == ':':
					kind = nameBadPseudo
				case seen&huffNoTok != 0:
					kind = nameBadRegular
				default:
					kind = nameRegular
				}
			} else {
				kind = nameKindOf(s)
			}
			d.checkName(kind)
			d.malformed = true
		}
	case nameIdx <= staticLen:
		e := &staticTable[nameIdx]
		nameLen, keep, kind = len(e.name), d.staticKeep[nameIdx], staticNameKind[nameIdx]
		d.checkName(kind)
		if indexing {
			copy(scr, e.name)
		}
	case int(nameIdx-staticLen-1) < d.table.n:
		// Copied before the insertion below may evict the entry it names (§4.4).
		e, n, _ := d.table.at(int(nameIdx - staticLen - 1))
		nameLen, keep, kind = int(e.nameLen), e.keep, e.kind
		d.checkName(kind)
		if indexing {
			copy(scr, n)
		}
		// Read before the insertion below, which may evict the entry.
		bin, name = e.bin != binNone, n
	default:
		return nil, ErrIndex
	}

	huff, v, p, err := readString(p)
	if err != nil {
		return nil, err
	}
	kept := keep >= 0 && !d.over
	var (
		valLen    int
		decoded   bool
		inScratch bool // name and value are in scr[:nameLen+valLen]
		inPlace   bool // the value was decoded into d.out[start:start+valLen]
	)
	// ctl: the value holds an octet no value may hold (Config.Request), read as it passes: a
	// Huffman-coded value as it is decoded, wherever that is, a literal one in place.
	ctl := !huff && d.request && !validValue(v)
	start := len(d.out)
	if indexing && nameLen <= len(scr) {
		if huff {
			valLen, ctl, err = huffmanDecodeValue(scr[nameLen:], v)
		} else {
			// The whole length, not what fit: a value longer than the scratch is decoded
			// again below, where the list bound leaves room for it.
			valLen = len(v)
			if nameLen+valLen <= len(scr) {
				copy(scr[nameLen:], v)
			}
		}
		if err != nil {
			return nil, err
		}
		decoded, inScratch = true, nameLen+valLen <= len(scr)
	}
	if kept && !inScratch {
		// Written only within what the list bound leaves: a value too long for it is
		// measured, not kept.
		room := 0
		if used := d.list + uint64(nameLen) + entryOverhead; used < d.maxList {
			room = int(d.maxList - used)
		}
		if huff {
			valLen, ctl, err = huffmanDecodeValue(d.out[start:start+room], v)
		} else {
			valLen = len(v) // the whole length: longer than room, it is measured, not kept
			if valLen <= room {
				copy(d.out[start:start+valLen], v)
			}
		}
		if err != nil {
			return nil, err
		}
		decoded, inPlace = true, valLen <= room
	}
	if !decoded {
		if huff {
			if valLen, ctl, err = huffmanDecodeValue(nil, v); err != nil {
				return nil, err
			}
		} else {
			valLen = len(v)
		}
	}
	// A binary value is read where it was decoded, or decoded into d.out's room after the
	// kept values, within the list bound (a value longer is refused with its block).
	binFlag := binNone
	var val []byte
	if bin {
		switch {
		case inScratch:
			val = scr[nameLen : nameLen+valLen]
		case !huff:
			val = v
		case inPlace:
			val = d.out[start : start+valLen]
		default:
			room := 0
			if used := d.list + uint64(nameLen) + entryOverhead; used < d.maxList {
				room = int(d.maxList - used)
			}
			if n, _ := huffmanDecode(d.out[start:start+room], v); n <= room {
				val = d.out[start : start+n]
			}
		}
		binFlag = binValid
		if val != nil && !ValidBinary(val) {
			binFlag = binBad
		}
	}
	d.checkValue(ctl)
	if d.count(uint64(nameLen), uint64(valLen)) {
		before := len(d.fields)
		if kept {
			switch {
			case inScratch:
				d.out = append(d.out, scr[nameLen:nameLen+valLen]...)
			case inPlace:
				d.out = d.out[:start+valLen]
			default:
				panic("BUG: h2: a kept value within the list bound was not decoded")
			}
			d.emit(keep, start, sensitive)
		}
		if binFlag == binBad {
			recordBad(d, name, val, before)
		}
	}
	if indexing {
		if size := uint64(nameLen) + uint64(valLen); !inScratch || size+entryOverhead > uint64(d.table.max) {
			d.table.clear() // larger than the table: empties it (§4.4)
		} else {
			d.table.add(scr[:size], uint32(nameLen), keep, binFlag, kind, ctl)
		}
	}
	return p, nil
}
