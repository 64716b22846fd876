package deploy

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/otlpgate/otlpgate/internal/testkit"
)

// helmBinary returns bin/tools/helm when it is the helm the Makefile pins (HELM_VERSION), built
// by `make helm` from its Go module (testkit.PinnedTool: skipped without it, failed in CI).
func helmBinary(t *testing.T) string {
	t.Helper()
	return testkit.PinnedTool(t, "..", "helm", "HELM_VERSION", "helm.sh/helm/v3", "helm")
}

const chart = "helm/otlpgate"

// The oldest Kubernetes the chart supports (Chart.yaml's kubeVersion): the chart is rendered
// for it.
const kubeVersion = "1.30.0"

// The values sets the chart is linted and rendered with: its defaults and the files in ci/.
func valuesSets(t *testing.T) []string {
	t.Helper()
	files, _ := filepath.Glob(chart + "/ci/*-values.yaml")
	if len(files) < 3 {
		t.Fatalf("values sets: %v", files)
	}
	return append([]string{""}, files...)
}

func helmArgs(values string, args ...string) []string {
	if values != "" {
		args = append(args, "-f", values)
	}
	return args
}

func TestHelmLint(t *testing.T) {
	helm := helmBinary(t)
	for _, v := range valuesSets(t) {
		out, err := exec.Command(helm, helmArgs(v, "lint", "--strict", "--kube-version", kubeVersion, chart)...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "0 chart(s) failed") {
			t.Errorf("helm lint --strict %s: %v\n%s", v, err, out)
		}
	}
}

// render runs helm template as a release "rel" in namespace "observability".
func render(t *testing.T, helm, values string, set ...string) ([]byte, error) {
	t.Helper()
	args := helmArgs(values, "template", "rel", chart, "--namespace", "observability", "--kube-version", kubeVersion)
	for _, s := range set {
		args = append(args, "--set", s)
	}
	return exec.Command(helm, args...).CombinedOutput()
}

