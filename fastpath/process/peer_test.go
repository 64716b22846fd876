package process

import (
	"maps"
	"net/netip"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otlpgate/otlpgate/fastpath"
)

// peerTraces builds four resource entries: without the attribute, with a value, with an empty
// value, and without a Resource at all.
func peerTraces() ptrace.Traces {
	td := ptrace.NewTraces()
	add := func(set func(rs ptrace.ResourceSpans)) {
		rs := td.ResourceSpans().AppendEmpty()
		set(rs)
		rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty().SetName("op")
	}
	add(func(rs ptrace.ResourceSpans) { rs.Resource().Attributes().PutStr("service.name", "checkout") })
	add(func(rs ptrace.ResourceSpans) {
		a := rs.Resource().Attributes()
		a.PutStr("k8s.pod.ip", "10.0.0.9")
		a.PutStr("service.name", "cart")
	})
	add(func(rs ptrace.ResourceSpans) {
		a := rs.Resource().Attributes()
		a.PutStr("service.name", "ads")
		a.PutStr("k8s.pod.ip", "")
	})
	add(func(ptrace.ResourceSpans) {})
	return td
}

// -resource.from-peer sets the client's address as the Collector's resource processor would
// with the action given: insert keeps a value the resource has (an empty one counts as none,
// as k8sattributes has it), upsert replaces it; a request without an address is left alone.
func TestFromPeer(t *testing.T) {
	in := marshalTraces(t, peerTraces())
	v4 := netip.MustParseAddr("127.0.0.2")
	for _, c := range []struct {
		name   string
		action PeerAction
		peer   netip.Addr
		want   []map[string]string
	}{
		{"insert", PeerInsert, v4, []map[string]string{
			{"service.name": "checkout", "k8s.pod.ip": "127.0.0.2"},
			{"service.name": "cart", "k8s.pod.ip": "10.0.0.9"},
			{"service.name": "ads", "k8s.pod.ip": "127.0.0.2"},
			{"k8s.pod.ip": "127.0.0.2"},
		}},
		{"upsert", PeerUpsert, v4, []map[string]string{
			{"service.name": "checkout", "k8s.pod.ip": "127.0.0.2"},
			{"service.name": "cart", "k8s.pod.ip": "127.0.0.2"},
			{"service.name": "ads", "k8s.pod.ip": "127.0.0.2"},
			{"k8s.pod.ip": "127.0.0.2"},
		}},
		{"ipv4-mapped", PeerUpsert, netip.MustParseAddr("::ffff:192.0.2.7"), []map[string]string{
			{"service.name": "checkout", "k8s.pod.ip": "192.0.2.7"},
			{"service.name": "cart", "k8s.pod.ip": "192.0.2.7"},
			{"service.name": "ads", "k8s.pod.ip": "192.0.2.7"},
			{"k8s.pod.ip": "192.0.2.7"},
		}},
		{"ipv6 with a zone", PeerInsert, netip.MustParseAddr("fe80::1%eth0"), []map[string]string{
			{"service.name": "checkout", "k8s.pod.ip": "fe80::1"},
			{"service.name": "cart", "k8s.pod.ip": "10.0.0.9"},
			{"service.name": "ads", "k8s.pod.ip": "fe80::1"},
			{"k8s.pod.ip": "fe80::1"},
		}},
		{"no address", PeerUpsert, netip.Addr{}, []map[string]string{
			{"service.name": "checkout"},
			{"service.name": "cart", "k8s.pod.ip": "10.0.0.9"},
			{"service.name": "ads", "k8s.pod.ip": ""},
			{},
		}},
		{"unspecified", PeerUpsert, netip.IPv4Unspecified(), []map[string]string{
			{"service.name": "checkout"},
			{"service.name": "cart", "k8s.pod.ip": "10.0.0.9"},
			{"service.name": "ads", "k8s.pod.ip": ""},
			{},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ch := mustChain(t, Config{FromPeer: "k8s.pod.ip", FromPeerAction: c.action})
			out, removed := applyFrom(t, ch, fastpath.Traces, in, c.peer)
			if removed != 0 {
				t.Errorf("removed %d", removed)
			}
			if !c.peer.IsValid() || c.peer.IsUnspecified() {
				if string(out) != string(in) {
					t.Error("a request without an address was rewritten")
				}
			}
			got := unmarshalTraces(t, out)
			if n := got.ResourceSpans().Len(); n != len(c.want) {
				t.Fatalf("%d resources, want %d", n, len(c.want))
			}
			for i, w := range c.want {
				rs := got.ResourceSpans().At(i)
				if a := attrs(t, rs.Resource().Attributes()); !maps.Equal(a, w) {
					t.Errorf("resource %d: %v, want %v", i, a, w)
				}
				if rs.ScopeSpans().Len() != 1 || rs.ScopeSpans().At(0).Spans().At(0).Name() != "op" {
					t.Errorf("resource %d: its spans changed", i)
				}
			}
		})
	}
}

// With -resource.set and -resource.delete, the address joins the set attributes; the longest
// address text fits the room Slack promised.
func TestFromPeerWithEdits(t *testing.T) {
	ch := mustChain(t, Config{Set: []Attr{{"k8s.node.name", "node-7"}}, Delete: []string{"secret.token"}, FromPeer: "client.address"})
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("secret.token", "x")
	rs.Resource().Attributes().PutStr("k8s.node.name", "stale")
	rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty().SetName("op")
	in := marshalTraces(t, td)
	long := netip.MustParseAddr("ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255")
	out, _ := applyFrom(t, ch, fastpath.Traces, in, long)
	a := attrs(t, unmarshalTraces(t, out).ResourceSpans().At(0).Resource().Attributes())
	want := map[string]string{"k8s.node.name": "node-7", "client.address": long.String()}
	if !maps.Equal(a, want) {
		t.Errorf("%v, want %v", a, want)
	}
	if grown := len(out) - len(in); grown > ch.Slack(fastpath.Traces, len(in)) {
		t.Errorf("grew by %d, Slack %d", grown, ch.Slack(fastpath.Traces, len(in)))
	}
}

func TestFromPeerValidate(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{FromPeer: "k", Set: []Attr{{"k", "v"}}}, "also given to -resource.set"},
		{Config{FromPeer: "k", Delete: []string{"k"}}, "also given to -resource.delete"},
		{Config{FromPeer: "k", Drop: []Match{{Key: "k", Value: "v"}}}, "not its address"},
		{Config{FromPeer: strings.Repeat("k", maxPeerKey+1)}, "longer than"},
		{Config{FromPeer: "k", FromPeerAction: 7}, "unknown"},
	} {
		if err := c.cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
	if _, err := ParsePeerAction("update"); err == nil {
		t.Error("update accepted")
	}
}
