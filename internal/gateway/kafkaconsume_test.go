package gateway

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/otlpgate/otlpgate/client"
	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/internal/testkit"
	"github.com/otlpgate/otlpgate/server/kafkaconsume"
)

// consumeConfig is a gateway whose only intake is the Kafka consumer of kc's otlp_spans in
// group, delivering to u.
func consumeConfig(kc *kfake.Cluster, group string, u *upstream) Config {
	cfg := testConfig()
	cfg.GRPC.Listen, cfg.HTTP.Listen = "", ""
	cfg.KafkaConsume.Brokers = kc.ListenAddrs()
	cfg.KafkaConsume.Topics = []kafkaconsume.Topic{{Name: "otlp_spans", Signal: fastpath.Traces}}
	cfg.KafkaConsume.Group = group
	cfg.KafkaConsume.CommitInterval = 50 * time.Millisecond
	cfg.KafkaConsume.SessionTimeout = 6 * time.Second
	cfg.KafkaConsume.RevokeWait = 5 * time.Second
	cfg.Destinations = []client.Config{destTo("up", u.addr)}
	return cfg
}

// produceSpans writes one record per id to topic, each a v1 trace request of that one span,
// spread over the partitions, and waits until the brokers took every one.
func produceSpans(t *testing.T, kc *kfake.Cluster, topic string, ids ...uint64) {
	t.Helper()
	produceValues(t, kc, topic, func(i int) []byte { return traceBody(t, 0, ids[i]) }, len(ids))
}

func produceValues(t *testing.T, kc *kfake.Cluster, topic string, value func(i int) []byte, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	recs := make([]*kgo.Record, n)
	for i := range n {
		recs[i] = &kgo.Record{Value: value(i)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// committed is the offsets the brokers hold for group on topic's partitions, and the sum of
// the partitions' high watermarks: what a member of the group would read from, and the end.
func committed(t *testing.T, kc *kfake.Cluster, group, topic string) (offsets map[int32]int64, sum, end int64) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic = topic
	for p := range int32(kafkaPartitions) {
		rt.Partitions = append(rt.Partitions, p)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	offsets = map[int32]int64{}
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			if p.Offset > 0 {
				offsets[p.Partition] = p.Offset
				sum += p.Offset
			}
		}
	}
	lreq := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = topic
	for p := range int32(kafkaPartitions) {
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Partition, lp.Timestamp = p, -1
		lt.Partitions = append(lt.Partitions, lp)
	}
	lreq.Topics = append(lreq.Topics, lt)
	shards := cl.RequestSharded(ctx, lreq)
	for _, sh := range shards {
		if sh.Err != nil {
			t.Fatal(sh.Err)
		}
		for _, tp := range sh.Resp.(*kmsg.ListOffsetsResponse).Topics {
			for _, p := range tp.Partitions {
				end += p.Offset
			}
		}
	}
	return offsets, sum, end
}

// waitCommittedToEnd waits until group's committed offsets on otlp_spans reach the end of every
// partition, and the partitions hold n records together.
func waitCommittedToEnd(t *testing.T, kc *kfake.Cluster, group string, n int64) {
	t.Helper()
	eventually(t, func() string {
		off, sum, end := committed(t, kc, group, "otlp_spans")
		return fmt.Sprintf("committed %v (%d) of %d, want all of %d", off, sum, end, n)
	}, func() bool {
		_, sum, end := committed(t, kc, group, "otlp_spans")
		return sum == end && end == n
	})
}

// idRange is the ids from, from+1, ... of n.
func idRange(from uint64, n int) []uint64 {
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = from + uint64(i)
	}
	return ids
}

