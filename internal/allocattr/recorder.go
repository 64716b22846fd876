package allocattr

import (
	"cmp"
	"fmt"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strings"
)

// Recorder counts the allocations of one phase of a test, by the stack that made them.
//
// New turns the collector off; Start collects garbage once (the runtime publishes an
// allocation in its records only once a collection has finished after it) and copies the
// cumulative records; Stop collects again, copies the records again, turns the collector back
// on and diffs. The collector is off from New on so that what is counted depends on the code,
// not on when a collection happened to empty the sync.Pools the code recycles through: a pool
// refill after a collection costs per collection, not per request. Both record buffers are made
// before the first copy, so the copies themselves add nothing to the phase.
//
// Allocations whose function (Allocator) is in a harness package (this one, the package that
// called New, the test binary's generated main, and any named there) belong to the
// measurement: the load it sends, the sink it records into, the standard library calls they
// make. They are counted apart, neither own nor other.
type Recorder struct {
	harness   []string
	before    []runtime.MemProfileRecord
	after     []runtime.MemProfileRecord
	gcPercent int
	closed    bool
	running   bool
	tiny      [1]metrics.Sample
	tiny0     uint64
}

// tinyMetric counts the tiny allocations the runtime folded into an open 16-byte block.
const tinyMetric = "/gc/heap/tiny/allocs:objects"

// headroom is how many allocation sites (stack and size) a phase may add to the records before
// Stop has to grow its buffer; growing is counted as the harness's.
const headroom = 16 << 10

// New prepares a measurement and turns the collector off until Close: a warm-up that runs
// between New and Start stocks the sync.Pools the measured code recycles through, and no
// collection empties them before the measurement begins (a collection sets a pool's items
// aside, where Get still finds them; the next one drops them). harness names further packages
// (import paths) whose allocations are the measurement's own. The process must run with
// runtime.MemProfileRate == 1: New panics otherwise, since a sampled profile cannot prove a
// count.
func New(harness ...string) *Recorder {
	if runtime.MemProfileRate != 1 {
		panic(fmt.Sprintf("allocattr: runtime.MemProfileRate is %d: the test binary must set it to 1 before it allocates", runtime.MemProfileRate))
	}
	r := &Recorder{}
	for skip := range 2 { // this package, then New's caller
		if pc, _, _, ok := runtime.Caller(skip); ok {
			if f := runtime.FuncForPC(pc); f != nil {
				r.harness = append(r.harness, PackageOf(f.Name()))
			}
		}
	}
	// A test binary's main package is the one the go tool generates to run the tests.
	r.harness = append(r.harness, "main")
	r.harness = append(r.harness, harness...)
	r.gcPercent = debug.SetGCPercent(-1)
	return r
}

// Start begins a measured phase: it collects garbage once, so that the runtime publishes
// every allocation made so far, and copies the cumulative records. A Recorder measures one
// phase at a time, as often as needed.
func (r *Recorder) Start() {
	if r.running {
		panic("allocattr: Start called twice")
	}
	if r.closed {
		panic("allocattr: Start after Close")
	}
	n, _ := runtime.MemProfile(nil, true)
	r.before = make([]runtime.MemProfileRecord, n+headroom)
	r.after = make([]runtime.MemProfileRecord, n+2*headroom)
	r.before = snapshot(r.before)
	r.tiny[0].Name = tinyMetric
	metrics.Read(r.tiny[:])
	r.tiny0 = r.tiny[0].Value.Uint64()
	r.running = true
}

// snapshot collects garbage and copies the cumulative records into buf, growing it (then
// collecting again, so that the growth is recorded before the copy) when they do not fit.
func snapshot(buf []runtime.MemProfileRecord) []runtime.MemProfileRecord {
	for {
		runtime.GC()
		n, ok := runtime.MemProfile(buf[:cap(buf)], true)
		if ok {
			return buf[:n]
		}
		buf = make([]runtime.MemProfileRecord, n+headroom)
	}
}

// Site is one stack that allocated during the phase.
type Site struct {
	Fn      string          // the allocating function (Allocator)
	Objects int64           // objects allocated during the phase
	Bytes   int64           // their bytes
	Frames  []runtime.Frame // innermost first; at most the 32 the runtime keeps per record
}

// Report is what a phase allocated, in objects.
type Report struct {
	Own, Other, Harness int64
	// Tiny is how many allocations the runtime folded into a 16-byte block another allocation
	// had opened, in the whole process: small pointer-free objects (short strings, escaped
	// scalars). The runtime records the allocation that opens a block, not those it folds in,
	// so these have no stack and are in none of the classes above.
	Tiny         int64
	OwnSites     []Site // most objects first
	HarnessSites []Site // most objects first
	OtherSites   []Site // most objects first
}

