package kafka

import (
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/otlpgate/otlpgate/internal/testkit"
)

// labelsAtCaps returns labels of a client whose id and software are as long as the default caps
// allow, each in its own strings.
func labelsAtCaps(i int) *clientLabels {
	n := strconv.Itoa(i)
	d := DefaultConfig()
	return &clientLabels{
		clientID:        n + strings.Repeat("c", d.MaxClientIDBytes-len(n)),
		softwareName:    n + strings.Repeat("s", d.MaxSoftwareBytes-len(n)),
		softwareVersion: n + strings.Repeat("v", d.MaxSoftwareBytes-len(n)),
		sourceAddress:   "2001:db8:ffff:ffff:ffff:ffff:ffff:" + n,
		sourcePort:      "65535",
	}
}

// The estimate of an instance's memory, which -kafka.max-instance-bytes bounds, is at least
// what instances really take on the heap, labels included.
func TestInstanceBytesEstimate(t *testing.T) {
	const n = 2000
	r := newRegistry(n, 1<<40)
	defer r.clear()
	set := testSet(t, 1, time.Second)
	now := time.Unix(1000, 0)
	conns := make([]conn, n)
	before := liveHeap()
	for i := range n {
		r.get(&conns[i], labelsAtCaps(i), [16]byte{}, set, now)
	}
	used := int64(liveHeap()) - int64(before)
	estimate := r.bytes()
	t.Logf("%d instances at the label caps: %d bytes on the heap, %d estimated (%d and %d each)",
		n, used, estimate, used/n, estimate/n)
	if r.len() != n || estimate < used {
		t.Fatalf("%d instances: estimated %d bytes, the heap grew %d", r.len(), estimate, used)
	}
	runtime.KeepAlive(conns)
}

// Instances are bounded in bytes as well as in number: one connection creating instance after
// instance with labels at the caps keeps the registry within -kafka.max-instance-bytes, the
// least recently seen evicted and counted, and otlpgate_kafka_instance_bytes shows it.
func TestInstanceBytesBound(t *testing.T) {
	cfg := testConfig()
	cfg.MaxInstanceBytes = 64 << 10
	s, _ := startServer(t, cfg, &testkit.Recorder{})
	lbl := labelsAtCaps(7)
	c := dial(t, s, lbl.clientID)
	if r := c.apiVersions(3, lbl.softwareName, lbl.softwareVersion); r.ErrorCode != errNone {
		t.Fatalf("ApiVersions: code %d", r.ErrorCode)
	}
	evicted := counterValue(t, removedEvicted)
	var last [16]byte
	for range 200 {
		last = c.get([16]byte{}).ClientInstanceID
		if b := s.reg.bytes(); b > cfg.MaxInstanceBytes {
			t.Fatalf("instances hold %d bytes, bound %d", b, cfg.MaxInstanceBytes)
		}
	}
	n, b := s.reg.len(), s.reg.bytes()
	if d := counterValue(t, removedEvicted) - evicted; n >= 200 || int(d) != 200-n {
		t.Fatalf("%d instances kept, %v evicted", n, d)
	}
	if g := gaugeValue(t, "otlpgate_kafka_instance_bytes"); g != float64(b) {
		t.Fatalf("gauge %v, registry %d", g, b)
	}
	// The newest instance is one of those kept: its push is answered, not UNKNOWN.
	s.reg.mu.Lock()
	_, kept := s.reg.mu.byID[last]
	s.reg.mu.Unlock()
	if !kept {
		t.Fatal("the instance just created was evicted")
	}
	t.Logf("%d instances kept in %d bytes", n, b)
}
