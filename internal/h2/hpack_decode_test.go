package h2

import (
	"bytes"
	"strings"
	"testing"

	"golang.org/x/net/http2/hpack"
)

func literalIndexed(name, value string) []byte {
	b := append([]byte{0x40}, appendInt(nil, 7, 0, uint64(len(name)))...)
	b = append(b, name...)
	b = append(b, appendInt(nil, 7, 0, uint64(len(value)))...)
	return append(b, value...)
}

// A peer inserts one large entry, then names it thousands of times: each reference counts its
// full size before a byte is copied, the block is refused for its stream, and nothing is
// written past the list bound.
func TestHPACKRepeatedEntryBomb(t *testing.T) {
	c := DefaultConfig()
	c.Keep = append(c.Keep, "x-scope-orgid")
	d := NewDecoder(c)
	big := strings.Repeat("t", 4000)
	if fs, err := d.Decode(literalIndexed("x-scope-orgid", big)); err != nil || len(fs) != 1 || string(fs[0].Value) != big {
		t.Fatalf("%d fields, %v", len(fs), err)
	}
	outCap := cap(d.out)
	fs, err := d.Decode(bytes.Repeat([]byte{0xbe}, 10000)) // index 62: the entry above
	if err != ErrHeaderListTooLarge || fs != nil {
		t.Fatalf("%d fields, err %v; want ErrHeaderListTooLarge", len(fs), err)
	}
	// Four references fit the 16 KiB bound, the fifth does not: only the four were copied.
	if cap(d.out) != outCap || len(d.out) != 4*len(big) {
		t.Fatalf("out: len %d cap %d, want %d within cap %d", len(d.out), cap(d.out), 4*len(big), outCap)
	}
	// The table is intact and the connection goes on.
	if fs, err := d.Decode([]byte{0xbe, 0x83}); err != nil || len(fs) != 2 || string(fs[0].Value) != big || string(fs[1].Value) != "POST" {
		t.Fatalf("%v %v", fieldStrings(fs), err)
	}
}

// A kept field to index whose entry is larger than the table empties the table and is kept
// whole, literal or Huffman-coded (a 5,000-byte token at the default 4,096-byte table; before,
// a literal value was cut to what the decoder's scratch held).
func TestHPACKIndexedFieldLargerThanTable(t *testing.T) {
	c := DefaultConfig()
	c.Keep = append(c.Keep, "authorization")
	d := NewDecoder(c)
	token := strings.Repeat("0123456789", 500)
	// authorization is the static table's entry 23.
	huffed := append(append(appendInt(nil, 6, 0x40, 23), appendInt(nil, 7, 0x80, uint64(huffmanLen(token)))...), appendHuffman(nil, token)...)
	for _, b := range [][]byte{literalIndexed("authorization", token), huffed} {
		if fs, err := d.Decode(append(literalIndexed("x-small", "v"), b...)); err != nil || len(fs) != 1 || string(fs[0].Value) != token {
			t.Fatalf("%v, %v; want the whole %d-byte token", fieldStrings(fs), err, len(token))
		}
		if d.TableSize() != 0 {
			t.Fatalf("table size %d after an entry larger than the table, want 0", d.TableSize())
		}
	}
}

// A kept literal value is refused with its block once it passes the header list bound, by one
// byte too, whether sent as it is or Huffman-coded; up to the bound it is kept whole (before,
// a value sent as it is was cut to the bound and accepted).
func TestHPACKLiteralValueAtBound(t *testing.T) {
	c := DefaultConfig()
	c.MaxHeaderListSize = 100
	c.Keep = append(c.Keep, "authorization")
	// authorization (13 bytes, the static table's entry 23) + 32: 55 bytes of value fit.
	for _, huff := range []bool{false, true} {
		for _, n := range []int{55, 56, 200} {
			d := NewDecoder(c)
			v := strings.Repeat("a", n)
			b := appendInt(nil, 4, 0x00, 23) // without indexing
			if huff {
				b = appendHuffman(appendInt(b, 7, 0x80, uint64(huffmanLen(v))), v)
			} else {
				b = append(appendInt(b, 7, 0, uint64(n)), v...)
			}
			fs, err := d.Decode(b)
			switch {
			case n <= 55 && (err != nil || len(fs) != 1 || string(fs[0].Value) != v):
				t.Errorf("huffman %v, %d bytes: %v, %v; want it kept whole", huff, n, fieldStrings(fs), err)
			case n > 55 && (err != ErrHeaderListTooLarge || fs != nil):
				t.Errorf("huffman %v, %d bytes: %v, %v; want ErrHeaderListTooLarge", huff, n, fieldStrings(fs), err)
			}
		}
	}
}

