//go:build !race

package allocattr

import (
	"fmt"
	"runtime"
	"slices"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/pool"
)

// Every allocation of this test binary is recorded, from its package initialisers on.
var _ = func() int { runtime.MemProfileRate = 1; return 0 }()

func TestAllocator(t *testing.T) {
	const (
		admit   = "github.com/otlpgate/otlpgate/fastpath.(*Pipeline).admit"
		export  = "github.com/otlpgate/otlpgate/server/grpc.(*Server).v1Export.func1"
		call    = "github.com/otlpgate/otlpgate/client.(*worker).call"
		newBuf  = "github.com/otlpgate/otlpgate/pool.init.func1"
		handle  = "google.golang.org/grpc.(*Server).handleStream"
		invoke  = "google.golang.org/grpc.(*ClientConn).Invoke"
		fasthtp = "github.com/valyala/fasthttp.(*Server).serveConn"
	)
	f := func(stack []string, wantFn string, wantOwn bool) {
		t.Helper()
		fn, own := Allocator(slices.Values(stack))
		if fn != wantFn || own != wantOwn {
			t.Errorf("Allocator(%q) = %q, %v; want %q, %v", stack, fn, own, wantFn, wantOwn)
		}
	}
	// Our code allocating through the runtime.
	f([]string{"runtime.makeslice", admit, handle}, admit, true)
	// A standard library call our code makes allocates for us.
	f([]string{"runtime.mallocgc", "runtime.newobject", "context.withCancel", "context.WithDeadlineCause", "context.WithDeadline", "context.WithTimeout", call, invoke},
		call, true)
	f([]string{"runtime.mallocgc", "runtime.rawstring", "runtime.concatstrings", "fmt.(*pp).doPrintf", "fmt.Sprintf", admit}, admit, true)
	f([]string{"runtime.mallocgc", "strconv.formatBits", "strconv.Itoa", "main.run", "main.main", "runtime.main"}, "main.run", true)
	// The same call made by grpc-go is grpc-go's, although our code called grpc-go.
	f([]string{"runtime.mallocgc", "context.WithCancel", handle, export}, handle, false)
	f([]string{"runtime.mallocgc", "runtime.newobject", "context.WithTimeout", invoke, call}, invoke, false)
	// A module between our code and the allocation takes it.
	f([]string{"runtime.makeslice", handle, export}, handle, false)
	f([]string{"runtime.makeslice", "bufio.NewReaderSize", fasthtp, "github.com/otlpgate/otlpgate/server/http.(*Server).Serve"}, fasthtp, false)
	// sync.Pool calls our New: the allocation is New's, ours.
	f([]string{"runtime.makeslice", newBuf, "sync.(*Pool).Get", "github.com/otlpgate/otlpgate/pool.GetBytes", admit}, newBuf, true)
	// sync.Pool's own per-P array, made at the first Get after each collection, is nobody's.
	f([]string{"runtime.mallocgc", "runtime.makeslice", "sync.(*Pool).pinSlow", "sync.(*Pool).pin", "sync.(*Pool).Get", "github.com/otlpgate/otlpgate/pool.GetBytes", admit},
		"github.com/otlpgate/otlpgate/pool.GetBytes", false)
	// So is its per-P queue, started at the first Put after each collection.
	f([]string{"runtime.mallocgc", "runtime.newobject", "sync.(*poolChain).pushHead", "sync.(*Pool).Put", "github.com/otlpgate/otlpgate/pool.PutBytes", admit},
		"github.com/otlpgate/otlpgate/pool.PutBytes", false)
	// So is a wait-queue entry of the runtime, under a contended lock.
	f([]string{"runtime.mallocgc", "runtime.newobject", "runtime.acquireSudog", "runtime.semacquire1", "internal/sync.runtime_SemacquireMutex",
		"internal/sync.(*Mutex).lockSlow", "sync.(*Mutex).Lock", admit}, admit, false)
	// The same entry in a heap profile that runtime/pprof wrote: it leaves out the runtime's
	// frames at the top of a stack, so the semaphore's entry point from sync is innermost.
	f([]string{"internal/sync.runtime_SemacquireMutex", "internal/sync.(*Mutex).lockSlow", "sync.(*Mutex).Lock", admit}, admit, false)
	f([]string{"sync.runtime_SemacquireWaitGroup", "sync.(*WaitGroup).Wait", admit}, admit, false)
	// Stacks of the runtime and the standard library alone are nobody's.
	f([]string{"runtime.malg", "runtime.newproc1"}, "", false)
	f([]string{"runtime.mallocgc", "time.NewTimer", "net/http.(*persistConn).readLoop"}, "time.NewTimer", false)
	// The runtime's type-switch cache, grown under our function, is the runtime's.
	f([]string{"runtime.mallocgc", "runtime.buildInterfaceSwitchCache", "runtime.interfaceSwitch", "github.com/otlpgate/otlpgate/codec.(*grpcCodec).Unmarshal"},
		"github.com/otlpgate/otlpgate/codec.(*grpcCodec).Unmarshal", false)
	f([]string{"runtime.mallocgc", "runtime.buildTypeAssertCache", "runtime.typeAssert", "github.com/otlpgate/otlpgate/client.(*frame).marshal"},
		"github.com/otlpgate/otlpgate/client.(*frame).marshal", false)
	f(nil, "", false)
	// A module whose path merely starts like ours is not ours.
	f([]string{"github.com/otlpgate/otlpgateway.F"}, "github.com/otlpgate/otlpgateway.F", false)
	// golang.org/x is a module, not the standard library; the standard library's vendored copy
	// of it is the standard library.
	f([]string{"runtime.makeslice", "golang.org/x/net/http2.(*Framer).readMetaFrame", call}, "golang.org/x/net/http2.(*Framer).readMetaFrame", false)
	f([]string{"runtime.makeslice", "vendor/golang.org/x/net/http2/hpack.(*Decoder).Write", call}, call, true)
}

