package allocattr

import (
	"iter"
	"strings"
)

// Module is the import path prefix of otlpgate's own code.
const Module = "github.com/otlpgate/otlpgate/"

// Allocator returns the function an allocation is charged to, given the function names of its
// stack innermost first (inlined calls included, innermost first within a frame), and whether
// that function is otlpgate's (Owned).
//
// The rule is strict (issue 24): the runtime and the standard library allocate for their
// caller, so an allocation is charged to the innermost frame outside both. A context.WithTimeout,
// an fmt.Sprintf or a strconv.Itoa that otlpgate's code calls is otlpgate's allocation; the same
// call made by grpc-go is grpc-go's; a sync.Pool's New is whatever function New is. When every
// frame is the runtime's or the standard library's (a goroutine's stack, the collector's work,
// a goroutine of net/http), fn is the innermost frame outside the runtime ("" when there is
// none) and own is false.
//
// Bookkeeping the runtime and sync do on their own schedule is nobody's, whoever's function
// is on the stack: the cache of a type switch or type assertion, which the runtime grows at
// random after a miss (the less often the larger it is); a sync.Pool's per-P array, which a
// pool makes at its first Get after each collection, once per pool and collection whatever
// the traffic; and a pool's per-P queue, which it starts (8 items) at the first Put after each
// collection and doubles when a P holds more; and the runtime's wait-queue entries (sudogs),
// which a contended lock or a blocked channel operation takes from a per-P cache that each
// collection empties. fn then names the function that holds the switch, calls the pool or
// waits, and own is false.
func Allocator(funcs iter.Seq[string]) (fn string, own bool) {
	bookkeeping := false
	first := ""
	for name := range funcs {
		if bookkeepers[name] {
			bookkeeping = true
		}
		pkg := PackageOf(name)
		if pkg == "runtime" {
			continue
		}
		if Std(pkg) {
			if first == "" {
				first = name
			}
			continue
		}
		return name, !bookkeeping && Owned(pkg)
	}
	return first, false
}

// bookkeepers are the functions that allocate the runtime's and sync's own bookkeeping: a call
// site's type-switch or type-assertion cache, a sync.Pool's per-P array.
var bookkeepers = map[string]bool{
	"runtime.buildInterfaceSwitchCache": true,
	"runtime.buildTypeAssertCache":      true,
	"sync.(*Pool).pinSlow":              true,
	"sync.(*poolChain).pushHead":        true,
	"runtime.acquireSudog":              true,
	// The runtime's semaphores as sync calls them. A heap profile written by runtime/pprof
	// leaves out the runtime's frames at the top of each stack (acquireSudog among them), and
	// a sudog is the only object a semaphore acquire allocates.
	"internal/sync.runtime_SemacquireMutex": true,
	"sync.runtime_Semacquire":               true,
	"sync.runtime_SemacquireRWMutex":        true,
	"sync.runtime_SemacquireRWMutexR":       true,
	"sync.runtime_SemacquireWaitGroup":      true,
}

// Std reports whether pkg, an import path, is part of the Go distribution (the runtime, the
// standard library, its vendored golang.org/x copies under vendor/ and the compiler's
// generated functions such as "type:.eq.T"): whether its first path element has no dot, as
// every module path's does. The program's main package is the one exception: its path, "main",
// has no dot either, but it is the program's own code (otlpgate's cmd/otlpgate in a profile of
// otlpgate).
func Std(pkg string) bool {
	if pkg == "main" {
		return false
	}
	first, _, _ := strings.Cut(pkg, "/")
	return !strings.Contains(first, ".")
}

// Owned reports whether pkg, an import path, is otlpgate's: in this module, or the program's
// main package (cmd/otlpgate when the profile is otlpgate's).
func Owned(pkg string) bool {
	return pkg == "main" || strings.HasPrefix(pkg, Module)
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
