package kafka

import (
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/testkit"
)

// originRecorder records what it consumes and the origin each push came with.
type originRecorder struct {
	testkit.Recorder
	mu    sync.Mutex
	peers []netip.Addr
}

func (r *originRecorder) Consume(req pipeline.Request) error {
	r.mu.Lock()
	r.peers = append(r.peers, req.Origin.Peer)
	r.mu.Unlock()
	return r.Recorder.Consume(req)
}

// A push is handed on with the address of the connection it came on, for the processing
// steps to write into its resources (-resource.from-peer): two clients on 127.0.0.2 and
// 127.0.0.3, each push with its own.
func TestPushCarriesClientAddress(t *testing.T) {
	rec := &originRecorder{}
	s, _ := startServer(t, testConfig(), rec)
	payload, _ := testMetrics("m").MarshalVT()
	for _, ip := range []string{"127.0.0.2", "127.0.0.3"} {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
		nc, err := d.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		c := &client{t: t, nc: nc, fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID("app-" + ip))}
		sub := c.get([16]byte{})
		if code := c.push(sub.ClientInstanceID, sub.SubscriptionID, 0, payload, false); code != errNone {
			t.Fatalf("%s: push: code %d", ip, code)
		}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	want := []netip.Addr{netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.3")}
	if len(rec.peers) != len(want) || rec.peers[0] != want[0] || rec.peers[1] != want[1] || rec.Count() != 2 {
		t.Fatalf("pushes from %v (%d payloads), want %v", rec.peers, rec.Count(), want)
	}
}
