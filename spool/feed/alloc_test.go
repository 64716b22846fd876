//go:build !race

package feed

import (
	"testing"

	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/testkit"
	"github.com/otlpgate/otlpgate/internal/ziptest"
	"github.com/otlpgate/otlpgate/spool"
)

// gzipDiscard is testkit.Discard sending gzip pass-through batches as they are.
type gzipDiscard struct{ testkit.Discard }

func (*gzipDiscard) PassThrough() pipeline.Encoding { return pipeline.EncodingGzip }

// TestFeederLoopAllocs: one turn of the feeder loop (read the record just appended, from the
// tail, into a batch, hand it over, finish it) allocates nothing in steady state, for plain
// records and for compressed ones that the destination sends as they are (they join a
// pass-through batch as spooled, uninflated). sync.Pool and the race detector do not mix,
// hence !race.
func TestFeederLoopAllocs(t *testing.T) {
	plain := entry(300, 3)
	for _, c := range []struct {
		name string
		enc  pipeline.Encoding
		d    interface {
			pipeline.Destination
			Items() int64
		}
		rec []byte
	}{
		{"plain", pipeline.EncodingNone, &testkit.Discard{}, rec(1, 300)},
		{"gzip", pipeline.EncodingGzip, &gzipDiscard{}, ziptest.Gzip(t, plain)},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := spool.DefaultConfig()
			cfg.Dir, cfg.Sync, cfg.MaxBytes, cfg.Encoded = "/spool", spool.SyncNone, 1<<30, true // 64 MiB segments: no rotation
			s, err := spool.Open(cfg, spool.NewCrashFS(), []string{"d"})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			// The destination delivers every batch at once, so the feeder loop runs without a goroutine.
			f, err := New(feedConfig(), s.Reader("d"), c.d, nil)
			if err != nil {
				t.Fatal(err)
			}
			inflated := testkit.Counter(t, "otlpgate_spool_inflated_records_total")
			turn := func() {
				if _, err := s.Append(spool.Record{Items: 3, Encoding: uint8(c.enc), Plain: uint32(len(plain)), Payload: c.rec}); err != nil {
					t.Fatal(err)
				}
				if _, err := f.fill(); err != spool.ErrEmpty {
					t.Fatalf("fill: %v, want ErrEmpty", err)
				}
				if !f.send() {
					t.Fatal("send gave up")
				}
			}
			for range 100 {
				turn()
			}
			if got := testing.AllocsPerRun(1000, turn); got != 0 {
				t.Fatalf("feeder loop: %v allocs/turn, want 0", got)
			}
			if c.d.Items() != 3*(100+1001) || f.HeldBytes() != 0 || s.Reader("d").Unfinished() != 0 ||
				testkit.Counter(t, "otlpgate_spool_inflated_records_total") != inflated {
				t.Fatalf("delivered %d items, %d bytes held, %d unfinished; want %d, 0, 0, and no record inflated",
					c.d.Items(), f.HeldBytes(), s.Reader("d").Unfinished(), 3*1101)
			}
		})
	}
}

// BenchmarkFeederLoop measures one append and its delivery through the feeder.
func BenchmarkFeederLoop(b *testing.B) {
	fs := spool.NewCrashFS()
	c := spool.DefaultConfig()
	c.Dir, c.Sync, c.MaxBytes = "/spool", spool.SyncNone, 1<<30
	s, err := spool.Open(c, fs, []string{"d"})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	f, err := New(feedConfig(), s.Reader("d"), &testkit.Discard{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	p := rec(1, 300)
	b.ReportAllocs()
	b.SetBytes(int64(len(p)))
	for b.Loop() {
		if _, err := s.Append(spool.Record{Items: 3, Payload: p}); err != nil {
			b.Fatal(err)
		}
		_, _ = f.fill()
		f.send()
	}
}
