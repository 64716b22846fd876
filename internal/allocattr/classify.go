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
// own false. So is the runtime's cache of a type switch or type assertion, which the runtime
// grows on its own schedule (at random, after a miss, the less often the larger it is) under whatever function
// holds the switch: fn names that function and own is false.
func Allocator(funcs iter.Seq[string]) (fn string, own bool) {
	cache := false
	for name := range funcs {
		if strings.HasPrefix(name, "runtime.") {
			cache = cache || runtimeCaches[name]
			continue
		}
		return name, !cache && strings.HasPrefix(name, Module)
	}
	return "", false
}

// runtimeCaches are the runtime functions that fill a call site's type-switch or
// type-assertion cache.
var runtimeCaches = map[string]bool{
	"runtime.buildInterfaceSwitchCache": true,
	"runtime.buildTypeAssertCache":      true,
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
