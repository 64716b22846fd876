package main

import (
	"reflect"
	"testing"
)

func TestPoliciesFlag(t *testing.T) {
	var p policiesFlag
	for _, s := range []string{"old:-batch.min-gap=0", "new:", "lazy:-batch.eager=false  -batch.max-age=5ms", "before:gate=/tmp/otlpgate-main -batch.max-age=5ms"} {
		if err := p.Set(s); err != nil {
			t.Fatalf("Set(%q): %v", s, err)
		}
	}
	want := policiesFlag{
		{Name: "old", Args: []string{"-batch.min-gap=0"}},
		{Name: "new", Args: []string{}},
		{Name: "lazy", Args: []string{"-batch.eager=false", "-batch.max-age=5ms"}},
		{Name: "before", Args: []string{"-batch.max-age=5ms"}, Gate: "/tmp/otlpgate-main"},
	}
	if !reflect.DeepEqual(p, want) {
		t.Fatalf("policies %+v, want %+v", p, want)
	}
	for _, bad := range []string{"-batch.eager=false", ":-x"} {
		if err := p.Set(bad); err == nil {
			t.Errorf("Set(%q) accepted", bad)
		}
	}
}
