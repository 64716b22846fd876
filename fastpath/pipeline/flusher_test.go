package pipeline

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/tenant"
)

// An idle pipeline's flusher stops ticking once nothing is open or queued, and the next request
// wakes it: its batch is sealed at BatchMaxAge exactly (the signal's age timer), not before,
// and the flusher goes back to sleep at its next tick once the batch is delivered. The
// bubble's clock makes the bounds exact.
func TestFlusherSleepsWhenIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.BatchMaxAge = 8 * time.Millisecond
		tick := time.Second // the flusher's period: the drain rate's
		r := &recorder{name: "r", ok: true}
		p := newTestPipeline(t, cfg, r)
		synctest.Wait()
		if !p.asleep.Load() {
			// Nothing has been admitted yet: the first tick finds nothing to do.
			time.Sleep(tick)
			synctest.Wait()
			if !p.asleep.Load() {
				t.Fatal("the flusher of a pipeline that never had a request ticks on")
			}
		}
		for round := range 3 {
			p.Consume(Request{Signal: fastpath.Traces, Body: entry(10, 1), Items: 1})
			synctest.Wait()
			if p.asleep.Load() {
				t.Fatalf("round %d: the flusher sleeps with a batch open", round)
			}
			time.Sleep(cfg.BatchMaxAge - time.Nanosecond)
			synctest.Wait()
			if n := len(r.batches()); n != round {
				t.Fatalf("round %d: %d batches before the batch was BatchMaxAge old, want %d", round, n, round)
			}
			time.Sleep(time.Nanosecond)
			synctest.Wait()
			if got := r.batches(); len(got) != round+1 || got[round].items != 1 {
				t.Fatalf("round %d: batches %+v at the age, want the open batch sealed", round, got)
			}
			if q := p.QueuedBytes(); q != 0 {
				t.Fatalf("round %d: %d bytes queued after the destination finished", round, q)
			}
			// The next tick finds nothing open or queued.
			time.Sleep(tick)
			synctest.Wait()
			if !p.asleep.Load() {
				t.Fatalf("round %d: the flusher ticks on with nothing open or queued", round)
			}
			// A long silence: nothing runs, and the next round's age bound still holds.
			time.Sleep(time.Duration(round) * time.Hour)
		}
	})
}

// A flusher that slept catches the drain rate up as the seconds it slept would have decayed it
// (a quarter a second), so that RetryDelay after a quiet spell is what it was before the
// flusher slept through quiet spells.
func TestFlusherSleepDecaysRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.BatchMaxAge = 8 * time.Millisecond
		r := &recorder{name: "r", ok: true}
		p := newTestPipeline(t, cfg, r)
		p.rate.Store(1 << 20)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if !p.asleep.Load() {
			t.Fatal("the flusher ticks on with nothing open or queued")
		}
		if got := p.rate.Load(); got != 1<<20 {
			t.Fatalf("rate %d while asleep, want it untouched", got)
		}
		p.Consume(Request{Signal: fastpath.Traces, Body: entry(10, 1), Items: 1})
		synctest.Wait()
		want := int64(1 << 20)
		for range 10 {
			want = want * 3 / 4
		}
		if got := p.rate.Load(); got != want {
			t.Fatalf("rate %d after 10 s asleep, want %d (ten decays of 1MiB/s)", got, want)
		}
	})
}