// The chart renders, for each values set, objects that pass the checks of the plain manifests
// (checkWorkloads: every flag exists, otlpgate -check accepts each container's command line,
// probes, grace periods, the spool's hostPath, the gateways' budget and spread, scraping) and
// hold the destinations, spool, tenants and processing the values ask for.
func TestHelmTemplate(t *testing.T) {
	helm := helmBinary(t)
	const gatewayDNS = "dns:///rel-otlpgate-gateway.observability.svc:4317"
	for _, tc := range []struct {
		values            string
		edges, gateways   int
		edgeDests         []string
		gatewayDests      []string
		edgeFlags         []string // flags the edge's args hold, each exactly
		gatewayFlags      []string
		spoolPath         string // the spool's hostPath
		podMonitor        bool
		edgeEnvFromSecret string
		edgeService       bool // a Service routes to the node's own edge, no host ports
	}{
		{
			values: "", edges: 1, gateways: 1,
			edgeDests:    []string{"name=gateways,endpoint=" + gatewayDNS + ",mode=stream,protocol=otep,rebalance-timeout=30s,streams=4"},
			gatewayDests: []string{"name=collector,endpoint=opentelemetry-collector.observability.svc:4317"},
			edgeFlags:    []string{"-spool.dir=/var/lib/otlpgate/spool", "-spool.max-bytes=2GiB", "-spool.full=refuse", "-resource.set=k8s.node.name=${env:NODE_NAME}", "-uds.listen="},
			gatewayFlags: []string{"-grpc.stream.max-age=5m", "-uds.listen="},
			spoolPath:    "/var/lib/otlpgate/observability.rel",
		},
		{
			values: chart + "/ci/edge-only-values.yaml", edges: 1,
			edgeDests: []string{
				"name=collector,endpoint=otel-collector-gateway.observability.svc:4317,protocol=v1",
				`name=vendor,compression=gzip,endpoint=https://otlp.vendor.example,header=x-api-key:${env:VENDOR_KEY},header="x-team:platform,observability",protocol=http`,
			},
			edgeFlags:         []string{"-spool.dir=/var/lib/otlpgate/spool"},
			spoolPath:         "/var/lib/otlpgate/observability.rel",
			edgeEnvFromSecret: "VENDOR_KEY",
		},
		{
			values: chart + "/ci/gateway-only-values.yaml", gateways: 1,
			gatewayDests: []string{"name=collector,endpoint=otel-collector-gateway.observability.svc:4317,concurrency=16"},
			podMonitor:   true,
		},
		{
			values: chart + "/ci/spool-tenants-values.yaml", edges: 1, gateways: 1,
			edgeDests: []string{"name=gateways,concurrency=8,endpoint=" + gatewayDNS + ",forward-headers=x-scope-orgid,mode=unary,protocol=v1"},
			gatewayDests: []string{
				"name=acme,endpoint=mimir-acme.observability.svc:4317,forward-headers=x-scope-orgid,match-header=x-scope-orgid:acme",
				"name=rest,endpoint=otel-collector-gateway.observability.svc:4317,forward-headers=x-scope-orgid",
			},
			edgeFlags: []string{"-spool.max-bytes=8GiB", "-spool.segment-bytes=128MiB", "-spool.full=drop-oldest", "-spool.sync=always",
				"-intake.headers=x-scope-orgid", "-intake.headers.default=shared", "-tenant.rate=20MiB/s",
				"-resource.set=deployment.environment=production", "-resource.set=k8s.cluster.name=eu-1", "-resource.delete=host.ip",
				"-drop=resource:service.name=healthcheck*", "-uds.listen=/var/run/otlpgate/oc-daemon.sock", "-kafka.listen=:9093"},
			gatewayFlags: []string{"-intake.headers=x-scope-orgid", "-tenant.rate=50MiB/s", "-tenant.burst=100MiB", "-sample.traces=25"},
			spoolPath:    "/mnt/otlpgate/observability.rel",
			podMonitor:   true,
			edgeService:  true,
		},
	} {
		name := tc.values
		if name == "" {
			name = "defaults"
		}
		t.Run(filepath.Base(name), func(t *testing.T) {
			out, err := render(t, helm, tc.values)
			if err != nil {
				t.Fatalf("helm template: %v\n%s", err, out)
			}
			objs := decodeObjects(t, name, out)
			w := checkWorkloads(t, "chart "+name, objs)
			if w.edges != tc.edges || w.gateways != tc.gateways {
				t.Fatalf("%d edge DaemonSets and %d gateway Deployments, want %d and %d", w.edges, w.gateways, tc.edges, tc.gateways)
			}
			if !w.edgeSpool || !w.nodeName {
				t.Errorf("edge: spool on a hostPath %v, k8s.node.name from the downward API %v", w.edgeSpool, w.nodeName)
			}
			byKind := map[string][]object{}
			for _, o := range objs {
				byKind[o.Kind] = append(byKind[o.Kind], o)
			}
			// Services: the gateways' (headless, checked below) and, when asked for, the edges'.
			services := map[string]object{}
			for _, svc := range byKind["Service"] {
				for _, wl := range append(byKind["DaemonSet"], byKind["Deployment"]...) {
					if selects(svc.Spec.Selector, wl.Spec.Template.Metadata.Labels) {
						services[wl.Kind] = svc
					}
				}
			}
			if len(services) != len(byKind["Service"]) {
				t.Errorf("a Service selects no workload, or one selects both: %v", byKind["Service"])
			}
			if svc, ok := services["DaemonSet"]; ok != tc.edgeService || (ok && svc.Spec.InternalTrafficPolicy != "Local") {
				t.Errorf("edge Service %v (internalTrafficPolicy %q), want %v with Local", ok, svc.Spec.InternalTrafficPolicy, tc.edgeService)
			}
			if tc.edges > 0 {
				edge := byKind["DaemonSet"][0]
				hostPorts := 0
				for _, p := range edge.Spec.Template.Spec.Containers[0].Ports {
					hostPorts += p.HostPort
				}
				if (hostPorts != 0) == tc.edgeService {
					t.Errorf("edge: host ports %d with an edge Service %v: want one way to the node's edge", hostPorts, tc.edgeService)
				}
				args := w.args["DaemonSet/"+edge.Metadata.Name]
				checkDests(t, "edge", args, tc.edgeDests)
				checkHas(t, "edge", args, tc.edgeFlags)
				var hostPath string
				for _, v := range edge.Spec.Template.Spec.Volumes {
					if v.Name == "spool" && v.HostPath != nil {
						hostPath = v.HostPath.Path
					}
				}
				if hostPath != tc.spoolPath {
					t.Errorf("the spool's hostPath is %q, want %q (one directory per release)", hostPath, tc.spoolPath)
				}
				if tc.edgeEnvFromSecret != "" {
					found := false
					for _, e := range edge.Spec.Template.Spec.Containers[0].Env {
						found = found || (e.Name == tc.edgeEnvFromSecret && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil)
					}
					if !found {
						t.Errorf("edge: no %s from a Secret (edge.extraEnv)", tc.edgeEnvFromSecret)
					}
				}
			}
			if tc.gateways > 0 {
				gw := byKind["Deployment"][0]
				args := w.args["Deployment/"+gw.Metadata.Name]
				checkDests(t, "gateway", args, tc.gatewayDests)
				checkHas(t, "gateway", args, tc.gatewayFlags)
				// The edges' default destination resolves the gateways through a headless
				// Service of this release that selects them.
				svc := false
				for _, s := range byKind["Service"] {
					if "dns:///"+s.Metadata.Name+".observability.svc:4317" == gatewayDNS && s.Spec.ClusterIP == "None" && selects(s.Spec.Selector, gw.Spec.Template.Metadata.Labels) {
						svc = true
					}
				}
				if !svc {
					t.Errorf("no headless Service %s selects the gateways", gatewayDNS)
				}
			} else if services["Deployment"].Kind != "" || len(byKind["PodDisruptionBudget"]) > 0 {
				t.Errorf("no gateway, yet a gateway Service or a PodDisruptionBudget: %v", byKind)
			}
			if got := len(byKind["PodMonitor"]) > 0; got != tc.podMonitor {
				t.Errorf("PodMonitor rendered %v, want %v", got, tc.podMonitor)
			}
			for name := range w.args {
				if tc.podMonitor && w.monitoredBy[name] == "" {
					t.Errorf("the PodMonitor does not select %s", name)
				}
			}
		})
	}
}

