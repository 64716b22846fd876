package h2

// A request's field names and values, as Config.Request checks them: the rules RFC 9113
// §8.2.1 and §8.3 give, as far as grpc-go's server holds a client to them. grpc-go reads a
// call's headers with x/net's Framer (ReadMetaHeaders), which checks each field as the HPACK
// decoder emits it, and resets the stream (PROTOCOL_ERROR) for the first that fails:
//
//  1. a value with an octet httpguts.ValidHeaderFieldValue refuses: a control character
//     (0x00-0x1f, 0x7f) other than HTAB; a leading or trailing space is let through, and so
//     are octets above 0x7f;
//  2. a regular name that is empty or holds an octet that is not a token character in lower
//     case (httpguts.IsTokenRune, no 'A'-'Z', nothing above 0x7f);
//  3. a pseudo-field after a regular one.
//
// Once the whole block is decoded it refuses pseudo-fields other than a request's or a
// response's, the same pseudo-field twice, and a request's with a response's (checkPseudos);
// the transport above counts the request's and refuses a :status. A field that fails a check
// of the first kind in a HEADERS or CONTINUATION frame that another CONTINUATION follows ends
// the connection instead, the framer having stopped counting the list's size: InvalidEnd gives
// the caller the place to tell.

// badValueOctet marks the octets no field value may hold.
var badValueOctet = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = c != '\t'
	}
	t[0x7f] = true
	return t
}()

// nameOctet marks the octets a regular field's name may hold: RFC 9110's tchar, in lower case.
var nameOctet = func() (t [256]bool) {
	for _, c := range "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyz" {
		t[c] = true
	}
	return t
}()

// validValue reports whether v holds no octet a field value may not hold.
func validValue(v []byte) bool {
	for _, c := range v {
		if badValueOctet[c] {
			return false
		}
	}
	return true
}

// What a name is to Config.Request's checks: worked out once for a name of the static table
// and for the name of a dynamic table entry, when it is inserted, so that a field named from a
// table is checked without its name being read again.
const (
	nameRegular    uint8 = iota // a regular name of lower-case token characters
	nameBadRegular              // a regular name that is empty or holds another octet
	namePseudo                  // a request's pseudo-field
	nameBadPseudo               // another pseudo-field (a response's, an unknown one)
)

// staticNameKind is nameKindOf of each static table entry's name.
var staticNameKind = func() (k [staticLen + 1]uint8) {
	for i := 1; i <= staticLen; i++ {
		k[i] = nameKindOf(staticTable[i].name)
	}
	return k
}()

// nameKindOf classifies name for Config.Request's checks.
func nameKindOf[T string | []byte](name T) uint8 {
	if len(name) > 0 && name[0] == ':' {
		switch string(name) {
		case ":method", ":scheme", ":authority", ":path", ":protocol":
			return namePseudo
		}
		return nameBadPseudo
	}
	if len(name) == 0 {
		return nameBadRegular
	}
	for i := 0; i < len(name); i++ {
		if !nameOctet[name[i]] {
			return nameBadRegular
		}
	}
	return nameRegular
}

// checkName holds a field's name, of kind k (nameKindOf), to the rules of Config.Request.
func (d *Decoder) checkName(k uint8) {
	if !d.request || d.invalid || d.over {
		// Checks stop at the first field the framer refuses as it passes, and where the list
		// passed its bound: x/net's framer emits no field after either.
		return
	}
	switch k {
	case nameRegular:
		d.regular = true
	case nameBadRegular:
		d.regular = true
		d.fieldInvalid()
	default:
		d.malformed = d.malformed || k == nameBadPseudo
		if d.regular {
			d.fieldInvalid()
		}
	}
}

// checkValue refuses, with Config.Request, a field whose value holds an octet no value may
// hold (bad, worked out by the caller where the value was read).
func (d *Decoder) checkValue(bad bool) {
	if bad && d.request && !d.invalid && !d.over {
		d.fieldInvalid()
	}
}

// fieldInvalid records that the field being decoded breaks a rule checked field by field.
func (d *Decoder) fieldInvalid() {
	d.malformed, d.invalid = true, true
}

// InvalidEnd returns, after Decode refused a block with ErrMalformedFields, where in the
// block the first field ended that breaks a rule checked as the fields pass (a name or value
// with an octet it may not hold, a pseudo-field after a regular one); false when the block
// was refused only for its pseudo-fields as a whole. A caller that assembled the block from
// several frames ends the connection, as grpc-go's framer does, when that field ended before
// the last frame's fragment began.
func (d *Decoder) InvalidEnd() (int, bool) {
	return d.invalidEnd, d.invalid
}
