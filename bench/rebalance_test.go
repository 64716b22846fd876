package bench

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestRebalanceJSONAndChart(t *testing.T) {
	r := RebalanceResult{Balancer: "nginx", Rebalance: time.Second, Streams: 4, AddAt: 2 * time.Second, AckedSpans: 6000, ReceivedSpans: 6000,
		Samples: []RebalanceSample{
			{At: time.Second, Requests: []int64{10, 10, 0}},
			{At: 2 * time.Second, Requests: []int64{10, 10, 0}},
			{At: 3 * time.Second, Requests: []int64{7, 6, 7}},
		}}
	dir := t.TempDir()
	js := filepath.Join(dir, "r.json")
	if err := WriteRebalance(js, r); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(js)
	var back RebalanceResult
	if err := json.Unmarshal(b, &back); err != nil || len(back.Samples) != 3 || back.Samples[2].Requests[2] != 7 || back.AddAt != 2*time.Second {
		t.Fatalf("JSON round trip: %v %+v", err, back)
	}
	png, svg := filepath.Join(dir, "c.png"), filepath.Join(dir, "c.svg")
	if err := ChartRebalance(r, png, svg); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{png, svg} {
		if st, err := os.Stat(p); err != nil || st.Size() < 1000 {
			t.Fatalf("%s: %v", p, err)
		}
	}
	if err := ChartRebalance(RebalanceResult{}, png); err == nil {
		t.Fatal("chart without samples did not fail")
	}
}