// Lap ends the phase as Stop does and begins the next one at once, from the same collection:
// consecutive phases see one collection between them, not two, so that sync.Pool items used
// in the last phase are still there in the next (two collections in a row drop every pooled
// item).
func (r *Recorder) Lap() Report {
	rep := r.Stop()
	r.before, r.after = r.after, r.before
	r.tiny0 = r.tiny[0].Value.Uint64()
	r.running = true
	return rep
}

// Stop ends the phase and attributes what it allocated. The collector stays off until Close.
func (r *Recorder) Stop() Report {
	if !r.running {
		panic("allocattr: Stop without Start")
	}
	r.running = false
	r.after = snapshot(r.after)
	metrics.Read(r.tiny[:])

	type count struct{ objects, bytes int64 }
	sum := func(recs []runtime.MemProfileRecord) map[[32]uintptr]count {
		m := make(map[[32]uintptr]count, len(recs))
		for i := range recs {
			c := m[recs[i].Stack0]
			c.objects += recs[i].AllocObjects
			c.bytes += recs[i].AllocBytes
			m[recs[i].Stack0] = c
		}
		return m
	}
	before, after := sum(r.before), sum(r.after)
	rep := Report{Tiny: int64(r.tiny[0].Value.Uint64() - r.tiny0)}
	for stk, a := range after {
		b := before[stk]
		if a.objects <= b.objects {
			continue
		}
		site := Site{Objects: a.objects - b.objects, Bytes: a.bytes - b.bytes, Frames: frames(stk)}
		var own bool
		site.Fn, own = Allocator(func(yield func(string) bool) {
			for _, f := range site.Frames {
				if !yield(f.Function) {
					return
				}
			}
		})
		switch {
		case site.Fn != "" && slices.Contains(r.harness, PackageOf(site.Fn)):
			rep.Harness += site.Objects
			rep.HarnessSites = append(rep.HarnessSites, site)
		case own:
			rep.Own += site.Objects
			rep.OwnSites = append(rep.OwnSites, site)
		default:
			rep.Other += site.Objects
			rep.OtherSites = append(rep.OtherSites, site)
		}
	}
	for _, s := range [][]Site{rep.OwnSites, rep.HarnessSites, rep.OtherSites} {
		slices.SortFunc(s, func(a, b Site) int {
			return cmp.Or(cmp.Compare(b.Objects, a.Objects), cmp.Compare(a.Fn, b.Fn))
		})
	}
	return rep
}

// frames resolves a record's stack, inlined calls included.
func frames(stk [32]uintptr) []runtime.Frame {
	n := 0
	for n < len(stk) && stk[n] != 0 {
		n++
	}
	var out []runtime.Frame
	fs := runtime.CallersFrames(stk[:n])
	for {
		f, more := fs.Next()
		out = append(out, f)
		if !more {
			return out
		}
	}
}

// OwnStacks formats every own site with its stack, for a failing test to print.
func (rep Report) OwnStacks() string {
	return formatSites(rep.OwnSites, len(rep.OwnSites))
}

// Summary is one line of totals and, below it, the top sites of each class.
func (rep Report) Summary(top int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "own %d, other %d, harness %d objects; %d tiny ones unattributed\n", rep.Own, rep.Other, rep.Harness, rep.Tiny)
	for _, c := range []struct {
		name  string
		sites []Site
	}{{"own", rep.OwnSites}, {"other", rep.OtherSites}, {"harness", rep.HarnessSites}} {
		for i, s := range c.sites {
			if i == top {
				break
			}
			fmt.Fprintf(&b, "  %s %6d objects %8d bytes  %s\n", c.name, s.Objects, s.Bytes, s.Fn)
		}
	}
	return b.String()
}

func formatSites(sites []Site, top int) string {
	var b strings.Builder
	for i, s := range sites {
		if i == top {
			break
		}
		fmt.Fprintf(&b, "%d objects (%d bytes) by %s\n", s.Objects, s.Bytes, s.Fn)
		for _, f := range s.Frames {
			fmt.Fprintf(&b, "\t%s\n\t\t%s:%d\n", f.Function, f.File, f.Line)
		}
	}
	return b.String()
}

// Close turns the collector back on, as it was before New.
func (r *Recorder) Close() {
	if !r.closed {
		r.closed = true
		debug.SetGCPercent(r.gcPercent)
	}
}
