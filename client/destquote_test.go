package client

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// A value in double quotes may hold commas, with \" and \\ for a quote and a backslash; an
// unclosed quote is refused; a quote elsewhere is an ordinary character.
func TestParseDestQuoted(t *testing.T) {
	f := func(spec, key, want string) {
		t.Helper()
		c, err := ParseDest(spec, DefaultConfig())
		if err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		if got := c.Headers[key]; got != want {
			t.Errorf("%s: header %s = %q, want %q", spec, key, got, want)
		}
	}
	f(`name=a,header="authorization:Basic a,b",endpoint=h:1`, "authorization", "Basic a,b")
	f(`name=a,endpoint=h:1,header= "x-k:a, b,c" `, "x-k", "a, b,c")
	f(`name=a,endpoint=h:1,header="x-k:say \"hi\", \\o/"`, "x-k", `say "hi", \o/`)
	f(`name=a,endpoint=h:1,header=x-k:a"b`, "x-k", `a"b`)
	f(`name=a,endpoint=h:1,header="x-k:a=b,c=d",header=x-o:v`, "x-k", "a=b,c=d")
	c, err := ParseDest(`name="a",endpoint=h:1,signals=traces,logs,match-header="x-tenant:acme|a,b"`, DefaultConfig())
	if err != nil || c.Name != "a" || c.MatchHeader.Header != "x-tenant" || !slices.Equal(c.MatchHeader.Values, []string{"acme", "a,b"}) {
		t.Errorf("quoted name and match-header: %+v, %v", c, err)
	}

	for spec, want := range map[string]string{
		`name=a,endpoint=h:1,header="x-k:a,b`:        "no closing quote",
		`name=a,endpoint=h:1,header="x-k:a\",b`:      "no closing quote",
		`name=a,endpoint=h:1,header="x-k:a"b,mode=v`: "after a quoted value's closing quote",
	} {
		if _, err := ParseDest(spec, DefaultConfig()); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want %q", spec, err, want)
		}
	}
	if _, err := SplitDest(`name=a,header="k:v`); !errors.Is(err, ErrUnterminatedQuote) {
		t.Errorf("SplitDest: %v", err)
	}
	if got, want := RedactDest(`name=a,header="authorization:Basic s3,cret",mode=unary`), `name=a,header="authorization:<redacted>",mode=unary`; got != want {
		t.Errorf("RedactDest = %q, want %q", got, want)
	}
}