// Spans sent by the OpenTelemetry SDK to one otlpgate, produced to Kafka by its Kafka
// destination (partitioned by trace id over three brokers and six partitions), are read by a
// second otlpgate's consumer intake and delivered to its upstream, each span exactly once; the
// group's committed offsets reach the end of every partition, and the lag falls to zero.
func TestKafkaConsumeSDKSpans(t *testing.T) {
	kc := startKafka(t)
	u := startUpstream(t)
	cons := startGateway(t, consumeConfig(kc, "sdk", u))

	prod := testConfig()
	prod.Destinations = []client.Config{kafkaDest(t, kc, "partition=trace_id")}
	g := startGateway(t, prod)
	ended := sdkSpans(t, g, 40, 5)
	if err := g.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() string { return fmt.Sprintf("%d of %d spans at the upstream", u.distinct(), len(ended)) },
		func() bool { return u.distinct() == len(ended) })
	for _, s := range ended {
		id := s.SpanContext().SpanID()
		if n := u.count(binary.BigEndian.Uint64(id[:])); n != 1 {
			t.Errorf("span %s arrived %d times", id, n)
		}
	}
	eventually(t, func() string {
		off, sum, end := committed(t, kc, "sdk", "otlp_spans")
		return fmt.Sprintf("committed %v (%d) of %d", off, sum, end)
	}, func() bool { _, sum, end := committed(t, kc, "sdk", "otlp_spans"); return sum == end && end > 0 })
	eventually(t, func() string { return fmt.Sprintf("lag %v", cons.kc.Lag()) }, func() bool {
		for _, ps := range cons.kc.Lag() {
			for _, l := range ps {
				if l != 0 {
					return false
				}
			}
		}
		return true
	})
	eventually(t, func() string { _, b := get(t, cons, "/status.json"); return "the status shows no consumer lag: " + b }, func() bool {
		_, b := get(t, cons, "/status.json")
		return strings.Contains(b, `"name": "kafka_consume"`) && strings.Contains(b, `"lag_by_partition"`) && strings.Contains(b, `"otlp_spans/0": 0`)
	})
	if err := cons.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Records that can never be admitted (not OTLP, a request of another shape, one past
// -kafka.consume.max-record-bytes) are counted by reason and committed past; the records
// around them are delivered, and their partitions are not held.
func TestKafkaConsumePoison(t *testing.T) {
	kc := startKafka(t)
	u := startUpstream(t)
	cfg := consumeConfig(kc, "poison", u)
	cfg.KafkaConsume.MaxRecordBytes = 4 << 10
	undecodable := metricSum(t, "otlpgate_kafka_consume_skipped_records_total", "reason", "undecodable")
	tooLarge := metricSum(t, "otlpgate_kafka_consume_skipped_records_total", "reason", "too_large")
	startGateway(t, cfg)
	values := [][]byte{
		traceBody(t, 0, 1),
		[]byte("not a protobuf message \xff\xff\xff"),
		traceBody(t, 0, 2),
		traceBody(t, 8<<10, 3),                     // past max-record-bytes
		{0x0a, 0x05, 0x0a, 0x03, 0xff, 0xff, 0xff}, // a resource entry whose resource is broken
		traceBody(t, 0, 4),
	}
	produceValues(t, kc, "otlp_spans", func(i int) []byte { return values[i] }, len(values))
	eventually(t, func() string { return fmt.Sprintf("%d of 3 spans at the upstream", u.distinct()) },
		func() bool { return u.distinct() == 3 })
	for _, id := range []uint64{1, 2, 4} {
		if n := u.count(id); n != 1 {
			t.Errorf("span %d arrived %d times", id, n)
		}
	}
	if u.count(3) != 0 {
		t.Error("the record past max-record-bytes was delivered")
	}
	eventually(t, func() string {
		return fmt.Sprintf("skipped undecodable %v too_large %v", metricSum(t, "otlpgate_kafka_consume_skipped_records_total", "reason", "undecodable")-undecodable,
			metricSum(t, "otlpgate_kafka_consume_skipped_records_total", "reason", "too_large")-tooLarge)
	}, func() bool {
		return metricSum(t, "otlpgate_kafka_consume_skipped_records_total", "reason", "undecodable")-undecodable == 2 && metricSum(t, "otlpgate_kafka_consume_skipped_records_total", "reason", "too_large")-tooLarge == 1
	})
	waitCommittedToEnd(t, kc, "poison", int64(len(values)))
}

// While the upstream answers nothing, no offset is committed past what it acknowledged (here:
// nothing), whatever was admitted; once it answers, every span is delivered and the offsets
// reach the end.
func TestKafkaConsumeUpstreamDown(t *testing.T) {
	kc := startKafka(t)
	u := startUpstream(t)
	u.hold()
	cfg := consumeConfig(kc, "down", u)
	startGateway(t, cfg)
	ids := idRange(100, 60)
	produceSpans(t, kc, "otlp_spans", ids...)
	eventually(t, func() string { return "no call waits at the held upstream" }, func() bool { return len(u.heldNow()) > 0 })
	time.Sleep(300 * time.Millisecond) // several commit intervals pass
	if off, sum, _ := committed(t, kc, "down", "otlp_spans"); sum != 0 {
		t.Fatalf("offsets %v committed while the upstream acknowledged nothing", off)
	}
	u.release()
	eventually(t, func() string { return fmt.Sprintf("%d of %d spans at the upstream", u.distinct(), len(ids)) },
		func() bool { return u.distinct() == len(ids) })
	waitCommittedToEnd(t, kc, "down", int64(len(ids)))
}

// A batch the destination gives up undelivered (its upstream answers nothing within the ack
// timeout, and the retries run out) rewinds its partition: the record is read again and
// delivered once the upstream answers, so nothing is lost.
func TestKafkaConsumeRewind(t *testing.T) {
	kc := startKafka(t)
	u := startUpstream(t)
	u.hold()
	cfg := consumeConfig(kc, "rewind", u)
	d := destTo("up", u.addr)
	d.AckTimeout, d.RetryMaxElapsed = 200*time.Millisecond, 300*time.Millisecond
	cfg.Destinations = []client.Config{d}
	startGateway(t, cfg)
	before := metricSum(t, "otlpgate_kafka_consume_rewinds_total", "", "")
	ids := idRange(500, 12)
	produceSpans(t, kc, "otlp_spans", ids...)
	eventually(t, func() string { return "no rewind" }, func() bool { return metricSum(t, "otlpgate_kafka_consume_rewinds_total", "", "") > before })
	u.release()
	eventually(t, func() string { return fmt.Sprintf("%d of %d spans at the upstream", u.distinct(), len(ids)) },
		func() bool { return u.distinct() == len(ids) })
	waitCommittedToEnd(t, kc, "rewind", int64(len(ids)))
}

// A second otlpgate joining the group mid-run takes some partitions over (a cooperative
// rebalance): every span produced before, during and after is delivered, none lost, and both
// members read records.
func TestKafkaConsumeRebalance(t *testing.T) {
	kc := startKafka(t)
	u := startUpstream(t)
	a := startGateway(t, consumeConfig(kc, "rebalance", u))
	produceSpans(t, kc, "otlp_spans", idRange(1000, 300)...)
	eventually(t, func() string { return fmt.Sprintf("%d of 300", u.distinct()) }, func() bool { return u.distinct() >= 100 })
	b := startGateway(t, consumeConfig(kc, "rebalance", u))
	// Records keep coming while b joins, until b has read some.
	sent := 300
	for i := 0; len(b.kc.Lag()) == 0; i++ {
		if i == 300 {
			t.Fatal("member b read nothing within 300 rounds of records")
		}
		produceSpans(t, kc, "otlp_spans", idRange(2000+uint64(sent), 12)...)
		sent += 12
		time.Sleep(20 * time.Millisecond)
	}
	produceSpans(t, kc, "otlp_spans", idRange(2000+uint64(sent), 300)...)
	sent += 300
	eventually(t, func() string { return fmt.Sprintf("%d of %d spans at the upstream", u.distinct(), sent) },
		func() bool { return u.distinct() == sent })
	for _, id := range idRange(1000, 300) {
		if u.count(id) == 0 {
			t.Fatalf("span %d lost", id)
		}
	}
	for _, id := range idRange(2300, sent-300) {
		if u.count(id) == 0 {
			t.Fatalf("span %d lost", id)
		}
	}
	if len(a.kc.Lag()) == 0 {
		t.Error("member a holds no partition after the rebalance")
	}
	waitCommittedToEnd(t, kc, "rebalance", int64(sent))
	t.Logf("%d spans, %d delivered twice or more across the rebalance", sent, u.duplicates())
	for _, g := range []*Gateway{a, b} {
		if err := g.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// The consumer cannot be combined with routes by resource without a spool (at a start, and at
// a reload of -dest.file, which checks its routes with the same function).
func TestKafkaConsumeValidate(t *testing.T) {
	cfg := testConfig()
	cfg.KafkaConsume.Brokers = []string{"127.0.0.1:9092"}
	cfg.KafkaConsume.Topics = []kafkaconsume.Topic{{Name: "otlp_spans"}}
	d := destTo("up", "127.0.0.1:1")
	d.Route = nil
	cfg.Destinations = []client.Config{d}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("a plain consumer: %v", err)
	}
	routed, err := client.ParseDest("name=routed,endpoint=127.0.0.1:1,match=resource:service.name=a", client.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Destinations = append(cfg.Destinations, routed)
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "match=resource without -spool.dir") {
		t.Fatalf("routes without a spool: %v", err)
	}
	cfg.Spool.Dir = t.TempDir()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("routes with a spool: %v", err)
	}
	cfg.KafkaConsume.Topics = nil
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "-kafka.consume.topics") {
		t.Fatalf("no topics: %v", err)
	}
}

