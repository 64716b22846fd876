package fastpath

import (
	"bytes"
	"testing"
)

func TestAppendValidEntries(t *testing.T) {
	good := []byte{0x0a, 0x04, 0x12, 0x02, 0x12, 0x00}          // one scope with one empty span
	badSpan := []byte{0x0a, 0x05, 0x12, 0x03, 0x12, 0x01, 0x07} // one span holding field number 0
	badScope := []byte{0x0a, 0x02, 0x12, 0x05}                  // scope length past the entry
	unknown := []byte{0x78, 0x01}                               // top-level field 15
	f := func(name string, req []byte, wantOut []byte, want Entries, wantErr error) {
		t.Helper()
		prefix := []byte("xy")
		out, e, err := AppendValidEntries(append([]byte{}, prefix...), Traces, req)
		if err != wantErr || e != want || !bytes.Equal(out, append(prefix, wantOut...)) {
			t.Errorf("%s: %x %+v %v; want %x %+v %v", name, out, e, err, append(prefix, wantOut...), want, wantErr)
		}
	}
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	f("all good", cat(good, good), cat(good, good), Entries{Good: 2, Items: 2}, nil)
	f("mixed", cat(badSpan, good, unknown, badScope, good), cat(good, good), Entries{Good: 2, Items: 2, Bad: 2, Rejected: 1}, nil)
	f("none good", cat(badSpan), nil, Entries{Bad: 1, Rejected: 1}, nil)
	f("broken top level", cat(good, []byte{0x0a, 0x09}), nil, Entries{}, ErrLengthOverflow)
	f("entry of the wrong wire type", cat(good, []byte{0x08, 0x01}), nil, Entries{}, ErrWireType)
	if _, _, err := AppendValidEntries(nil, NumSignals, good); err != ErrSignal {
		t.Errorf("bad signal: %v", err)
	}
}
