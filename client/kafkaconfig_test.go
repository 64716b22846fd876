package client

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// A Kafka -dest is read with its brokers as a list that goes on past commas, its topics
// defaulting to the Collector's, and the password from its file; a bad value is refused with
// an error that names what to change.
func TestKafkaDest(t *testing.T) {
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := ParseDest("name=buffer,protocol=kafka,brokers=a:9092,b:9092|c:9092,metrics-topic=m,partition=trace_id,compression=lz4,"+
		"sasl-mechanism=scram-sha-512,sasl-username=u,sasl-password-file="+pw+",tls=true", DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a:9092", "b:9092", "c:9092"}; !reflect.DeepEqual(c.Kafka.Brokers, want) {
		t.Errorf("brokers %q, want %q", c.Kafka.Brokers, want)
	}
	if got, want := c.Kafka.Topics(), [3]string{"otlp_spans", "m", "otlp_logs"}; got != want {
		t.Errorf("topics %q, want %q", got, want)
	}
	if c.Kafka.Password() != "s3cret" || c.Kafka.MaxMessage() != DefaultKafkaMaxMessageBytes || c.TLS.Insecure {
		t.Errorf("password %q, max message %d, insecure %v", c.Kafka.Password(), c.Kafka.MaxMessage(), c.TLS.Insecure)
	}
	c, err = ParseDest("name=k,protocol=kafka,brokers=a:1,topic=all,logs-topic=l", DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.Kafka.Topics(), [3]string{"all", "all", "l"}; got != want {
		t.Errorf("topics %q, want %q", got, want)
	}
	f := func(spec, want string) {
		t.Helper()
		_, err := ParseDest(spec, DefaultConfig())
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error with %q", spec, err, want)
		}
	}
	f("name=k,protocol=kafka", "brokers is required")
	f("name=k,protocol=kafka,brokers=a", `brokers: "a" is not host:port`)
	f("name=k,protocol=kafka,brokers=a:1,endpoint=b:2", "endpoint, resolver, endpoints and path are for the other protocols")
	f("name=k,protocol=kafka,brokers=a:1,topic=a/b", `topic "a/b": holds '/'`)
	f("name=k,protocol=kafka,brokers=a:1,traces-topic=..", `traces-topic "..": not a topic name`)
	f("name=k,protocol=kafka,brokers=a:1,encoding=avro", `encoding "avro" (want otlp_proto or otlp_json)`)
	f("name=k,protocol=kafka,brokers=a:1,partition=service", `partition "service" (want round_robin, trace_id or resource)`)
	f("name=k,protocol=kafka,brokers=a:1,compression=brotli", `compression "brotli"`)
	f("name=k,protocol=kafka,brokers=a:1,max-message-bytes=100", "max-message-bytes 100 outside 1KiB..1GiB")
	f("name=k,protocol=kafka,brokers=a:1,sasl-mechanism=plain", "sasl-mechanism=plain needs sasl-username and sasl-password-file")
	f("name=k,protocol=kafka,brokers=a:1,sasl-username=u", "need sasl-mechanism")
	f("name=k,protocol=kafka,brokers=a:1,sasl-mechanism=gssapi", `sasl-mechanism "gssapi"`)
	f("name=k,protocol=kafka,brokers=a:1,header=k:v", "protocol kafka sends no fixed headers")
	f("name=k,protocol=kafka,brokers=a:1,mode=stream", "protocol kafka has no mode")
	f("name=k,protocol=kafka,brokers=a:1,forward-headers=grpc-x", `forward-headers: "grpc-x" is reserved`)
	f("name=k,endpoint=h:1,brokers=a:1", "are for protocol kafka, not v1")
	f("name=k,endpoint=h:1,traces-topic=t", "are for protocol kafka, not v1")
	f("name=k,protocol=kafka,brokers=a:1,sasl-mechanism=plain,sasl-username=u,sasl-password-file=/nonexistent/pw", "sasl-password-file")
}
