package main

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/otlpgate/otlpgate/internal/otlpgen"
	"github.com/otlpgate/otlpgate/internal/testkit"
)

// kafkaSpoolProducer starts the binary with only the gRPC intake and the spool in dir, producing
// to kc by trace id: a request is answered once the spool holds it. The spool persists what
// the brokers acknowledged every 100ms, which bounds what a crash produces again.
func kafkaSpoolProducer(t *testing.T, bin, dir string, kc *kfake.Cluster) *gateway {
	t.Helper()
	g := startGateway(t, bin, "-http.listen", "", "-kafka.listen", "", "-spool.dir", dir, "-batch.max-age", "10ms", "-shutdown.timeout", "5s",
		"-spool.checkpoint-interval", "100ms",
		"-dest", "name=kafka,protocol=kafka,partition=trace_id,retry-initial=20ms,retry-max=200ms,brokers="+strings.Join(kc.ListenAddrs(), ","))
	waitReady(t, g)
	return g
}

// Spans go from a load generator to an otlpgate that spools them and produces them to a Kafka
// cluster of three brokers (in the test process); a second otlpgate consumes them and
// delivers them to an upstream. The producer is killed with SIGKILL mid-run, while requests
// keep coming, and started again on the same spool: every span it acknowledged reaches the
// upstream, and what arrives twice is only what the spool had not finished at the kill, which
// the new process produces again: spans that were in Kafka already at the kill, in records the
// restarted producer read back from its spool (otlpgate_spool_replayed_records_total, of one
// request of 10 spans each), at most what the brokers acknowledged within the last checkpoint
// interval plus what they had not acknowledged.
func TestKafkaProducerSurvivesKill9(t *testing.T) {
	bin := buildBinary(t)
	kc := startKafkaCluster(t)
	u := testkit.StartGRPCSink(t, "")
	dir := t.TempDir()
	prod := kafkaSpoolProducer(t, bin, dir, kc)
	cons := kafkaConsumer(t, bin, kc, u.Addr())

	const spansPerRequest = 10
	l := newLoader(11, otlpgen.Shape{Spans: spansPerRequest, Attrs: 2, Traces: 3})
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { l.run(t, prod.grpcAddr, 4, stop); close(done) }()
	testkit.WaitFor(t, "2000 spans at the upstream through Kafka", func() bool { n, _ := u.SpanCount(); return n >= 2000 })

	kill9(t, prod) // the load is still running
	close(stop)
	<-done
	ackedBefore := len(l.ackedIDs())
	inKafka := spansFrom(t, kc, nil) // what the dead producer wrote; nothing writes now

	prod2 := kafkaSpoolProducer(t, bin, dir, kc)
	after := sendAcked(t, prod2, l, 50) // and the restarted producer takes new requests
	acked := l.ackedIDs()
	dups, distinct := arrived(t, u, acked, l.sent)
	replayed := scrape(t, prod2.admin, "otlpgate_spool_replayed_records_total", `destination="kafka"`)
	for id, n := range u.Spans() {
		if n > 1 && !inKafka[id] {
			t.Errorf("span %d arrived %d times but was not in Kafka at the kill", id, n)
		}
		if n > 2 {
			t.Errorf("span %d arrived %d times: one replay makes two at most", id, n)
		}
	}
	if bound := int(replayed) * spansPerRequest; dups > bound {
		t.Errorf("%d duplicates, more than the %d spans of the %v records replayed from the spool", dups, bound, replayed)
	}
	if replayed == 0 {
		t.Error("nothing counted as replayed after the restart")
	}
	t.Logf("%d spans acknowledged before the kill and %d after; %d in Kafka at the kill; %d distinct at the upstream, %d duplicates; %v spool records replayed",
		ackedBefore, len(after), len(inKafka), distinct, dups, replayed)
	for _, g := range []*gateway{cons, prod2} {
		g.terminate(t)
		if g.exitErr != nil {
			t.Errorf("exit: %v\n%s", g.exitErr, g.stderr.String())
		}
	}
}