// A Huffman-coded kept value that expands past the bound is written only as far as the bound.
func TestHPACKHuffmanValueWithinBound(t *testing.T) {
	c := DefaultConfig()
	c.MaxHeaderListSize = 100
	d := NewDecoder(c)
	v := strings.Repeat("0", 400)                                                // 5 bits each: 250 bytes coded, 400 decoded
	b := append([]byte{0x04}, appendInt(nil, 7, 0x80, uint64(huffmanLen(v)))...) // :path, without indexing
	b = appendHuffman(b, v)
	if _, err := d.Decode(b); err != ErrHeaderListTooLarge {
		t.Fatalf("err %v", err)
	}
	if cap(d.out) != 100 {
		t.Fatalf("out grew to %d", cap(d.out))
	}
}

// A block refused for its size still feeds the dynamic table, so the peer's next block, which
// names its entries, decodes right.
func TestHPACKRefusedBlockKeepsTableInStep(t *testing.T) {
	c := DefaultConfig()
	c.MaxHeaderListSize = 400
	c.Keep = append(c.Keep, "x-scope-orgid")
	d := NewDecoder(c)
	var buf bytes.Buffer
	e := hpack.NewEncoder(&buf)
	write := func(fs ...hpack.HeaderField) []byte {
		buf.Reset()
		for _, f := range fs {
			if err := e.WriteField(f); err != nil {
				t.Fatal(err)
			}
		}
		return append([]byte(nil), buf.Bytes()...)
	}
	path := hpack.HeaderField{Name: ":path", Value: "/opentelemetry.proto.collector.logs.v1.LogsService/Export"}
	tenant := hpack.HeaderField{Name: "x-scope-orgid", Value: "tenant-7"}
	first := write(path, tenant, hpack.HeaderField{Name: "x-padding", Value: strings.Repeat("p", 500)})
	if _, err := d.Decode(first); err != ErrHeaderListTooLarge {
		t.Fatalf("err %v", err)
	}
	second := write(path, tenant)
	if len(second) != 2 {
		t.Fatalf("the encoder did not index: %x", second)
	}
	fs, err := d.Decode(second)
	if got := strings.Join(fieldStrings(fs), "\n"); err != nil || got != ":path: "+path.Value+"\nx-scope-orgid: tenant-7" {
		t.Fatalf("%s %v", got, err)
	}
}