// metricSum sums the counter or gauge series of name in the default registry whose label
// label is value (every series when label is empty).
func metricSum(t *testing.T, name, label, value string) float64 {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.Metric {
			match := label == ""
			for _, l := range m.Label {
				match = match || l.GetName() == label && l.GetValue() == value
			}
			if match {
				sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return sum
}

// distinct is how many distinct span ids arrived.
func (u *upstream) distinct() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.ids)
}

// duplicates is how many span ids arrived more than once.
func (u *upstream) duplicates() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := 0
	for _, c := range u.ids {
		if c > 1 {
			n++
		}
	}
	return n
}

// A broker stops while records are produced and consumed (its connections with it, as a broker
// process that stops: brokersDieWhole), its partitions and maybe the group's coordinator move to
// the others, and it comes back on its port, with the leaders shuffled again: every span produced
// reaches the upstream, and the offsets reach the end.
func TestKafkaConsumeBrokerRestart(t *testing.T) {
	kc := startKafka(t, brokersDieWhole())
	u := startUpstream(t)
	startGateway(t, consumeConfig(kc, "restart", u))
	produceSpans(t, kc, "otlp_spans", idRange(1, 200)...)
	eventually(t, func() string { return fmt.Sprintf("%d of 200", u.distinct()) }, func() bool { return u.distinct() >= 50 })

	_, port, err := net.SplitHostPort(kc.ListenAddrs()[1])
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	if err := kc.RemoveNode(1); err != nil {
		t.Fatal(err)
	}
	produceSpans(t, kc, "otlp_spans", idRange(1001, 200)...)
	if _, _, err := kc.AddNode(1, p); err != nil {
		t.Fatal(err)
	}
	kc.ShufflePartitionLeaders()
	produceSpans(t, kc, "otlp_spans", idRange(2001, 200)...)
	eventually(t, func() string { return fmt.Sprintf("%d of 600 spans at the upstream", u.distinct()) },
		func() bool { return u.distinct() == 600 })
	waitCommittedToEnd(t, kc, "restart", 600)
}

