package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/internal/testkit"
	"github.com/otlpgate/otlpgate/server/kafkaconsume"
)

// The -kafka.consume.* flags become the consumer's configuration: brokers and topics read,
// the scan depth the network intakes', the SASL password from its file, TLS from the CA; and
// what cannot work is refused naming the flag.
func TestKafkaConsumeFlags(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	certFile, _ := testkit.SelfSigned(t, dir)
	parse := func(args ...string) (config, error) {
		t.Helper()
		cfg := defaultConfig()
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		registerFlags(fs, &cfg)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return cfg, finishConfig(&cfg)
	}
	c, err := parse("-kafka.consume.brokers", "k1:9092, k2:9092", "-kafka.consume.topics", "otlp_spans,team.logs:logs:otlp_json",
		"-kafka.consume.group", "g", "-grpc.scan-depth", "resource", "-kafka.consume.sasl.mechanism", "scram-sha-512",
		"-kafka.consume.sasl.username", "u", "-kafka.consume.sasl.password-file", pw, "-kafka.consume.tls.ca", certFile)
	if err != nil {
		t.Fatal(err)
	}
	k := c.gw.KafkaConsume
	want := []kafkaconsume.Topic{{Name: "otlp_spans", Signal: fastpath.Traces}, {Name: "team.logs", Signal: fastpath.Logs, JSON: true}}
	if strings.Join(k.Brokers, ",") != "k1:9092,k2:9092" || len(k.Topics) != 2 || k.Topics[0] != want[0] || k.Topics[1] != want[1] ||
		k.Group != "g" || k.ScanDepth != fastpath.DepthResource || k.SASLMechanism != "scram-sha-512" || k.SASLUser != "u" ||
		k.SASLPassword != "s3cret" || k.TLS == nil || k.TLS.RootCAs == nil {
		t.Errorf("%+v", k)
	}
	if c, err := parse(); err != nil || c.gw.KafkaConsume.On() {
		t.Errorf("without flags the consumer is on (%v) or refused: %v", c.gw.KafkaConsume.On(), err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-kafka.consume.brokers", "k:9092"}, "-kafka.consume.topics"},
		{[]string{"-kafka.consume.brokers", "k:9092", "-kafka.consume.topics", "mine"}, "name its signal"},
		{[]string{"-kafka.consume.brokers", "k:9092", "-kafka.consume.topics", "otlp_spans", "-kafka.consume.sasl.mechanism", "plain"}, "-kafka.consume.sasl.username"},
		{[]string{"-kafka.consume.brokers", "k:9092", "-kafka.consume.topics", "otlp_spans", "-kafka.consume.tls.cert", certFile}, "-kafka.consume.tls.key"},
		{[]string{"-kafka.consume.brokers", "k:9092", "-kafka.consume.topics", "otlp_spans", "-kafka.consume.encoding", "avro"}, "-kafka.consume.encoding"},
	} {
		if _, err := parse(tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one naming %s", tc.args, err, tc.want)
		}
	}
}
