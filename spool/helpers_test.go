package spool

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/otlpgate/otlpgate/pool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

const testDir = "/spool"

// testConfig keeps the background timers out of the way: tests sync and checkpoint by hand.
func testConfig(mode SyncMode) Config {
	c := DefaultConfig()
	c.Dir = testDir
	c.Sync = mode
	c.SyncInterval = time.Hour
	c.CheckpointInterval = time.Hour
	c.SegmentBytes = 1024
	c.MaxBytes = 1 << 20
	return c
}

// payload is record i: its id in front, padded to 100 bytes, so that eight fill a segment.
func payload(i int) []byte {
	p := fmt.Appendf(nil, "record-%04d-", i)
	for len(p) < 100 {
		p = append(p, byte('a'+i%26))
	}
	return p
}

func idOf(t *testing.T, p []byte) int {
	t.Helper()
	if len(p) != 100 || !bytes.HasPrefix(p, []byte("record-")) {
		t.Fatalf("not a test payload: %q", p)
	}
	id, err := strconv.Atoi(string(p[7:11]))
	if err != nil {
		t.Fatalf("bad id in %q", p)
	}
	if !bytes.Equal(p, payload(id)) {
		t.Fatalf("payload of record %d differs: %q", id, p)
	}
	return id
}

func mustOpen(t *testing.T, cfg Config, fs FS, dests ...string) *Spool {
	t.Helper()
	s, err := Open(cfg, fs, dests)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func appendN(t *testing.T, s *Spool, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if _, err := s.Append(Record{Signal: uint8(i % 3), Items: uint32(i), Payload: payload(i)}); err != nil {
			t.Fatalf("Append(%d): %v", i, err)
		}
	}
}

// drain reads every readable record of r, checking signal and items, finishing each if finish.
func drain(t *testing.T, r *Reader, finish bool) []int {
	t.Helper()
	var ids []int
	buf := pool.GetBytes(pool.MinSize)
	defer pool.PutBytes(buf)
	for range 100000 {
		*buf = (*buf)[:0]
		e, err := r.Next(buf)
		if errors.Is(err, ErrEmpty) {
			return ids
		}
		if err != nil {
			t.Fatalf("%s: Next: %v", r.Name(), err)
		}
		id := idOf(t, *buf)
		if e.Signal != uint8(id%3) || e.Items != uint32(id) || e.Size != 100 {
			t.Fatalf("record %d: entry %+v", id, e)
		}
		ids = append(ids, id)
		if finish {
			r.Finish(e.Pos)
		}
	}
	t.Fatal("reader never caught up")
	return nil
}

func reader(t *testing.T, s *Spool, name string) *Reader {
	t.Helper()
	r := s.Reader(name)
	if r == nil {
		t.Fatalf("no reader %q", name)
	}
	return r
}

func seq(from, to int) []int {
	var s []int
	for i := from; i < to; i++ {
		s = append(s, i)
	}
	return s
}

// abandon stops the spool's goroutines without syncing or checkpointing: a kill -9. It closes
// the open files, as the kernel does for a dead process, so that removed files give their space
// back.
func abandon(s *Spool) {
	s.mu.Lock()
	s.mu.closed = true
	s.mu.Unlock()
	close(s.done)
	s.wg.Wait()
	s.forgetInherited()
	for _, r := range s.releaseFiles() {
		r.close()
	}
}

// delta measures how much a counter moves while f runs.
func delta(c prometheus.Collector, f func()) float64 {
	before := testutil.ToFloat64(c)
	f()
	return testutil.ToFloat64(c) - before
}

func segFiles(t *testing.T, fs FS) []string {
	t.Helper()
	names, err := fs.ReadDir(testDir)
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(names, func(n string) bool {
		_, _, ok := parseSegmentName(n)
		return !ok
	})
}
