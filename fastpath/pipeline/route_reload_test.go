package pipeline

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/otlpgate/otlpgate/fastpath"
)

// A reload swaps the destinations and their resource router together while requests are
// being split: a destination reordered, added or removed keeps the resources its match= names,
// and every request goes whole by one set, each of its resources exactly once to the
// destination of that set that takes it, never to another set's destination at the position
// the router numbered it by.
func TestSetDestinationsRoutesWhileSplitting(t *testing.T) {
	// The sets a reload cycles through: each destination is a kind (co takes service.name
	// co-*, cart takes cart-*, rest the rest, all takes everything without a router).
	shapes := [][]string{{"co", "rest"}, {"rest", "co"}, {"co", "cart", "rest"}, {"all"}}
	rules := map[string]string{"co": "resource:service.name=co-*", "cart": "resource:service.name=cart-*", "rest": ""}
	type dest struct {
		*recorder
		kind string
		set  int
	}
	var mu sync.Mutex
	var all []dest
	build := func(set int) ([]Destination, Routes) {
		var ds []Destination
		var rs []string
		for _, k := range shapes[set%len(shapes)] {
			r := &recorder{name: fmt.Sprintf("%s-%d", k, set), ok: true}
			mu.Lock()
			all = append(all, dest{r, k, set})
			mu.Unlock()
			ds = append(ds, r)
			rs = append(rs, rules[k])
		}
		var routes Routes
		if shapes[set%len(shapes)][0] != "all" {
			routes.Resources = newRouter(t, rs...)
		}
		return ds, routes
	}
	cfg := testConfig()
	ds, routes := build(0)
	cfg.Router = routes.Resources
	p := newTestPipeline(t, cfg, ds...)

	const admitters, requests, maxSets = 2, 600, 2000
	var wg sync.WaitGroup
	done := make(chan struct{})
	for g := range admitters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range requests {
				id := fmt.Sprintf("%d.%d", g, i)
				svcs := []string{"co-" + id, "cart-" + id, "x-" + id}
				if i%4 == 0 {
					svcs = svcs[:1] // all one way: admitted as it came, unsplit
				}
				req := routedRequest(t, fastpath.Traces, 1, svcs...)
				if _, err := p.Admit(Request{Signal: fastpath.Traces, Body: req, Items: len(svcs)}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	go func() { wg.Wait(); close(done) }()
	// Reloads go on while the requests are admitted (at least a few, at most maxSets).
	for set := 1; set <= maxSets; set++ {
		ds, routes := build(set)
		if err := p.SetDestinationsRoutes(ds, routes); err != nil {
			t.Fatal(err)
		}
		if set >= len(shapes) {
			select {
			case <-done:
				set = maxSets
			default:
			}
		}
	}
	<-done
	p.Flush()

	// Where each resource went: the set and the kind of the destination that got it.
	type got struct {
		set  int
		kind string
	}
	seen := map[string][]got{}
	for _, d := range all {
		for _, b := range d.batches() {
			names, _ := services(t, fastpath.Traces, b.body)
			for _, n := range names {
				seen[n] = append(seen[n], got{d.set, d.kind})
			}
		}
	}
	takes := func(shape []string, svc string) string {
		kind, _, _ := strings.Cut(svc, "-")
		for _, k := range shape {
			if k == kind || k == "all" {
				return k
			}
		}
		return "rest"
	}
	for g := range admitters {
		for i := range requests {
			id := fmt.Sprintf("%d.%d", g, i)
			svcs := []string{"co-" + id, "cart-" + id, "x-" + id}
			if i%4 == 0 {
				svcs = svcs[:1]
			}
			set := -1
			for _, s := range svcs {
				gs := seen[s]
				if len(gs) != 1 {
					t.Fatalf("resource %s arrived %d times (%v), want once", s, len(gs), gs)
				}
				if set >= 0 && gs[0].set != set {
					t.Fatalf("request %s went to sets %d and %d: split across a reload", id, set, gs[0].set)
				}
				set = gs[0].set
				if want := takes(shapes[set%len(shapes)], s); gs[0].kind != want {
					t.Fatalf("resource %s went to %s of set %d %v, whose %s takes it", s, gs[0].kind, set, shapes[set%len(shapes)], want)
				}
			}
		}
	}
	if q := p.QueuedBytes(); q != 0 {
		t.Errorf("%d bytes still queued", q)
	}
}