// Records an otlpgate produced in OTLP/JSON, and records over SASL (PLAIN, SCRAM-SHA-256,
// SCRAM-SHA-512) and TLS, are consumed and delivered: every span once. Producer and consumer
// authenticate with the same settings, the destination's keys and the consumer's flags.
func TestKafkaConsumeEncodingAndSecurity(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := testkit.SelfSigned(t, dir)
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	sasl := func(mech string) func(*kafkaconsume.Config) {
		return func(c *kafkaconsume.Config) { c.SASLMechanism, c.SASLUser, c.SASLPassword = mech, "otlpgate", "s3cret" }
	}
	for _, tc := range []struct {
		name    string
		cluster []kfake.Opt
		keys    string
		set     func(*kafkaconsume.Config)
	}{
		{name: "otlp_json", keys: "encoding=otlp_json,partition=trace_id", set: func(c *kafkaconsume.Config) { c.Topics[0].JSON = true }},
		{name: "sasl_plain", cluster: []kfake.Opt{kfake.EnableSASL(), kfake.Superuser("PLAIN", "otlpgate", "s3cret")},
			keys: "sasl-mechanism=plain,sasl-username=otlpgate,sasl-password-file=" + pw, set: sasl(kafkaconsume.SASLPlain)},
		{name: "sasl_scram_sha256", cluster: []kfake.Opt{kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "otlpgate", "s3cret")},
			keys: "sasl-mechanism=scram-sha-256,sasl-username=otlpgate,sasl-password-file=" + pw, set: sasl(kafkaconsume.SASLScramSHA256)},
		{name: "sasl_scram_sha512", cluster: []kfake.Opt{kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", "otlpgate", "s3cret")},
			keys: "sasl-mechanism=scram-sha-512,sasl-username=otlpgate,sasl-password-file=" + pw, set: sasl(kafkaconsume.SASLScramSHA512)},
		{name: "tls", cluster: []kfake.Opt{kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})},
			keys: "tls-ca=" + certFile,
			set:  func(c *kafkaconsume.Config) { c.TLS = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kc := startKafka(t, tc.cluster...)
			u := startUpstream(t)
			ccfg := consumeConfig(kc, tc.name, u)
			tc.set(&ccfg.KafkaConsume)
			startGateway(t, ccfg)
			prod := testConfig()
			prod.Destinations = []client.Config{kafkaDest(t, kc, tc.keys)}
			g := startGateway(t, prod)
			for i, err := range exportIDs(t, g, idRange(1, 30)...) {
				if err != nil {
					t.Fatalf("span %d: %v", i+1, err)
				}
			}
			eventually(t, func() string { return fmt.Sprintf("%d of 30 spans at the upstream", u.distinct()) },
				func() bool { return u.distinct() == 30 })
			for _, id := range idRange(1, 30) {
				if n := u.count(id); n != 1 {
					t.Errorf("span %d arrived %d times", id, n)
				}
			}
		})
	}
}

