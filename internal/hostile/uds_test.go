package hostile

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/otlpgate/otlpgate/codec/ocdaemon"
)

// 200 measures with 4 MiB descriptions, each in a message of the largest size the socket takes
// (-uds.max-message-bytes, 4 MiB): before strings were capped, the registry kept them all
// (836 MiB). Now each definition is refused as too long, and the process holds what one
// connection reads at a time. Both engines of the socket (-uds.engine) are held to it.
func TestUDSLongDescriptions(t *testing.T) {
	for _, engine := range []string{"gnet", "net"} {
		t.Run(engine, func(t *testing.T) { testUDSLongDescriptions(t, engine) })
	}
}

func testUDSLongDescriptions(t *testing.T, engine string) {
	g := startGate(t, "-uds.engine", engine)
	w := watch(t, g, 100*time.Millisecond, 5*time.Second)
	c, err := net.Dial("unix", g.UDS)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	desc := []byte(strings.Repeat("d", 4<<20-256))
	var seq uint64
	frame := func(typ ocdaemon.Type, payload []byte) []byte {
		seq++
		return ocdaemon.AppendFrame(nil, ocdaemon.Header{Type: typ, Seq: seq, PID: 4242, Time: 1795262752.5}, payload)
	}
	before := g.metric(t, "otlpgate_uds_stats_rejected_total", `reason="too_long"`)
	c.Write(frame(ocdaemon.ReqInit, ocdaemon.AppendInit(nil, &ocdaemon.Init{ProtocolVersion: 1, PHPVersion: []byte("8.3.1"), ZendVersion: []byte("4.3.1")})))
	const n = 200
	buf := make([]byte, 0, 4<<20)
	for i := range n {
		buf = ocdaemon.AppendMeasure(buf[:0], &ocdaemon.Measure{Type: ocdaemon.MeasureInt, Name: []byte("m" + string(rune('a'+i%26)) + strings.Repeat("x", i/26)), Description: desc, Unit: []byte("1")})
		c.SetWriteDeadline(time.Now().Add(30 * time.Second))
		if _, err := c.Write(frame(ocdaemon.MeasureCreate, buf)); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for g.metric(t, "otlpgate_uds_stats_rejected_total", `reason="too_long"`)-max(before, 0) < n {
		if time.Now().After(deadline) {
			t.Fatalf("too_long rejections: %v, want %d", g.metric(t, "otlpgate_uds_stats_rejected_total", `reason="too_long"`), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	w.end(t, 5*time.Second)
	g.alive(t)
	// Bound: the process at rest (under 64 MiB here) plus the 4 MiB message being read, its
	// decode, and the garbage of earlier ones before a collection (GOGC=100 lets the heap double);
	// 256 MiB leaves room for all of it, and is far below the 836 MiB the registry held.
	if rss := g.PeakRSS(t); rss > 256<<20 {
		t.Errorf("peak RSS %d MiB, bound 256 MiB", rss>>20)
	}
}
