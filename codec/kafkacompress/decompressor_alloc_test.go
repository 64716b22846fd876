//go:build !race

package kafkacompress

import "testing"

// TestDecompressAllocs proves that, once the pools are warm and dst has room, decoding a real
// payload allocates nothing.
func TestDecompressAllocs(t *testing.T) {
	d := mustNew(t, 1<<20)
	for _, c := range loadCaptures(t) {
		t.Run(c.name, func(t *testing.T) {
			dst := make([]byte, 0, 1<<20)
			if _, err := d.Decompress(dst, c.codec, c.in); err != nil {
				t.Fatal(err)
			}
			allocs := testing.AllocsPerRun(100, func() {
				if _, err := d.Decompress(dst, c.codec, c.in); err != nil {
					t.Fatal(err)
				}
			})
			if allocs != 0 {
				t.Fatalf("%v allocations per call, want 0", allocs)
			}
		})
	}
}
