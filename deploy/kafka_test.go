package deploy

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/otlpgate/otlpgate/internal/listenlog"
	"github.com/otlpgate/otlpgate/internal/testkit"
)

// kafkaBrokers is the brokers the agent → Kafka → gateway manifests name.
const kafkaBrokers = "kafka-0.kafka.observability.svc:9092,kafka-1.kafka.observability.svc:9092,kafka-2.kafka.observability.svc:9092"

// readKafkaTier returns the objects of deploy/kafka by kind and name.
func readKafkaTier(t *testing.T) map[string]object {
	t.Helper()
	files, _ := filepath.Glob("kafka/*.yaml")
	if len(files) == 0 {
		t.Fatal("no manifests in deploy/kafka")
	}
	out := map[string]object{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range decodeObjects(t, f, raw) {
			out[o.Kind+"/"+o.Metadata.Name] = o
		}
	}
	return out
}

// The agent → Kafka → gateway manifests hold what every otlpgate workload must (probes, grace
// periods, the agent's spool on the node, the gateways' disruption budget and spread, scraping,
// and command lines otlpgate -check accepts); the agent produces to Kafka and the gateways
// consume from it with the same brokers.
func TestKafkaTierManifests(t *testing.T) {
	ms := readKafkaTier(t)
	var objs []object
	for _, o := range ms {
		objs = append(objs, o)
	}
	w := checkWorkloads(t, "deploy/kafka", objs)
	if w.edges != 1 || w.gateways != 1 || !w.edgeSpool || !w.nodeName {
		t.Fatalf("%d agent DaemonSets, %d gateway Deployments, spool %v, node name %v: want one each, spooling, labelled", w.edges, w.gateways, w.edgeSpool, w.nodeName)
	}
	agent, gateway := w.args["DaemonSet/otlpgate-agent"], w.args["Deployment/otlpgate-gateway"]
	if !slices.ContainsFunc(agent, func(a string) bool {
		return strings.HasPrefix(a, "-dest=") && strings.Contains(a, "protocol=kafka") && strings.Contains(a, "brokers="+kafkaBrokers)
	}) {
		t.Errorf("the agent does not produce to %s: %q", kafkaBrokers, agent)
	}
	if !slices.Contains(gateway, "-kafka.consume.brokers="+kafkaBrokers) || !slices.Contains(gateway, "-kafka.consume.topics=otlp_spans,otlp_metrics,otlp_logs") {
		t.Errorf("the gateways do not consume the agents' topics from %s: %q", kafkaBrokers, gateway)
	}
}

// The manifests' own command lines carry a span from an application through the agent, a Kafka
// cluster of three brokers (in the test process, in place of the manifests' brokers) and the
// gateway to the backend: it arrives once, its resource labelled with the node's name.
func TestKafkaTierFirstSpan(t *testing.T) {
	kc, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(6, "otlp_spans", "otlp_metrics", "otlp_logs"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	backend := testkit.StartGRPCSink(t, "")
	dir := t.TempDir()
	repl := map[string]string{
		kafkaBrokers: strings.Join(kc.ListenAddrs(), ","),
		"endpoint=backend.observability.svc:4317": "endpoint=" + backend.Addr(),
		"-grpc.listen=:4317":                      "-grpc.listen=127.0.0.1:0",
		"-http.listen=:4318":                      "-http.listen=127.0.0.1:0",
		"-admin.listen=:8888":                     "-admin.listen=127.0.0.1:0",
		"-spool.dir=/var/lib/otlpgate/spool":      "-spool.dir=" + filepath.Join(dir, "spool"),
	}
	ms := readKafkaTier(t)
	start := func(name string) (*testkit.LockedBuffer, <-chan struct{}) {
		o := ms[name]
		c := o.Spec.Template.Spec.Containers[0]
		var args, env []string
		for _, a := range kubeletArgs(t, name, c) {
			for from, to := range repl {
				a = strings.ReplaceAll(a, from, to)
			}
			args = append(args, a)
		}
		for k, v := range containerEnv(t, name, c) {
			env = append(env, k+"="+v)
		}
		log, exited := startOtlpgate(t, args, env)
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("%s %q:\n%s", name, args, log.String())
			}
		})
		return log, exited
	}
	start("Deployment/otlpgate-gateway")
	log, exited := start("DaemonSet/otlpgate-agent")
	agent := testkit.WaitAddrs(t, log.String, exited, listenlog.GRPC)[0]
	sendSpans(t, agent, nil, resource{attrs: map[string]string{"service.name": "through-kafka"}, span: "first", spanID: 1})
	if got, want := received(t, backend, "x-scope-orgid", 1), []string{"first [k8s.node.name=node-1 service.name=through-kafka] x-scope-orgid="}; !slices.Equal(got, want) {
		t.Errorf("the backend received %q, want %q", got, want)
	}
}