// checkDests checks the -dest flags, exactly and in order.
func checkDests(t *testing.T, where string, args, want []string) {
	t.Helper()
	var got []string
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "-dest="); ok {
			got = append(got, v)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s: -dest\n got %q\nwant %q", where, got, want)
	}
}

func checkHas(t *testing.T, where string, args, want []string) {
	t.Helper()
	for _, w := range want {
		if !slices.Contains(args, w) {
			t.Errorf("%s: no %s in %q", where, w, args)
		}
	}
}

// Values that leave a tier nowhere to send, or that the chart does not know, are refused at
// render time, naming the value to set.
func TestHelmTemplateRefuses(t *testing.T) {
	helm := helmBinary(t)
	for _, tc := range []struct {
		set  []string
		want string
	}{
		{[]string{"gateway.enabled=false"}, "edge.destinations is empty and gateway.enabled is false"},
		{[]string{"gateway.destinations=null"}, "gateway.destinations is empty"},
		{[]string{"image.repository="}, "image.repository is required"},
		// values.schema.json: a misspelt key or a value otlpgate would refuse is refused here,
		// naming it, instead of being ignored or failing in the pod.
		{[]string{"edge.spool.maxbytes=1GiB"}, "at '/edge/spool': additional properties 'maxbytes' not allowed"},
		{[]string{"edge.spool.full=drop"}, "at '/edge/spool/full': value must be one of 'refuse', 'drop-oldest'"},
		{[]string{"gateway.replica=2"}, "at '/gateway': additional properties 'replica' not allowed"},
		{[]string{"edge.extraArgs[0]=kafka.listen=:9093"}, "at '/edge/extraArgs/0'"},
	} {
		out, err := render(t, helm, "", tc.set...)
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("helm template --set %v: %v, want an error saying %q:\n%s", tc.set, err, tc.want, out)
		}
	}
}