// With -spool.dir a record is committed once it is spooled: the offsets reach the end while the
// upstream answers nothing, and what was spooled is delivered when it answers.
func TestKafkaConsumeSpool(t *testing.T) {
	kc := startKafka(t)
	u := startUpstream(t)
	u.hold()
	cfg := consumeConfig(kc, "spool", u)
	cfg.Spool.Dir = t.TempDir()
	startGateway(t, cfg)
	ids := idRange(700, 40)
	produceSpans(t, kc, "otlp_spans", ids...)
	waitCommittedToEnd(t, kc, "spool", int64(len(ids)))
	if n := u.distinct(); n != 0 {
		t.Fatalf("%d spans delivered while the upstream was held", n)
	}
	u.release()
	eventually(t, func() string { return fmt.Sprintf("%d of %d spans at the upstream", u.distinct(), len(ids)) },
		func() bool { return u.distinct() == len(ids) })
}

// While a member waits for room (its upstream answers nothing and its queue is full), a second
// member joining is not kept waiting: the first gives up the records it could not admit, the
// group rebalances and the second reads its partitions; once the upstream answers, every span
// is delivered.
func TestKafkaConsumeRebalanceUnderBackpressure(t *testing.T) {
	kc := startKafka(t)
	u := startUpstream(t)
	u.hold()
	small := func() Config {
		cfg := consumeConfig(kc, "pressure", u)
		cfg.Pipeline.QueueMaxBytes, cfg.Pipeline.BatchMaxBytes = 64<<10, 16<<10
		return cfg
	}
	before := metricSum(t, "otlpgate_kafka_consume_backpressure_waits_total", "", "")
	startGateway(t, small())
	ids := idRange(1, 120)
	values := make([][]byte, len(ids))
	for i, id := range ids {
		values[i] = traceBody(t, 4<<10, id)
	}
	produceValues(t, kc, "otlp_spans", func(i int) []byte { return values[i] }, len(values))
	eventually(t, func() string { return "the first member never waited for room" }, func() bool {
		return metricSum(t, "otlpgate_kafka_consume_backpressure_waits_total", "", "") > before
	})
	b := startGateway(t, small())
	eventually(t, func() string { return fmt.Sprintf("the second member holds %v", b.kc.Lag()) }, func() bool { return len(b.kc.Lag()) > 0 })
	u.release()
	eventually(t, func() string { return fmt.Sprintf("%d of %d spans at the upstream", u.distinct(), len(ids)) },
		func() bool { return u.distinct() == len(ids) })
	waitCommittedToEnd(t, kc, "pressure", int64(len(ids)))
}

