package bench

import (
	"cmp"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/pprof/profile"

	"github.com/otlpgate/otlpgate/internal/allocattr"
)

// AllocSplit is where the allocations of a measured phase were made, from the allocation
// profile's samples: by otlpgate's own code (standard library calls it makes included), or
// inside everything else (grpc-go, x/net, fasthttp, the runtime). By default the profile samples
// one allocation per 512 KiB on average (runtime.MemProfileRate) and pprof scales the samples
// back up, so the split is an estimate; a process run with GODEBUG=memprofilerate=1 records
// every allocation, and the split is a count. Total comes from the exact malloc counter when the
// caller has it.
type AllocSplit struct {
	Own, Other float64 // allocated objects, estimated from the profile
	// OwnSites is Own by the otlpgate function charged with it (allocattr.Allocator): where to
	// look when Own is not zero.
	OwnSites map[string]float64
	// OwnBytes is the bytes of each of OwnSites' objects.
	OwnBytes map[string]float64
	// OwnStacks is a stack (innermost first, up to eight functions) of each of OwnSites.
	OwnStacks map[string][]string
}

// OwnShare is the fraction of the allocations made by otlpgate's own code; 0 with no samples.
func (s AllocSplit) OwnShare() float64 {
	if s.Own+s.Other == 0 {
		return 0
	}
	return s.Own / (s.Own + s.Other)
}

// FetchAllocProfile reads the allocation profile of the process serving /debug/pprof/ at base
// (http://host:port), as of the moment it answers.
//
// The runtime publishes an allocation in its profile only once a collection has finished
// after it, so /debug/pprof/allocs serves the records as of the last collection: what the
// process allocated since (the accept of this very request among it) would be left out of a
// profile taken before a measured phase and charged to the phase by the one after. The heap
// profile, the same records, is read with gc=1, which collects first. The body is read to the
// end, so that the next fetch reuses the connection instead of making the process accept a new
// one.
func FetchAllocProfile(base string) (*profile.Profile, error) {
	resp, err := profileClient.Get(base + "/debug/pprof/heap?gc=1")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	defer io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("bench: %s/debug/pprof/heap: %s", base, resp.Status)
	}
	return profile.Parse(resp.Body)
}

// profileClient keeps its connections between fetches (http.DefaultTransport's pool).
var profileClient = &http.Client{Timeout: 30 * time.Second}

// SplitAllocs attributes the allocations made between the profiles before and after (both
// cumulative, as /debug/pprof/allocs serves them) by the strict rule of allocattr.Allocator:
// an allocation is otlpgate's own when the innermost frame of its stack outside the runtime
// and the standard library is otlpgate's (a context.WithTimeout or fmt.Sprintf that otlpgate
// calls is otlpgate's), and Other otherwise (grpc-go, x/net, fasthttp, and stacks made only of
// runtime and standard library frames: goroutine stacks, the collector, net/http's own work).
func SplitAllocs(before, after *profile.Profile) (AllocSplit, error) {
	idx, space := -1, -1
	for i, st := range after.SampleType {
		switch st.Type {
		case "alloc_objects":
			idx = i
		case "alloc_space":
			space = i
		}
	}
	if idx < 0 {
		return AllocSplit{}, fmt.Errorf("bench: the profile has no alloc_objects samples")
	}
	s := AllocSplit{OwnSites: map[string]float64{}, OwnBytes: map[string]float64{}, OwnStacks: map[string][]string{}}
	add := func(p *profile.Profile, sign float64) {
		for _, smp := range p.Sample {
			n := sign * float64(smp.Value[idx])
			if fn, own := allocatingFrame(smp.Location); own {
				s.Own += n
				s.OwnSites[fn] += n
				if space >= 0 {
					s.OwnBytes[fn] += sign * float64(smp.Value[space])
				}
				if _, ok := s.OwnStacks[fn]; !ok && sign > 0 {
					s.OwnStacks[fn] = stackNames(smp.Location, 8)
				}
			} else {
				s.Other += n
			}
		}
	}
	add(after, 1)
	if before != nil {
		add(before, -1)
	}
	s.Own, s.Other = max(s.Own, 0), max(s.Other, 0)
	for fn, n := range s.OwnSites {
		if n <= 0 {
			delete(s.OwnSites, fn)
		}
	}
	return s, nil
}

// allocatingFrame returns the function charged with the allocation of a stack (leaf first) and
// whether it is otlpgate's own, as allocattr.Allocator decides for the tests' exact counts.
func allocatingFrame(locs []*profile.Location) (fn string, own bool) {
	return allocattr.Allocator(func(yield func(string) bool) {
		for _, loc := range locs {
			// Inlined calls come innermost first within a location, as the stack does.
			for _, ln := range loc.Line {
				if ln.Function != nil && !yield(ln.Function.Name) {
					return
				}
			}
		}
	})
}

// writeOwnSites prints the top otlpgate functions charged with allocations in a measured phase
// of batches, per batch, most first: where to look when the own column is not zero.
func writeOwnSites(w io.Writer, name string, s AllocSplit, batches int) {
	fns := make([]string, 0, len(s.OwnSites))
	for fn := range s.OwnSites {
		fns = append(fns, fn)
	}
	slices.SortFunc(fns, func(a, b string) int { return cmp.Compare(s.OwnSites[b], s.OwnSites[a]) })
	fmt.Fprintf(w, "%s: own allocations %.4f per batch in all (%.0f objects, %d batches)\n", name, s.Own/float64(batches), s.Own, batches)
	for i, fn := range fns {
		if i == maxOwnSites {
			fmt.Fprintf(w, "%s: %d more otlpgate functions charged with own allocations\n", name, len(fns)-i)
			break
		}
		fmt.Fprintf(w, "%s: own allocations %.3f per batch (%.0f objects, %.0f bytes) by %s\n\t%s\n", name, s.OwnSites[fn]/float64(batches), s.OwnSites[fn], s.OwnBytes[fn], fn,
			strings.Join(s.OwnStacks[fn], " < "))
	}
}

// maxOwnSites is how many functions writeOwnSites names.
const maxOwnSites = 16

// stackNames is the function names of a stack, innermost first, at most n, from the innermost
// one outside the runtime's allocator (the caller of mallocgc, makeslice and the like) on.
func stackNames(locs []*profile.Location, n int) []string {
	var out []string
	for _, loc := range locs {
		for _, ln := range loc.Line {
			if ln.Function == nil || len(out) == n {
				continue
			}
			if name := ln.Function.Name; len(out) > 0 || !runtimeAllocator[name] {
				out = append(out, name)
			}
		}
	}
	return out
}

// runtimeAllocator is the runtime's functions that allocate for their caller.
var runtimeAllocator = map[string]bool{
	"runtime.mallocgc": true, "runtime.newobject": true, "runtime.makeslice": true, "runtime.growslice": true,
	"runtime.mallocgcSmallNoscan": true, "runtime.mallocgcSmallScanNoHeader": true, "runtime.mallocgcSmallScanHeader": true,
	"runtime.mallocgcLarge": true, "runtime.mallocgcTiny": true, "runtime.makemap_small": true, "runtime.makemap": true,
	"runtime.rawstring": true, "runtime.rawstringtmp": true, "runtime.rawbyteslice": true,
}
