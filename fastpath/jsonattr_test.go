package fastpath

import (
	"strconv"
	"strings"
	"testing"
)

// attrSeeds are span bodies whose attributes are spelled as attribute reads them and just
// past it, at every point where it may stop and hand over to the general reader: each value
// kind and its edges (empty, zero, quoted and bare integers, their signs, fractions, exponents
// and overflow), another key order, whitespace, escapes, bytes outside ASCII valid and not,
// two AnyValue members, a body that ends inside, and attributes nested down to MaxNesting.
func attrSeeds() []string {
	attrs := []string{
		`{"key":"k","value":{"stringValue":"v"}}`,
		`{"key":"k","value":{"stringValue":""}}`,
		`{"key":"","value":{"stringValue":"v"}}`,
		`{"key":"k","value":{}}`,
		`{"key":"k"}`,
		`{"key":"` + strings.Repeat("k", 130) + `","value":{"stringValue":"` + strings.Repeat("v", 300) + `"}}`,
		`{"key":"k","value":{"stringValue":"` + strings.Repeat("v", 3000) + `"}}`,
		`{"key":"k","value":{"intValue":443}}`,
		`{"key":"k","value":{"intValue":"443"}}`,
		`{"key":"k","value":{"intValue":0}}`,
		`{"key":"k","value":{"intValue":"0"}}`,
		`{"key":"k","value":{"intValue":007}}`,
		`{"key":"k","value":{"intValue":-5}}`,
		`{"key":"k","value":{"intValue":"-5"}}`,
		`{"key":"k","value":{"intValue":+5}}`,
		`{"key":"k","value":{"intValue":5.0}}`,
		`{"key":"k","value":{"intValue":5e2}}`,
		`{"key":"k","value":{"intValue":9223372036854775807}}`,
		`{"key":"k","value":{"intValue":9223372036854775808}}`,
		`{"key":"k","value":{"intValue":"9999999999999999999"}}`,
		`{"key":"k","value":{"intValue":12345678901234567890}}`,
		`{"key":"k","value":{"intValue":"1"2}}`,
		`{"key":"k","value":{"intValue":"}}`,
		`{"key":"k","value":{"intValue":}}`,
		`{"key":"k","value":{"intValue":1x}}`,
		`{"key":"k","value":{"boolValue":true}}`,
		`{"key":"k","value":{"boolValue":false}}`,
		`{"key":"k","value":{"boolValue":truex}}`,
		`{"key":"k","value":{"boolValue":"true"}}`,
		`{"key":"k","value":{"doubleValue":1.5}}`,
		`{"key":"k","value":{"stringValue":"v","intValue":1}}`,
		`{"key":"k","value":{"stringValue":"v"},"key":"j"}`,
		`{"key":"k","value":{"stringValue":"v"},"x":1}`,
		`{"key":"k","value":{"stringValue":"v"}}}`,
		`{"value":{"stringValue":"v"},"key":"k"}`,
		`{"key":"k", "value":{"stringValue":"v"}}`,
		`{"key":"k","value":{"stringValue":"v"} }`,
		`{"key":"k\u0041","value":{"stringValue":"v"}}`,
		`{"key":"k","value":{"stringValue":"v\n"}}`,
		`{"key":"k","value":{"string\u0056alue":"v"}}`,
		`{"key":"café","value":{"stringValue":"naïve ☃"}}`,
		"{\"key\":\"k\xff\",\"value\":{\"stringValue\":\"v\"}}",
		"{\"key\":\"k\",\"value\":{\"stringValue\":\"v\xe2\x82\"}}",
		`{"key":"k","value":null}`,
		`{"key":"k","value":{"stringValue":null}}`,
		`{"key":"k","value":{"stringValue":"v"`,
		`{"key":"k","value":{"stringValue":"v"}`,
		`{"key":"k","value":{"stringValue":"v`,
		`{"key":"k","value":{"intValue":1`,
		`{"key":"k","value":{"boolValue":tru`,
	}
	var out []string
	for _, a := range attrs {
		out = append(out,
			span0(`"attributes":[`+a+`]`),
			span0(`"attributes":[`+a+`,`+a+`],"name":"n"`),
			`{"resourceSpans":[{"resource":{"attributes":[`+a+`]}}]}`,
		)
	}
	// An attribute at every nesting level around MaxNesting: a kvlist level is three messages
	// (an AnyValue, its KeyValueList, a KeyValue), an array level two (an AnyValue and its
	// ArrayValue), so that together they reach every level.
	for arrays := range 3 {
		for depth := 28; depth <= 33; depth++ {
			out = append(out, `{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":`+
				strings.Repeat(`{"arrayValue":{"values":[`, arrays)+
				strings.Repeat(`{"kvlistValue":{"values":[{"key":"k","value":`, depth)+
				`{"kvlistValue":{"values":[{"key":"k`+strconv.Itoa(depth)+`","value":{"intValue":1}}]}}`+
				strings.Repeat(`}]}}`, depth)+strings.Repeat(`]}}`, arrays)+`}]}]}]}`)
		}
	}
	return out
}

// TestJSONAttributes holds the attribute reader to the tree transcoder on attrSeeds.
func TestJSONAttributes(t *testing.T) {
	var stream JSONTranscoder
	var tree treeTranscoder
	for _, s := range attrSeeds() {
		checkJSONEquivalence(t, &stream, &tree, []byte(s))
	}
}

// TestJSONAttributeTaken checks that the spellings attribute is for do take it, so that
// TestJSONAttributes tests it and not only the general reader behind it.
func TestJSONAttributeTaken(t *testing.T) {
	f := &jsonSchema[mSpan][8] // attributes
	if f.name != "attributes" {
		t.Fatalf("field %q, want attributes", f.name)
	}
	for _, tt := range []struct {
		attr string
		take bool
	}{
		{`{"key":"k","value":{"stringValue":"v"}}`, true},
		{`{"key":"k","value":{"stringValue":""}}`, true},
		{`{"key":"café","value":{"stringValue":"naïve ☃"}}`, true},
		{`{"key":"k","value":{"intValue":443}}`, true},
		{`{"key":"k","value":{"intValue":"443"}}`, true},
		{`{"key":"k","value":{"intValue":0}}`, true},
		{`{"key":"k","value":{"boolValue":true}}`, true},
		{`{"key":"k","value":{"boolValue":false}}`, true},
		{`{"key":"k","value":{"intValue":-5}}`, false},
		{`{"key":"k","value":{"intValue":9223372036854775808}}`, false},
		{`{"key":"","value":{"stringValue":"v"}}`, false},
		{`{"key":"k","value":{"doubleValue":1.5}}`, false},
		{`{"key":"k", "value":{"stringValue":"v"}}`, false},
		{`{"key":"k\u0041","value":{"stringValue":"v"}}`, false},
		{"{\"key\":\"k\xff\",\"value\":{\"stringValue\":\"v\"}}", false},
	} {
		var tr JSONTranscoder
		tr.in = []byte(tt.attr + `]`)
		_, next, ok := tr.attribute(nil, 0, f)
		if ok != tt.take || ok && next != len(tt.attr) {
			t.Errorf("%s: taken %v, next %d; want %v", tt.attr, ok, next, tt.take)
		}
	}
}
