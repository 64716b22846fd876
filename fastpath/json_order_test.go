package fastpath

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestJSONKeyOrder writes the same requests with their keys in many orders, small and with
// strings inflated so that spans, scopes and resource entries outgrow eagerMax (their lengths
// are then deferred to expand, and out-of-order fields are rotated in place, marks and all):
// every order must transcode to the same bytes, and to the tree transcoder's bytes (which
// TestJSONExamples holds to MarshalVT's).
func TestJSONKeyOrder(t *testing.T) {
	type base struct {
		name string
		sig  Signal
		body []byte
	}
	var bases []base
	for _, f := range []struct {
		file string
		sig  Signal
	}{{"traces.json", Traces}, {"metrics.json", Metrics}, {"logs.json", Logs}} {
		b, err := os.ReadFile(filepath.Join("testdata", "json", f.file))
		if err != nil {
			t.Fatal(err)
		}
		bases = append(bases, base{f.file, f.sig, b})
	}
	bases = append(bases, base{"spans", Traces, jsonBodies(t)[0].body})

	var stream JSONTranscoder
	var tree treeTranscoder
	for _, bs := range bases {
		for _, inflate := range []int{0, 300, 1500} {
			t.Run(bs.name+"/inflate="+strconv.Itoa(inflate), func(t *testing.T) {
				dec := json.NewDecoder(bytes.NewReader(bs.body))
				dec.UseNumber()
				var v any
				if err := dec.Decode(&v); err != nil {
					t.Fatal(err)
				}
				if inflate > 0 {
					v = inflateStrings(v, inflate)
				}
				var want []byte
				for mode := range 12 {
					r := rand.New(rand.NewPCG(uint64(mode), 7))
					body := writeJSONOrdered(nil, v, mode, r)
					got, s, err := stream.AppendRequest(nil, bs.sig, body)
					if err != nil {
						t.Fatalf("order %d: %v\n%.300s", mode, err, body)
					}
					ref, rs, err := tree.AppendRequest(nil, bs.sig, body)
					if err != nil || !bytes.Equal(got, ref) || s != rs {
						t.Fatalf("order %d: stream and tree differ (%v)\nstream %x\ntree   %x", mode, err, got, ref)
					}
					if mode == 0 {
						want = got
						if s.Resources == 0 || (inflate >= 1500 && len(got) < 4*eagerMax) {
							t.Fatalf("the body is too small to test anything: %d bytes, %+v", len(got), s)
						}
					} else if !bytes.Equal(got, want) {
						t.Fatalf("order %d writes other bytes than field order", mode)
					}
				}
			})
		}
	}
}

// inflateStrings repeats the text of names, string values and keys to about n bytes.
func inflateStrings(v any, n int) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && (k == "stringValue" || k == "name" || k == "key" || k == "description") && s != "" {
				v[k] = strings.Repeat(s, n/len(s)+1)
				continue
			}
			v[k] = inflateStrings(x, n)
		}
	case []any:
		for i := range v {
			v[i] = inflateStrings(v[i], n)
		}
	}
	return v
}

// writeJSONOrdered writes v with each object's keys in an order chosen by mode: 0 sorted, 1
// reversed, else shuffled by r. encoding/json escapes the strings.
func writeJSONOrdered(dst []byte, v any, mode int, r *rand.Rand) []byte {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		switch mode {
		case 0:
		case 1:
			slices.Reverse(keys)
		default:
			r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		}
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			kb, _ := json.Marshal(k)
			dst = append(append(dst, kb...), ':')
			dst = writeJSONOrdered(dst, v[k], mode, r)
		}
		return append(dst, '}')
	case []any:
		dst = append(dst, '[')
		for i, x := range v {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = writeJSONOrdered(dst, x, mode, r)
		}
		return append(dst, ']')
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return append(dst, b...)
}