func TestStd(t *testing.T) {
	for pkg, want := range map[string]bool{
		"runtime":                             true,
		"context":                             true,
		"net/http":                            true,
		"internal/poll":                       true,
		"vendor/golang.org/x/net/http2/hpack": true,
		"type:":                               true, // the compiler's type:.eq.T functions
		"main":                                false,
		"golang.org/x/net/http2":              false,
		"google.golang.org/grpc/internal/transport": false,
		"github.com/otlpgate/otlpgate/client":       false,
	} {
		if got := Std(pkg); got != want {
			t.Errorf("Std(%q) = %v, want %v", pkg, got, want)
		}
	}
}

func TestPackageOf(t *testing.T) {
	for fn, want := range map[string]string{
		"github.com/otlpgate/otlpgate/client.(*Dest).openStream":     "github.com/otlpgate/otlpgate/client",
		"github.com/otlpgate/otlpgate/client.(*lane).run.func1":      "github.com/otlpgate/otlpgate/client",
		"github.com/otlpgate/otlpgate/internal/allocattr_test.TestX": "github.com/otlpgate/otlpgate/internal/allocattr_test",
		"context.WithCancel": "context",
		"google.golang.org/grpc/internal/transport.(*http2Client).NewStream": "google.golang.org/grpc/internal/transport",
		"main.main": "main",
	} {
		if got := PackageOf(fn); got != want {
			t.Errorf("PackageOf(%q) = %q, want %q", fn, got, want)
		}
	}
}

var sink []any

// The recorder counts every allocation of the phase, exactly, and puts each in its class:
// pool.GetBytes with empty tiers allocates two objects (the slice header it returns a pointer
// to, and the array) in otlpgate's pool package; protowire, another module, allocates its
// own; the test's own make, and the string fmt makes for the test, are the harness's.
func TestRecorderCounts(t *testing.T) {
	const n = 10
	rec := New()
	defer rec.Close()
	rec.Start()
	for i := range n {
		sink = append(sink, pool.GetBytes(3000))                                             // a tier no other test puts back into: every call allocates
		sink = append(sink, protowire.AppendString(nil, "a string of 32 bytes, not tiny..")) // a slice grown by protowire
		sink = append(sink, fmt.Sprintf("%032d", i))                                         // a string of 32 bytes, made by fmt for the test
	}
	sink = append(sink, make([]byte, 64))
	rep := rec.Stop()
	sink = nil
	if rep.Own != 2*n {
		t.Errorf("own %d objects, want %d\n%s", rep.Own, 2*n, rep.OwnStacks())
	}
	for _, s := range rep.OwnSites {
		if s.Fn != "github.com/otlpgate/otlpgate/pool.GetBytes" {
			t.Errorf("own site %s, want pool.GetBytes only", s.Fn)
		}
	}
	if rep.Other < n {
		t.Errorf("other %d objects, want at least the %d slices protowire made\n%s", rep.Other, n, rep.Summary(10))
	}
	if rep.Harness < n+1 {
		t.Errorf("harness %d objects, want at least the test's own make and the %d strings fmt made for it\n%s", rep.Harness, n, rep.Summary(10))
	}
	if s := rep.OwnStacks(); len(rep.OwnSites) > 0 && !containsAll(s, "pool.GetBytes", "bytes.go:", "TestRecorderCounts") {
		t.Errorf("own stacks do not name the allocating frames:\n%s", s)
	}
}

// A phase that allocates nothing of its own reports nothing own, although the collector ran
// at both ends. Four buffers go back before it starts: a collection leaves a pool's item in
// the private slot of the P that put it, out of reach of the others, and the test's goroutine
// may run on another P afterwards; the rest stay in reach.
func TestRecorderQuiet(t *testing.T) {
	rec := New()
	defer rec.Close()
	var warm [4]*[]byte
	for i := range warm {
		warm[i] = pool.GetBytes(100)
	}
	for _, b := range warm {
		pool.PutBytes(b)
	}
	rec.Start()
	for range 100 {
		b := pool.GetBytes(100)
		*b = append(*b, "no growth"...)
		pool.PutBytes(b)
	}
	rep := rec.Stop()
	if rep.Own != 0 {
		t.Fatalf("own %d objects, want 0\n%s", rep.Own, rep.OwnStacks())
	}
}

// Lap splits a measurement into phases that count apart: what one phase allocated is not
// counted again in the next.
func TestRecorderLap(t *testing.T) {
	rec := New()
	defer rec.Close()
	rec.Start()
	for range 7 {
		sink = append(sink, pool.GetBytes(200<<10)) // a tier no other test puts back into: every call allocates
	}
	first := rec.Lap()
	for range 3 {
		sink = append(sink, pool.GetBytes(200<<10))
	}
	second := rec.Stop()
	sink = nil
	// pool.GetBytes allocates the slice and the pointer that holds it: two objects a call.
	if first.Own != 14 || second.Own != 6 {
		t.Errorf("own %d then %d objects, want 14 then 6\n%s\n%s", first.Own, second.Own, first.OwnStacks(), second.OwnStacks())
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !contains(s, sub) {
			return false
		}
	}
	return true
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