// With -kafka.consume.tenant-from-headers a record's tenant is the one its Kafka headers name
// (as a Collector's Kafka exporter writes them with include_metadata_keys), and the
// destinations' match-header routes send each tenant's spans to its own upstream: acme's
// records to a, beta's to b, and those of a tenant no route names, or of none, to the
// destination without a match-header; each span exactly once, at exactly one upstream.
func TestKafkaConsumeTenantHeaders(t *testing.T) {
	kc := startKafka(t)
	a, b, rest := startUpstream(t), startUpstream(t), startUpstream(t)
	cfg := consumeConfig(kc, "tenants", a)
	cfg.Tenants.Headers = []string{"x-scope-orgid"}
	cfg.KafkaConsume.TenantFromHeaders = true
	cfg.Destinations = nil
	for _, spec := range []string{destSpec("a", a.addr, "match-header=x-scope-orgid:acme"),
		destSpec("b", b.addr, "match-header=x-scope-orgid:beta"), destSpec("rest", rest.addr)} {
		d, err := client.ParseDest(spec, client.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		cfg.Destinations = append(cfg.Destinations, d)
	}
	g := startGateway(t, cfg)

	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...), kgo.DefaultProduceTopic("otlp_spans"),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	want := map[*upstream]map[uint64]int{a: {}, b: {}, rest: {}}
	var recs []*kgo.Record
	id := uint64(0)
	for i := range 60 {
		id++
		r := &kgo.Record{Value: traceBody(t, 0, id, id+1000)}
		to := rest
		switch i % 4 {
		case 0:
			r.Headers, to = []kgo.RecordHeader{{Key: "X-Scope-OrgID", Value: []byte("acme")}}, a
		case 1:
			r.Headers, to = []kgo.RecordHeader{{Key: "x-scope-orgid", Value: []byte("beta")}, {Key: "other", Value: []byte("acme")}}, b
		case 2:
			r.Headers = []kgo.RecordHeader{{Key: "x-scope-orgid", Value: []byte("gamma")}}
		}
		want[to][id], want[to][id+1000] = 1, 1
		recs = append(recs, r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	got := func() string {
		var out []string
		for _, u := range []*upstream{a, b, rest} {
			u.mu.Lock()
			out = append(out, fmt.Sprint(u.ids))
			u.mu.Unlock()
		}
		return strings.Join(out, " ")
	}
	wanted := fmt.Sprint(want[a]) + " " + fmt.Sprint(want[b]) + " " + fmt.Sprint(want[rest])
	eventually(t, func() string { return "got " + got() + ", want " + wanted }, func() bool { return got() == wanted })
	waitCommittedToEnd(t, kc, "tenants", 60)
	if err := g.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got() != wanted {
		t.Fatalf("after shutdown: got %s, want %s", got(), wanted)
	}
}

// A partition the client stops fetching while the brokers hold records past the consumer's
// position is logged and counted as stalled once -kafka.consume.stall-timeout passed, and its
// lag shows the records waiting (before, the lag came from the fetches only and showed none);
// once the brokers answer the fetches again, every span is delivered and no partition counts as
// stalled. The brokers hold every fetch request unanswered meanwhile, as a leader that takes
// requests and serves none.
func TestKafkaConsumeStalledPartition(t *testing.T) {
	kc := startKafka(t)
	u := startUpstream(t)
	cfg := consumeConfig(kc, "stall", u)
	cfg.KafkaConsume.StallTimeout = time.Second
	logs := &logLines{}
	stalls := metricSum(t, "otlpgate_kafka_consume_stalls_total", "", "")
	g, err := New(cfg, slog.New(logs))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Shutdown(context.Background()) })

	produceSpans(t, kc, "otlp_spans", idRange(1, 60)...)
	eventually(t, func() string { return fmt.Sprintf("%d of 60 spans at the upstream", u.distinct()) },
		func() bool { return u.distinct() == 60 })
	release := make(chan struct{})
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	kc.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		kc.SleepControl(func() { <-release })
		return nil, nil, false // answered as the brokers answer it, once released
	})
	produceSpans(t, kc, "otlp_spans", idRange(101, 60)...)
	lagSum := func() (n int64) {
		for _, ps := range g.kc.Lag() {
			for _, l := range ps {
				n += l
			}
		}
		return n
	}
	eventually(t, func() string { return fmt.Sprintf("lag %v while no fetch is answered", g.kc.Lag()) },
		func() bool { return lagSum() == 60 })
	eventually(t, func() string { return "no partition counted as stalled" }, func() bool {
		return metricSum(t, "otlpgate_kafka_consume_stalled_partitions", "", "") == kafkaPartitions &&
			metricSum(t, "otlpgate_kafka_consume_stalls_total", "", "") == stalls+kafkaPartitions
	})
	if n := logs.count("kafka consumer partition stalled: the brokers hold records past its read position"); n != kafkaPartitions {
		t.Errorf("%d stalled partitions logged, want %d", n, kafkaPartitions)
	}
	if n := u.distinct(); n != 60 {
		t.Fatalf("%d spans at the upstream while no fetch was answered", n)
	}

	close(release)
	released = true
	eventually(t, func() string { return fmt.Sprintf("%d of 120 spans at the upstream", u.distinct()) },
		func() bool { return u.distinct() == 120 })
	eventually(t, func() string { return "partitions still counted as stalled" }, func() bool {
		return metricSum(t, "otlpgate_kafka_consume_stalled_partitions", "", "") == 0
	})
	if n := logs.count("kafka consumer reads a stalled partition again"); n != kafkaPartitions {
		t.Errorf("%d partitions logged as read again, want %d", n, kafkaPartitions)
	}
	eventually(t, func() string { return fmt.Sprintf("lag %v", g.kc.Lag()) }, func() bool { return lagSum() == 0 })
}

