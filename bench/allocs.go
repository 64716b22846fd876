package bench

import (
	"fmt"
	"net/http"
	"time"

	"github.com/google/pprof/profile"

	"github.com/otlpgate/otlpgate/internal/allocattr"
)

// AllocSplit is where the allocations of a measured phase were made, from the allocation
// profile's samples: by otlpgate's own code, or inside everything else (grpc-go, x/net, the
// standard library and the runtime). By default the profile samples one allocation per 512 KiB
// on average (runtime.MemProfileRate) and pprof scales the samples back up, so the split is an
// estimate; a process run with GODEBUG=memprofilerate=1 records every allocation, and the split
// is a count. Total comes from the exact malloc counter when the caller has it.
type AllocSplit struct {
	Own, Other float64 // allocated objects, estimated from the profile
}

// OwnShare is the fraction of the allocations made by otlpgate's own code; 0 with no samples.
func (s AllocSplit) OwnShare() float64 {
	if s.Own+s.Other == 0 {
		return 0
	}
	return s.Own / (s.Own + s.Other)
}

// FetchAllocProfile reads the allocation profile of the process serving /debug/pprof/ at base
// (http://host:port).
func FetchAllocProfile(base string) (*profile.Profile, error) {
	c := http.Client{Timeout: 30 * time.Second}
	resp, err := c.Get(base + "/debug/pprof/allocs")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("bench: %s/debug/pprof/allocs: %s", base, resp.Status)
	}
	return profile.Parse(resp.Body)
}

// SplitAllocs attributes the allocations made between the profiles before and after (both
// cumulative, as /debug/pprof/allocs serves them) to the frame that made each: the innermost
// frame outside package runtime, since runtime.makeslice, growslice, newobject and the like
// allocate for their caller. Stacks made only of runtime frames (goroutine stacks, the GC)
// count as Other.
func SplitAllocs(before, after *profile.Profile) (AllocSplit, error) {
	idx := -1
	for i, st := range after.SampleType {
		if st.Type == "alloc_objects" {
			idx = i
		}
	}
	if idx < 0 {
		return AllocSplit{}, fmt.Errorf("bench: the profile has no alloc_objects samples")
	}
	var s AllocSplit
	add := func(p *profile.Profile, sign float64) {
		for _, smp := range p.Sample {
			n := sign * float64(smp.Value[idx])
			if allocatingFrame(smp.Location) {
				s.Own += n
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
	return s, nil
}

// allocatingFrame reports whether the allocation of a stack (leaf first) was made by otlpgate's
// own code, as allocattr.Allocator decides for the tests' exact counts.
func allocatingFrame(locs []*profile.Location) bool {
	_, own := allocattr.Allocator(func(yield func(string) bool) {
		for _, loc := range locs {
			// Inlined calls come innermost first within a location, as the stack does.
			for _, ln := range loc.Line {
				if ln.Function != nil && !yield(ln.Function.Name) {
					return
				}
			}
		}
	})
	return own
}
