package uds

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// captures are the real client captures copied from ../shared/testdata/ocdaemon.
var captures = []string{
	"stats_basic",
	"trace_export",
	"trace_minimal",
	"partial_message",
	"web_3_requests",
}

// TestGolden replays every capture over a real unix socket, whole and in 1-, 7- and 4096-byte
// writes, and compares the OTLP the consumer received with testdata/<capture>.golden.
//
// Wall-clock fields are deterministic by construction: the server's clock is a fake standing at
// testEpoch (so every metric point's time_unix_nano is testEpoch), and the fake's timers never
// fire, so metrics are exported exactly once, when the connection closes and its process ends.
// Every other time (span times, series start times, exemplar times) comes from the capture.
func TestGolden(t *testing.T) {
	for _, name := range captures {
		data := readFile(t, name+".bin")
		goldenPath := filepath.Join("testdata", name+".golden")
		for _, chunk := range []int{0, 1, 7, 4096} {
			t.Run(fmt.Sprintf("%s/%d", name, chunk), func(t *testing.T) {
				if chunk == 1 && len(data) > 100000 && testing.Short() {
					t.Skip("byte-by-byte replay of a large capture in -short mode")
				}
				h := start(t, nil)
				h.replay(data, chunk)
				h.shutdown()
				got := render(t, h.rec.Received())
				if *update && chunk == 0 {
					if err := os.WriteFile(goldenPath, []byte(got), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				want, err := os.ReadFile(goldenPath)
				if err != nil {
					t.Fatalf("%v (run with -update to create it)", err)
				}
				if got != string(want) {
					t.Fatalf("output differs from %s:\n%s", goldenPath, diff(string(want), got))
				}
			})
		}
	}
}

// diff shows the first differing lines.
func diff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return fmt.Sprintf("line %d\nwant: %s\n got: %s", i+1, wl, gl)
		}
	}
	return "(equal)"
}