// logLines is a slog handler that keeps the messages logged.
type logLines struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logLines) Enabled(context.Context, slog.Level) bool { return true }
func (l *logLines) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logLines) WithGroup(string) slog.Handler            { return l }
func (l *logLines) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.msgs = append(l.msgs, r.Message)
	l.mu.Unlock()
	return nil
}

// count is how many messages began with prefix.
func (l *logLines) count(prefix string) (n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range l.msgs {
		if strings.HasPrefix(m, prefix) {
			n++
		}
	}
	return n
}

// A consumer with a backlog fills only its share of the queue (-kafka.consume.queue-share):
// behind an upstream that answers nothing, it stops at half of -queue.max-bytes and waits,
// /readyz stays true, and OTLP/HTTP clients beside it are admitted into the other half, where
// a consumer that took the whole queue would have them refused with 429. Once the upstream
// answers, every record and every pushed span arrives exactly once.
func TestKafkaConsumeLeavesRoomForPushClients(t *testing.T) {
	kc := startKafka(t)
	u := startUpstream(t)
	u.hold()
	cfg := consumeConfig(kc, "share", u)
	cfg.HTTP.Listen = "127.0.0.1:0"
	cfg.Pipeline.QueueMaxBytes, cfg.Pipeline.BatchMaxBytes = 256<<10, 16<<10
	before := metricSum(t, "otlpgate_kafka_consume_backpressure_waits_total", "", "")
	g := startGateway(t, cfg)
	ids := idRange(1, 120)
	produceValues(t, kc, "otlp_spans", func(i int) []byte { return traceBody(t, 4<<10, ids[i]) }, len(ids))
	eventually(t, func() string { return "the consumer never waited for its share" }, func() bool {
		return metricSum(t, "otlpgate_kafka_consume_backpressure_waits_total", "", "") > before
	})
	share := int64(cfg.KafkaConsume.QueueShare * float64(cfg.Pipeline.QueueMaxBytes))
	if q := g.Pipeline().QueuedBytes(); q > share || q < share/2 {
		t.Fatalf("the consumer waits with %d bytes queued, want up to its share, %d", q, share)
	}
	if code, body := readyz(t, g); code != http.StatusOK {
		t.Fatalf("/readyz while the consumer waits for its share = %d %q", code, body)
	}
	pushed := idRange(1000, 12) // 12 x 8 KiB: more than the room a consumer at 100% would leave
	for _, id := range pushed {
		if code := post(t, g, traceBody(t, 8<<10, id)); code != http.StatusOK {
			t.Fatalf("POST span %d beside the waiting consumer: status %d (queued %d of %d)", id, code,
				g.Pipeline().QueuedBytes(), cfg.Pipeline.QueueMaxBytes)
		}
	}
	u.release()
	want := append(append([]uint64(nil), ids...), pushed...)
	eventually(t, func() string { return fmt.Sprintf("%d of %d spans at the upstream", u.distinct(), len(want)) },
		func() bool { return u.distinct() == len(want) })
	for _, id := range want {
		if n := u.count(id); n != 1 {
			t.Fatalf("span %d arrived %d times", id, n)
		}
	}
	waitCommittedToEnd(t, kc, "share", int64(len(ids)))
}

// With a spool the consumer's share is of -spool.max-bytes, and the segment being written is
// not counted: it is freed only once it is full and every destination finished it, so a
// consumer that waited for it would wait forever. With the smallest spool the flags allow (two
// segments), whose half is one segment, a backlog of four segments goes through.
func TestKafkaConsumeShareOfSmallSpool(t *testing.T) {
	kc := startKafka(t)
	u := startUpstream(t)
	cfg := consumeConfig(kc, "smallspool", u)
	cfg.Spool.Dir = t.TempDir()
	cfg.Spool.SegmentBytes, cfg.Spool.MaxBytes = 64<<10, 128<<10
	startGateway(t, cfg)
	ids := idRange(2000, 60)
	produceValues(t, kc, "otlp_spans", func(i int) []byte { return traceBody(t, 4<<10, ids[i]) }, len(ids))
	eventually(t, func() string { return fmt.Sprintf("%d of %d spans at the upstream", u.distinct(), len(ids)) },
		func() bool { return u.distinct() == len(ids) })
	waitCommittedToEnd(t, kc, "smallspool", int64(len(ids)))
}
