package allocattr

import (
	"iter"
	"strings"
)

// Module is the import path prefix of otlpgate's own code.
const Module = "github.com/otlpgate/otlpgate/"

// Allocator returns the function that made an allocation, given the function names of its
// stack innermost first (inlined calls included, innermost first within a frame): the first
// one outside package runtime. own tells whether that function is otlpgate's. A stack made
// only of runtime frames (a goroutine's stack, the collector's work) is nobody's: fn is "" and
// own false.
func Allocator(funcs iter.Seq[string]) (fn string, own bool) {
	for name := range funcs {
		if strings.HasPrefix(name, "runtime.") {
			continue
		}
		return name, strings.HasPrefix(name, Module)
	}
	return "", false
}

// PackageOf returns the import path of a function name as the runtime spells it
// ("example.com/a/b.(*T).M.func1" is in "example.com/a/b").
func PackageOf(fn string) string {
	slash := strings.LastIndexByte(fn, '/')
	if dot := strings.IndexByte(fn[slash+1:], '.'); dot >= 0 {
		return fn[:slash+1+dot]
	}
	return fn
}