func TestHPACKRefusals(t *testing.T) {
	for _, c := range []struct {
		name  string
		block []byte
		want  *Error
	}{
		{"index 0", []byte{0x80}, ErrIndex},
		{"index past the tables", []byte{0xbe}, ErrIndex},
		{"name index past the tables", []byte{0x7f, 0x00, 0x00}, ErrIndex},
		{"truncated integer", []byte{0xff}, ErrTruncated},
		{"truncated string", []byte{0x04, 0x05, 'a'}, ErrTruncated},
		{"name without value", []byte{0x00, 0x01, 'a'}, ErrTruncated},
		{"integer of 10 continuation octets", []byte{0xff, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, ErrInteger},
		{"integer past 2^32-1", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, ErrInteger},
		{"size update after a field", []byte{0x82, 0x20}, ErrSizeUpdatePlace},
		{"size update above the bound", []byte{0x3f, 0xe2, 0x1f}, ErrSizeUpdateTooLarge}, // 4097
		{"Huffman: EOS in the string", []byte{0x04, 0x84, 0xff, 0xff, 0xff, 0xff}, ErrHuffman},
		{"Huffman: padding of 8 bits or more", []byte{0x04, 0x82, 0x1f, 0xff}, ErrHuffman},
		{"Huffman: padding not all ones", []byte{0x04, 0x81, 0x18}, ErrHuffman},
		{"Huffman in a name not kept", []byte{0x00, 0x81, 0x18, 0x00}, ErrHuffman},
		{"Huffman in a kept value", []byte{0x0f, 0x10, 0x81, 0x18}, ErrHuffman}, // content-type
		{"Huffman in a value of a name not kept", []byte{0x0f, 0x2b, 0x81, 0x18}, ErrHuffman},
	} {
		d := NewDecoder(DefaultConfig())
		if fs, err := d.Decode(c.block); err != c.want {
			t.Errorf("%s: %v %v, want %v", c.name, fieldStrings(fs), err, c.want)
		}
	}
	// A valid 'a' (00011) with three bits of padding passes.
	if fs, err := NewDecoder(DefaultConfig()).Decode([]byte{0x04, 0x81, 0x1f}); err != nil || fieldStrings(fs)[0] != ":path: a" {
		t.Fatalf("%v %v", fieldStrings(fs), err)
	}
}

func TestHPACKSizeUpdates(t *testing.T) {
	d := NewDecoder(DefaultConfig())
	if _, err := d.Decode(literalIndexed("te", "trailers")); err != nil || d.TableSize() != 42 {
		t.Fatalf("%v, size %d", err, d.TableSize())
	}
	// Two updates before the first field (RFC 7541 §4.2): down to 0 empties the table, up to
	// 4096 again; then the field.
	if fs, err := d.Decode([]byte{0x20, 0x3f, 0xe1, 0x1f, 0x83}); err != nil || len(fs) != 1 || d.TableSize() != 0 || d.table.n != 0 {
		t.Fatalf("%v %v, size %d", fieldStrings(fs), err, d.TableSize())
	}
	if _, err := d.Decode([]byte{0xbe}); err != ErrIndex {
		t.Fatalf("the evicted entry is still there: %v", err)
	}
}

// RFC 7541 §4.4: a new entry may name an entry its own insertion evicts.
func TestHPACKNameOfEvictedEntry(t *testing.T) {
	c := DefaultConfig()
	c.HeaderTableSize = 64
	c.Keep = []string{"custom-key"}
	d := NewDecoder(c)
	if _, err := d.Decode(literalIndexed("custom-key", "a")); err != nil || d.TableSize() != 43 {
		t.Fatalf("%v %d", err, d.TableSize())
	}
	fs, err := d.Decode([]byte{0x40 | 62, 0x02, 'b', 'b'}) // name: index 62, which this insertion evicts
	if err != nil || fieldStrings(fs)[0] != "custom-key: bb" || d.TableSize() != 44 || d.table.n != 1 {
		t.Fatalf("%v %v, size %d, %d entries", fieldStrings(fs), err, d.TableSize(), d.table.n)
	}
	if fs, err := d.Decode([]byte{0xbe}); err != nil || fieldStrings(fs)[0] != "custom-key: bb" {
		t.Fatalf("%v %v", fieldStrings(fs), err)
	}
}

// Entries whose bytes wrap past the end of the ring read back whole.
func TestHPACKTableWraps(t *testing.T) {
	c := DefaultConfig()
	c.HeaderTableSize = 200
	c.Keep = []string{"custom-key"}
	d := NewDecoder(c)
	for i := range 50 {
		v := strings.Repeat(string(rune('a'+i%26)), 20+i%37)
		if _, err := d.Decode(literalIndexed("custom-key", v)); err != nil {
			t.Fatal(err)
		}
		fs, err := d.Decode([]byte{0xbe})
		if err != nil || len(fs) != 1 || string(fs[0].Value) != v {
			t.Fatalf("entry %d: %v %v", i, fieldStrings(fs), err)
		}
	}
}

func TestHPACKTooManyKeptFields(t *testing.T) {
	c := DefaultConfig()
	c.MaxKeptFields = 3
	d := NewDecoder(c)
	if _, err := d.Decode([]byte{0x83, 0x83, 0x83, 0x83}); err != ErrTooManyFields {
		t.Fatalf("err %v", err)
	}
	if fs, err := d.Decode([]byte{0x83, 0x83, 0x83}); err != nil || len(fs) != 3 {
		t.Fatalf("%v %v", fieldStrings(fs), err)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mod := range map[string]func(*Config){
		"upper case name":  func(c *Config) { c.Keep = []string{"X-Scope-OrgID"} },
		"empty name":       func(c *Config) { c.Keep = []string{""} },
		"name twice":       func(c *Config) { c.Keep = []string{"te", "te"} },
		"no list bound":    func(c *Config) { c.MaxHeaderListSize = 0 },
		"list bound large": func(c *Config) { c.MaxHeaderListSize = 2 << 20 },
		"table large":      func(c *Config) { c.HeaderTableSize = 2 << 20 },
		"no kept fields":   func(c *Config) { c.MaxKeptFields = 0 },
	} {
		c := DefaultConfig()
		mod(&c)
		if c.Validate() == nil {
			t.Errorf("%s: valid", name)
		}
	}
}

// A field of a name not kept is copied nowhere unless the dynamic table takes it: its value,
// Huffman-coded or not, and a literal name are measured and checked in place.
func TestHPACKFieldsNotKeptAreNotCopied(t *testing.T) {
	d := NewDecoder(DefaultConfig())
	for i := range d.scratch {
		d.scratch[i] = '#'
	}
	ua := strings.Repeat("agent/1.0 ", 40)
	var b []byte
	for _, never := range []byte{0x00, 0x10} { // without indexing, never indexed
		b = append(b, never|0x0f, 58-15) // name: user-agent (static 58), not kept
		b = appendInt(b, 7, 0x80, uint64(huffmanLen(ua)))
		b = appendHuffman(b, ua)
		b = append(b, never, 0x07) // a literal name, not kept, raw
		b = append(b, "x-trace"...)
		b = append(b, 0x03, 'a', 'b', 'c')
	}
	b = append(b, 0x83) // :method POST, kept
	fs, err := d.Decode(b)
	if err != nil || len(fs) != 1 || string(fs[0].Value) != "POST" {
		t.Fatalf("%v %v", fieldStrings(fs), err)
	}
	if string(d.out) != "POST" || strings.Trim(string(d.scratch), "#") != "" {
		t.Fatalf("copied: out %q, scratch touched", d.out)
	}
	if want := uint64(2*(len("user-agent")+len(ua)+32+len("x-trace")+3+32) + len(":method") + 4 + 32); d.list != want {
		t.Fatalf("header list size %d, want %d", d.list, want)
	}
}

// With Config.Request a block whose names break a request's rules is refused for its stream
// (RFC 9113 §8.2.1, §8.3), whether a name is sent literally, Huffman-coded, or named by an
// entry of either table, and whether the decoder keeps it or not; the table stays in step.
func TestHPACKRequestFieldNames(t *testing.T) {
	req := []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"},
		{Name: ":path", Value: "/p"}, {Name: ":authority", Value: "a"}, {Name: "content-type", Value: "application/grpc"}}
	cases := []struct {
		name  string
		extra []hpack.HeaderField
		front bool // extra goes before the request's fields
		want  error
	}{
		{"valid", []hpack.HeaderField{{Name: "x-tenant", Value: "t"}}, false, nil},
		{"upper case", []hpack.HeaderField{{Name: "X-Tenant", Value: "t"}}, false, ErrMalformedFields},
		{"upper case never indexed", []hpack.HeaderField{{Name: "X-Tenant", Value: "t", Sensitive: true}}, false, ErrMalformedFields},
		{"unknown pseudo", []hpack.HeaderField{{Name: ":foo", Value: "t"}}, true, ErrMalformedFields},
		{"response pseudo", []hpack.HeaderField{{Name: ":status", Value: "200"}}, true, ErrMalformedFields},
		{"pseudo after regular", []hpack.HeaderField{{Name: "x-a", Value: "b"}, {Name: ":path", Value: "/q"}}, false, ErrMalformedFields},
		{"protocol", []hpack.HeaderField{{Name: ":protocol", Value: "websocket"}}, true, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			c.Request = true
			d := NewDecoder(c)
			var buf bytes.Buffer
			enc := hpack.NewEncoder(&buf)
			fields := append(append([]hpack.HeaderField(nil), req...), tc.extra...)
			if tc.front {
				fields = append(append([]hpack.HeaderField(nil), tc.extra...), req...)
			}
			// Twice: literally first, then (x/net indexed them) by the dynamic table.
			for round := range 2 {
				buf.Reset()
				for _, f := range fields {
					enc.WriteField(f)
				}
				if _, err := d.Decode(buf.Bytes()); err != tc.want {
					t.Fatalf("round %d: %v, want %v", round, err, tc.want)
				}
			}
			// The connection goes on: a valid request decodes.
			buf.Reset()
			for _, f := range req {
				enc.WriteField(f)
			}
			if _, err := d.Decode(buf.Bytes()); err != nil {
				t.Fatalf("next block: %v", err)
			}
		})
	}
}
