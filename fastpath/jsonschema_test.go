package fastpath

import (
	"strings"
	"testing"
)

// TestJSONKeyTable holds each message's key table to the linear search of the reference
// (lookupJSON): every name of every message, each with one byte changed, one byte short and
// one byte long, read in place (keyWords and find) and near the end of a body (lookup).
func TestJSONKeyTable(t *testing.T) {
	var keys []string
	for m := range jsonSchema {
		for _, f := range jsonSchema[m] {
			for _, name := range []string{f.camel, f.name} {
				keys = append(keys, name, name[:len(name)-1], name+"s", "x"+name)
				for i := range name {
					keys = append(keys, name[:i]+"_"+name[i+1:], name[:i]+strings.ToUpper(name[i:i+1])+name[i+1:])
				}
			}
		}
	}
	keys = append(keys, "", "k", strings.Repeat("a", maxKeyLen), strings.Repeat("a", maxKeyLen+1))
	for m := range jsonSchema {
		for _, key := range keys {
			want := lookupJSON(jsonSchema[m], []byte(key))
			if got := jsonKeys[m].field(jsonKeys[m].lookup([]byte(key))); got != want {
				t.Fatalf("message %d, key %q: lookup %v, want %v", m, key, got, want)
			}
			if n := len(key); n > 0 && n <= maxKeyLen {
				body := []byte(`"` + key + `":` + strings.Repeat("\x00", maxKeyLen))
				w := keyWords(body, 1, n)
				if got := jsonKeys[m].field(jsonKeys[m].find(&w, n)); got != want {
					t.Fatalf("message %d, key %q in place: find %v, want %v", m, key, got, want)
				}
			}
		}
	}
}
