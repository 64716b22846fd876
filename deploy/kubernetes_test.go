package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// object is the part of a Kubernetes object the checks read.
type object struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Spec struct {
		ClusterIP string `yaml:"clusterIP"`
		// Service
		Selector              any    `yaml:"selector"`
		InternalTrafficPolicy string `yaml:"internalTrafficPolicy"`
		// PodDisruptionBudget
		MaxUnavailable any `yaml:"maxUnavailable"`
		MinAvailable   any `yaml:"minAvailable"`
		// DaemonSet
		UpdateStrategy struct {
			RollingUpdate struct {
				MaxSurge any `yaml:"maxSurge"`
			} `yaml:"rollingUpdate"`
		} `yaml:"updateStrategy"`
		// PodMonitor
		PodMetricsEndpoints []struct {
			Port string `yaml:"port"`
			Path string `yaml:"path"`
		} `yaml:"podMetricsEndpoints"`
		Template struct {
			Metadata struct {
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"metadata"`
			Spec podSpec `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type podSpec struct {
	TerminationGracePeriodSeconds int `yaml:"terminationGracePeriodSeconds"`
	TopologySpreadConstraints     []struct {
		TopologyKey       string `yaml:"topologyKey"`
		WhenUnsatisfiable string `yaml:"whenUnsatisfiable"`
		LabelSelector     struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"labelSelector"`
	} `yaml:"topologySpreadConstraints"`
	InitContainers []container `yaml:"initContainers"`
	Containers     []container `yaml:"containers"`
	Volumes        []struct {
		Name     string `yaml:"name"`
		HostPath *struct {
			Path string `yaml:"path"`
		} `yaml:"hostPath"`
		EmptyDir              any `yaml:"emptyDir"`
		PersistentVolumeClaim any `yaml:"persistentVolumeClaim"`
		Ephemeral             any `yaml:"ephemeral"`
	} `yaml:"volumes"`
}

type container struct {
	Name  string   `yaml:"name"`
	Image string   `yaml:"image"`
	Args  []string `yaml:"args"`
	Env   []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom *struct {
			FieldRef *struct {
				FieldPath string `yaml:"fieldPath"`
			} `yaml:"fieldRef"`
			SecretKeyRef    any `yaml:"secretKeyRef"`
			ConfigMapKeyRef any `yaml:"configMapKeyRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
		HostPort      int    `yaml:"hostPort"`
	} `yaml:"ports"`
	ReadinessProbe struct {
		HTTPGet struct {
			Path string `yaml:"path"`
		} `yaml:"httpGet"`
	} `yaml:"readinessProbe"`
	Lifecycle struct {
		PreStop struct {
			Sleep struct {
				Seconds int `yaml:"seconds"`
			} `yaml:"sleep"`
		} `yaml:"preStop"`
	} `yaml:"lifecycle"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

// decodeObjects reads a stream of YAML documents (a manifest file, helm template's output).
func decodeObjects(t *testing.T, src string, raw []byte) []object {
	t.Helper()
	var out []object
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	for {
		var o object
		if err := dec.Decode(&o); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("%s: %v", src, err)
		}
		if o.Kind != "" {
			out = append(out, o)
		}
	}
}

func readManifests(t *testing.T) map[string]object {
	t.Helper()
	files, _ := filepath.Glob("kubernetes/*.yaml")
	if len(files) == 0 {
		t.Fatal("no Kubernetes manifests")
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

// The image the plain manifests name: a reference nobody can pull, so that a team that applies
// them without setting it sees ErrImagePull at once instead of running someone else's image.
const placeholderImage = "registry.invalid/otlpgate:set-me"

func TestKubernetesManifests(t *testing.T) {
	ms := readManifests(t)
	for _, want := range []string{"DaemonSet/otlpgate-edge", "Deployment/otlpgate-gateway", "Service/otlpgate-gateway",
		"PodDisruptionBudget/otlpgate-gateway", "PodMonitor/otlpgate"} {
		if _, ok := ms[want]; !ok {
			t.Fatalf("missing %s; have %v", want, ms)
		}
	}
	if ms["Service/otlpgate-gateway"].Spec.ClusterIP != "None" {
		t.Error("the gateway Service must be headless (clusterIP: None)")
	}
	var objs []object
	for _, o := range ms {
		objs = append(objs, o)
	}
	w := checkWorkloads(t, "deploy/kubernetes", objs)
	if w.edges != 1 || w.gateways != 1 {
		t.Fatalf("%d edge DaemonSets and %d gateway Deployments, want one each", w.edges, w.gateways)
	}
	// The edge keeps what it acknowledged on the node's disk, and labels what passes through
	// with the node's name.
	if !w.edgeSpool {
		t.Error("the edge DaemonSet has no -spool.dir on a hostPath volume")
	}
	if !w.nodeName {
		t.Error("the edge DaemonSet does not set k8s.node.name from the downward API")
	}
	for _, name := range []string{"DaemonSet/otlpgate-edge", "Deployment/otlpgate-gateway"} {
		spec := ms[name].Spec.Template.Spec
		if img := spec.Containers[0].Image; img != placeholderImage {
			t.Errorf("%s: image %q, want the placeholder %q that the docs tell to set", name, img, placeholderImage)
		}
		// Both ways of scraping are there: the annotations and the PodMonitor.
		if ms[name].Spec.Template.Metadata.Annotations["prometheus.io/scrape"] != "true" {
			t.Errorf("%s: no prometheus.io/scrape annotation", name)
		}
	}
	if w.monitoredBy["DaemonSet/otlpgate-edge"] != "PodMonitor/otlpgate" || w.monitoredBy["Deployment/otlpgate-gateway"] != "PodMonitor/otlpgate" {
		t.Errorf("the PodMonitor does not select both workloads: %v", w.monitoredBy)
	}
}

// workloads is what checkWorkloads found.
type workloads struct {
	edges, gateways int
	edgeSpool       bool              // every edge spools on a hostPath
	nodeName        bool              // every edge sets k8s.node.name from spec.nodeName
	monitoredBy     map[string]string // workload -> the PodMonitor that selects it
	args            map[string][]string
}

// checkWorkloads checks what every set of objects that runs otlpgate must get right, whether
// written by hand (deploy/kubernetes) or rendered by the chart: probes and grace periods, the
// spool's volume, the gateways' disruption budget and spread, scraping, and that otlpgate
// -check accepts each container's command line as the kubelet would hand it over.
func checkWorkloads(t *testing.T, src string, objs []object) workloads {
	t.Helper()
	w := workloads{edgeSpool: true, nodeName: true, monitoredBy: map[string]string{}, args: map[string][]string{}}
	for _, o := range objs {
		if o.Kind != "DaemonSet" && o.Kind != "Deployment" {
			continue
		}
		name := o.Kind + "/" + o.Metadata.Name
		where := src + ": " + name
		labels := o.Spec.Template.Metadata.Labels
		spec := o.Spec.Template.Spec
		var c *container
		for i := range spec.Containers {
			if spec.Containers[i].Name == "otlpgate" {
				c = &spec.Containers[i]
			}
		}
		if c == nil {
			t.Errorf("%s: no container named otlpgate", where)
			continue
		}
		if c.Image == "" || strings.HasSuffix(c.Image, ":latest") || !strings.Contains(path.Base(c.Image), ":") {
			t.Errorf("%s: image %q: name a tag, never latest", where, c.Image)
		}
		if c.ReadinessProbe.HTTPGet.Path != "/readyz" {
			t.Errorf("%s: readiness probe on %q, want /readyz", where, c.ReadinessProbe.HTTPGet.Path)
		}
		args := kubeletArgs(t, where, *c)
		w.args[name] = args
		flags := map[string][]string{}
		for _, a := range args {
			if k, v, ok := strings.Cut(strings.TrimPrefix(a, "-"), "="); ok && strings.HasPrefix(a, "-") {
				flags[k] = append(flags[k], v)
			}
		}
		checkFlagsExist(t, where, strings.Join(c.Args, "\n"))
		var shutdown time.Duration
		if v := flags["shutdown.timeout"]; len(v) > 0 {
			d, err := time.ParseDuration(v[len(v)-1])
			if err != nil {
				t.Fatalf("%s: -shutdown.timeout=%s: %v", where, v[len(v)-1], err)
			}
			shutdown = d
		}
		if shutdown == 0 {
			t.Errorf("%s: no -shutdown.timeout", where)
		}
		// The kubelet kills the pod at the grace period, counted from the start of preStop: it must
		// leave room for preStop and the whole drain.
		need := time.Duration(c.Lifecycle.PreStop.Sleep.Seconds)*time.Second + shutdown
		if got := time.Duration(spec.TerminationGracePeriodSeconds) * time.Second; got <= need {
			t.Errorf("%s: terminationGracePeriodSeconds %v leaves no room for preStop + -shutdown.timeout (%v)", where, got, need)
		}
		var admin int
		for _, p := range c.Ports {
			if p.Name == "admin" {
				admin = p.ContainerPort
			}
		}
		if v := flags["admin.listen"]; admin == 0 || len(v) == 0 || !strings.HasSuffix(v[len(v)-1], ":"+strconv.Itoa(admin)) {
			t.Errorf("%s: the admin port %d is not where -admin.listen=%v listens", where, admin, v)
		}
		switch o.Kind {
		case "DaemonSet":
			w.edges++
			w.edgeSpool = w.edgeSpool && checkSpoolVolume(t, where, o, *c, flags)
			w.nodeName = w.nodeName && hasNodeName(*c, flags)
		case "Deployment":
			w.gateways++
			checkGatewaySpread(t, where, o, objs)
		}
		// Scraping: the annotations name the admin port; a PodMonitor selects the pod by its
		// labels and names a port the container has.
		if ann := o.Spec.Template.Metadata.Annotations; ann["prometheus.io/scrape"] == "true" {
			if ann["prometheus.io/port"] != strconv.Itoa(admin) || ann["prometheus.io/path"] != "/metrics" {
				t.Errorf("%s: prometheus.io annotations %v do not name the admin port %d and /metrics", where, ann, admin)
			}
		}
		for _, m := range objs {
			if m.Kind != "PodMonitor" || !selects(m.Spec.Selector, labels) {
				continue
			}
			w.monitoredBy[name] = m.Kind + "/" + m.Metadata.Name
			for _, e := range m.Spec.PodMetricsEndpoints {
				if e.Port != "admin" || e.Path != "/metrics" {
					t.Errorf("%s: PodMonitor/%s scrapes port %q path %q, want admin /metrics", where, m.Metadata.Name, e.Port, e.Path)
				}
			}
		}
		if o.Spec.Template.Metadata.Annotations["prometheus.io/scrape"] != "true" && w.monitoredBy[name] == "" {
			t.Errorf("%s: neither scrape annotations nor a PodMonitor", where)
		}
		checkArgs(t, where, *c, args)
	}
	return w
}

// checkSpoolVolume: a DaemonSet's spool must outlive its pod, so it lives on the node (a
// hostPath), and two pods must never share it (no surge). It reports whether the edge spools.
func checkSpoolVolume(t *testing.T, where string, o object, c container, flags map[string][]string) bool {
	t.Helper()
	dirs := flags["spool.dir"]
	if len(dirs) == 0 || dirs[len(dirs)-1] == "" {
		return false
	}
	dir := dirs[len(dirs)-1]
	if len(flags["spool.max-bytes"]) == 0 {
		t.Errorf("%s: -spool.dir without -spool.max-bytes: size the spool for the node's disk", where)
	}
	var volume string
	for _, m := range c.VolumeMounts {
		if dir == m.MountPath || strings.HasPrefix(dir, strings.TrimSuffix(m.MountPath, "/")+"/") {
			volume = m.Name
		}
	}
	if volume == "" {
		t.Errorf("%s: -spool.dir=%s is on the container's own filesystem", where, dir)
		return false
	}
	for _, v := range o.Spec.Template.Spec.Volumes {
		if v.Name == volume && v.HostPath == nil {
			t.Errorf("%s: the spool's volume %s is not a hostPath: it would go with the pod", where, volume)
			return false
		}
	}
	if s := fmt.Sprint(o.Spec.UpdateStrategy.RollingUpdate.MaxSurge); s != "<nil>" && s != "0" && s != "0%" {
		t.Errorf("%s: maxSurge %s would run two pods on one spool directory", where, s)
	}
	return true
}

// hasNodeName reports whether the container sets k8s.node.name from the downward API.
func hasNodeName(c container, flags map[string][]string) bool {
	for _, v := range flags["resource.set"] {
		name, ok := strings.CutPrefix(v, "k8s.node.name=${env:")
		if !ok {
			continue
		}
		name = strings.TrimSuffix(name, "}")
		for _, e := range c.Env {
			if e.Name == name && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName" {
				return true
			}
		}
	}
	return false
}

// checkGatewaySpread: the gateways survive a node drain (a PodDisruptionBudget selects them)
// and spread over nodes and zones.
func checkGatewaySpread(t *testing.T, where string, o object, objs []object) {
	t.Helper()
	labels := o.Spec.Template.Metadata.Labels
	pdb := false
	for _, p := range objs {
		if p.Kind == "PodDisruptionBudget" && selects(p.Spec.Selector, labels) {
			pdb = true
			// The API server refuses a budget with both.
			if (p.Spec.MaxUnavailable == nil) == (p.Spec.MinAvailable == nil) {
				t.Errorf("%s: PodDisruptionBudget/%s sets maxUnavailable %v and minAvailable %v: want exactly one", where, p.Metadata.Name, p.Spec.MaxUnavailable, p.Spec.MinAvailable)
			}
		}
	}
	if !pdb {
		t.Errorf("%s: no PodDisruptionBudget selects the gateways", where)
	}
	keys := map[string]bool{}
	for _, c := range o.Spec.Template.Spec.TopologySpreadConstraints {
		if !selects(map[string]any{"matchLabels": anyMap(c.LabelSelector.MatchLabels)}, labels) || len(c.LabelSelector.MatchLabels) == 0 {
			t.Errorf("%s: a topology spread constraint on %s does not select the gateway's pods", where, c.TopologyKey)
		}
		keys[c.TopologyKey] = true
	}
	for _, k := range []string{"kubernetes.io/hostname", "topology.kubernetes.io/zone"} {
		if !keys[k] {
			t.Errorf("%s: no topology spread over %s", where, k)
		}
	}
}

func anyMap(m map[string]string) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// selects reports whether a selector (a Service's map, or {matchLabels: ...}) selects pods with
// these labels. An empty selector selects nothing here: none of ours means "every pod".
func selects(sel any, labels map[string]string) bool {
	m, _ := sel.(map[string]any)
	if ml, ok := m["matchLabels"].(map[string]any); ok {
		m = ml
	}
	if len(m) == 0 {
		return false
	}
	for k, v := range m {
		if labels[k] != fmt.Sprint(v) {
			return false
		}
	}
	return true
}

// The values the downward API gives in the checks.
var downward = map[string]string{
	"spec.nodeName":      "node-1",
	"status.podIP":       "10.0.0.7",
	"status.hostIP":      "10.0.0.1",
	"metadata.name":      "otlpgate-abcde",
	"metadata.namespace": "observability",
}

var kubeletRef = regexp.MustCompile(`\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// kubeletArgs returns the container's args as the kubelet passes them: $(VAR) replaced by the
// container's environment variable, $$ by $. A reference to a variable the container does not
// define is passed on as written, which otlpgate would take literally: that fails the test.
func kubeletArgs(t *testing.T, where string, c container) []string {
	t.Helper()
	env := containerEnv(t, where, c)
	var out []string
	for _, a := range c.Args {
		out = append(out, kubeletRef.ReplaceAllStringFunc(a, func(ref string) string {
			if ref == "$$" {
				return "$"
			}
			name := ref[2 : len(ref)-1]
			v, ok := env[name]
			if !ok {
				t.Errorf("%s: %q names $(%s), which the container does not define", where, a, name)
				return ref
			}
			return v
		}))
	}
	return out
}

func containerEnv(t *testing.T, where string, c container) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil:
			v, ok := downward[e.ValueFrom.FieldRef.FieldPath]
			if !ok {
				t.Errorf("%s: env %s from %s, which the check does not know", where, e.Name, e.ValueFrom.FieldRef.FieldPath)
			}
			env[e.Name] = v
		default: // a Secret or a ConfigMap
			env[e.Name] = "value-of-" + e.Name
		}
	}
	return env
}

// checkArgs runs otlpgate -check with the container's command line and environment: it parses
// every flag, reads every -dest and checks sizes and combinations as a start would, without
// binding a port or creating the spool directory.
func checkArgs(t *testing.T, where string, c container, args []string) {
	t.Helper()
	cmd := exec.Command(otlpgateBinary(t), append(append([]string{}, args...), "-check")...)
	cmd.Env = os.Environ()
	for k, v := range containerEnv(t, where, c) {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		// The first lines say what is wrong; the usage that may follow does not.
		lines := strings.SplitN(string(out), "\n", 3)
		t.Errorf("%s: otlpgate -check with the container's args: %v\n%s\nargs: %q", where, err, strings.Join(lines[:min(2, len(lines))], "\n"), args)
	}
}

// The ConfigMap's otlpgate.yaml (-config) runs in the edge DaemonSet's container as its comments
// say to mount it: every ${env:NAME} it names is in that container's environment (the downward
// API's values included), and otlpgate -check accepts it with that environment alone.
func TestConfigMapFitsTheEdge(t *testing.T) {
	file := configMapFile(t)
	edge, ok := readManifests(t)["DaemonSet/otlpgate-edge"]
	if !ok {
		t.Fatal("no DaemonSet/otlpgate-edge")
	}
	env := containerEnv(t, "DaemonSet/otlpgate-edge", edge.Spec.Template.Spec.Containers[0])
	// The vendor destination stays commented out: its key comes from an env the comment adds.
	for _, m := range regexp.MustCompile(`(?m)^[^#\n]*\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}`).FindAllStringSubmatch(file, -1) {
		if _, ok := env[m[1]]; !ok {
			t.Errorf("the ConfigMap's otlpgate.yaml reads ${env:%s}, which the edge DaemonSet's container does not set", m[1])
		}
	}
	path := filepath.Join(t.TempDir(), "otlpgate.yaml")
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(otlpgateBinary(t), "-check", "-config", path)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("otlpgate -check -config with the edge container's environment: %v\n%s", err, out)
	}
}
