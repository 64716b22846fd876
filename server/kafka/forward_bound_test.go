package kafka

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/otlpgate/otlpgate/internal/testkit"
	commonv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/common/v1"
)

// bigLabels are client labels with a 64 KiB software name: larger than the caps let a client
// set, so that forward's own bound is what is tested.
func bigLabels() []*commonv1.KeyValue {
	vals := rewriteLabels
	vals[2] = strings.Repeat("n", 64<<10)
	return labelAttrs(&vals)
}

// allocated returns the bytes f allocates, with the collector off so that nothing is missed.
func allocated(f func()) uint64 {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	f()
	runtime.ReadMemStats(&m1)
	return m1.TotalAlloc - m0.TotalAlloc
}

// Finding 1's push, with labels the caps would not let through: 2,000 empty resource entries
// (4 KB) cost neither a buffer of entries × labels (128 MiB here) nor a label set each. They
// are skipped before labelling; nothing is forwarded.
func TestForwardEmptyEntriesCostNothing(t *testing.T) {
	var payload []byte
	for range 2000 {
		payload = append(payload, field(1)...)
	}
	attrs := bigLabels()
	for _, fn := range []struct {
		name string
		f    func() (int, bool, error)
	}{
		{"rewrite", func() (int, bool, error) {
			return forward(&testkit.Recorder{}, payload, &plan{all: true}, attrs, 2<<20)
		}},
		{"decoded", func() (int, bool, error) {
			return forwardDecoded(&testkit.Recorder{}, payload, &plan{all: true}, attrs, 2<<20)
		}},
	} {
		var points int
		var sent bool
		var err error
		// Once to warm the pools.
		fn.f()
		alloc := allocated(func() { points, sent, err = fn.f() })
		if points != 0 || sent || err != nil {
			t.Fatalf("%s: points %d, sent %v, err %v", fn.name, points, sent, err)
		}
		if alloc > 1<<20 {
			t.Fatalf("%s: a %d-byte push of empty entries allocated %d bytes", fn.name, len(payload), alloc)
		}
	}
}

// Entries that each keep a metric are labelled each, but the body stops at its limit: a push of
// 2,000 tiny entries with 64 KiB labels (128 MiB labelled) is refused once it would pass 2 MiB,
// having held no more than that.
func TestForwardLabelledBodyBounded(t *testing.T) {
	entry := field(1, field(2, field(2, str(1, "m"), field(5, numberPoints(1)))))
	var payload []byte
	for range 2000 {
		payload = append(payload, entry...)
	}
	const limit = 2 << 20
	attrs := bigLabels()
	for _, fn := range []struct {
		name string
		f    func(rec *testkit.Recorder) (int, bool, error)
	}{
		{"rewrite", func(rec *testkit.Recorder) (int, bool, error) {
			return forward(rec, payload, &plan{all: true}, attrs, limit)
		}},
		{"decoded", func(rec *testkit.Recorder) (int, bool, error) {
			return forwardDecoded(rec, payload, &plan{all: true}, attrs, limit)
		}},
	} {
		rec := &testkit.Recorder{}
		var sent bool
		var err error
		fn.f(rec)
		alloc := allocated(func() { _, sent, err = fn.f(rec) })
		if err != errLabelledTooLarge || sent || rec.Count() != 0 {
			t.Fatalf("%s: sent %v, err %v, %d forwarded", fn.name, sent, err, rec.Count())
		}
		// The decoding path decodes the 2,000 entries into objects first.
		if alloc > 2*limit {
			t.Fatalf("%s: allocated %d bytes, limit %d", fn.name, alloc, limit)
		}
	}
	// Within the limit the same entries go through, every one labelled.
	rec := &testkit.Recorder{}
	if points, sent, err := forward(rec, payload[:10*len(entry)], &plan{all: true}, attrs, limit); err != nil || !sent || points != 10 {
		t.Fatalf("10 entries: points %d, sent %v, err %v", points, sent, err)
	}
	_, md, _ := lastMetrics(t, rec)
	if len(md.ResourceMetrics) != 10 || resourceLabels(md)[labelClientSoftwareName] != strings.Repeat("n", 64<<10) {
		t.Fatalf("%d resources", len(md.ResourceMetrics))
	}
}