// With Eager and idle destinations every request is sealed as it is admitted: nothing stays
// open for the flusher to age, so a gateway forwarding requests one at a time wakes no flusher
// goroutine and arms no ticker for them (two wake-ups per request before). A request that
// joins a batch left open (the gap since the last seal has not passed) still wakes it.
func TestFlusherSleepsThroughRequestsSealedAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.Eager = true
		cfg.BatchMinGap = 10 * time.Millisecond
		cfg.BatchMaxAge = 40 * time.Millisecond
		r := &recorder{name: "r", ok: true}
		p := newTestPipeline(t, cfg, r)
		time.Sleep(time.Second)
		synctest.Wait()
		if !p.asleep.Load() {
			t.Fatal("the flusher of a pipeline that never had a request ticks on")
		}
		for i := range 5 {
			p.Consume(Request{Signal: fastpath.Traces, Body: entry(10, 1), Items: 1})
			synctest.Wait()
			if got := r.batches(); len(got) != i+1 || got[i].items != 1 {
				t.Fatalf("request %d: batches %+v, want each request sealed as it is admitted", i, got)
			}
			if !p.asleep.Load() {
				t.Fatalf("request %d, sealed as it was admitted, woke the flusher", i)
			}
			time.Sleep(cfg.BatchMinGap) // past the gap: the next one is sealed at once too
		}
		// Within the gap the next request's batch stays open: the flusher wakes to age it.
		p.Consume(Request{Signal: fastpath.Traces, Body: entry(10, 1), Items: 1})
		p.Consume(Request{Signal: fastpath.Traces, Body: entry(10, 1), Items: 1})
		synctest.Wait()
		if p.asleep.Load() {
			t.Fatal("a batch left open within the gap did not wake the flusher")
		}
		time.Sleep(3 * cfg.BatchMinGap)
		synctest.Wait()
		if got := r.batches(); len(got) != 7 || got[6].items != 1 {
			t.Fatalf("batches %+v, want the request within the gap sealed on its own", got)
		}
	})
}

// A batch left open is sealed when it reaches BatchMaxAge, by its signal's timer, not at the
// next tick of a flusher that ticked every quarter of the age to find it (up to a quarter
// late, and four wake-ups per age of an open batch at low rates).
func TestAgeSealsAtAge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.BatchMaxAge = 40 * time.Millisecond
		r := &recorder{name: "r", ok: true}
		p := newTestPipeline(t, cfg, r)
		for round := range 3 {
			time.Sleep(time.Duration(round+1) * time.Millisecond) // off any tick of the flusher
			p.Consume(Request{Signal: fastpath.Traces, Body: entry(10, 1), Items: 1})
			time.Sleep(cfg.BatchMaxAge / 2)
			p.Consume(Request{Signal: fastpath.Traces, Body: entry(10, 1), Items: 1})
			time.Sleep(cfg.BatchMaxAge/2 - time.Nanosecond)
			synctest.Wait()
			if n := len(r.batches()); n != round {
				t.Fatalf("round %d: %d batches before the batch was BatchMaxAge old, want %d", round, n, round)
			}
			time.Sleep(time.Nanosecond)
			synctest.Wait()
			if got := r.batches(); len(got) != round+1 || got[round].items != 2 {
				t.Fatalf("round %d: batches %+v at the age, want the open batch of 2 sealed", round, got)
			}
		}
	})
}

// Each tenant's batch is sealed at its own age: the signal's one timer, set for the oldest open
// batch, is set again for the next oldest when it fires.
func TestAgeSealsEachTenantAtItsAge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ts := newTenants(t, tenant.Config{Headers: []string{"x-scope-orgid"}, Max: 10})
		cfg := testConfig()
		cfg.Tenants = ts
		cfg.BatchMaxAge = 40 * time.Millisecond
		r := &recorder{name: "r", ok: true}
		p := newTestPipeline(t, cfg, r)
		admit := func(name string) {
			if _, err := p.Admit(Request{Signal: fastpath.Traces, Origin: Origin{Tenant: mustLookup(t, ts, name)}, Body: entry(10, 1), Items: 1}); err != nil {
				t.Fatal(err)
			}
		}
		sealed := func() []string {
			synctest.Wait()
			var out []string
			for _, b := range r.batches() {
				out = append(out, b.tenant)
			}
			return out
		}
		time.Sleep(time.Millisecond)
		admit("a") // due at 41ms
		time.Sleep(19 * time.Millisecond)
		admit("b") // due at 60ms
		admit("a")
		for i, step := range []struct {
			sleep time.Duration
			want  string
		}{
			{21*time.Millisecond - time.Nanosecond, "[]"},
			{time.Nanosecond, "[a]"},
			{19*time.Millisecond - time.Nanosecond, "[a]"},
			{time.Nanosecond, "[a b]"},
		} {
			time.Sleep(step.sleep)
			if got := fmt.Sprint(sealed()); got != step.want {
				t.Fatalf("step %d: sealed %s, want %s", i, got, step.want)
			}
		}
	})
}
