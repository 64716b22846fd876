package kafka

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Limits on a subscriptions file; a file beyond them is rejected as a whole.
const (
	MinInterval          = 100 * time.Millisecond
	MaxInterval          = time.Hour
	maxSubscriptions     = 1024
	maxPrefixes          = 1024
	maxSelectorLen       = 1024
	maxSubscriptionsFile = 4 << 20
)

// allMetrics, as a prefix, subscribes to every metric.
const allMetrics = "*"

// Labels a selector can match, and that the forwarded resource gains. The names are the ones
// Apache Kafka's broker gives its client metrics plugins.
const (
	labelClientInstanceID      = "client_instance_id"
	labelClientID              = "client_id"
	labelClientSoftwareName    = "client_software_name"
	labelClientSoftwareVersion = "client_software_version"
	labelClientSourceAddress   = "client_source_address"
	labelClientSourcePort      = "client_source_port"
)

// labelNames lists the labels in the order they are added to a resource.
var labelNames = [...]string{
	labelClientInstanceID,
	labelClientID,
	labelClientSoftwareName,
	labelClientSoftwareVersion,
	labelClientSourceAddress,
	labelClientSourcePort,
}

// labelIndex returns name's position in labelNames, or -1.
func labelIndex(name string) int {
	for i, n := range labelNames {
		if n == name {
			return i
		}
	}
	return -1
}

// clientLabels describes the client side of a connection. Immutable once built: a connection
// swaps in a new value when its client id or software changes, so an instance can tell a change
// by comparing pointers.
type clientLabels struct {
	clientID        string
	softwareName    string
	softwareVersion string
	sourceAddress   string
	sourcePort      string
}

// values returns the label values in labelNames order.
func (l *clientLabels) values(instanceID string) [len(labelNames)]string {
	return [...]string{instanceID, l.clientID, l.softwareName, l.softwareVersion, l.sourceAddress, l.sourcePort}
}

// subscriptionFile is the format of -kafka.subscriptions (YAML, or JSON for a .json file):
//
//	subscriptions:
//	  - name: producers
//	    metrics: [org.apache.kafka.producer.]
//	    interval: 30s
//	    match:
//	      client_software_name: librdkafka
type subscriptionFile struct {
	Subscriptions []subscriptionEntry `yaml:"subscriptions" json:"subscriptions"`
}

type subscriptionEntry struct {
	Name     string            `yaml:"name" json:"name"`
	Metrics  []string          `yaml:"metrics" json:"metrics"`
	Interval string            `yaml:"interval" json:"interval"`
	Match    map[string]string `yaml:"match" json:"match"`
}

// subscription is a validated subscription with compiled selectors.
type subscription struct {
	name     string
	all      bool     // "*" was among the prefixes
	prefixes []string // sorted
	interval time.Duration
	match    []selector
}

type selector struct {
	label int // index into labelNames
	re    *regexp.Regexp
}

// matches reports whether every selector matches; a subscription without selectors matches
// every client.
func (s *subscription) matches(vals *[len(labelNames)]string) bool {
	for _, m := range s.match {
		if !m.re.MatchString(vals[m.label]) {
			return false
		}
	}
	return true
}

// subscriptionSet is one immutable generation of subscriptions: the file's, then the default.
type subscriptionSet struct {
	gen  uint64
	subs []subscription
	// idleInterval is the interval given to a client no subscription matches: it asks again
	// after it.
	idleInterval time.Duration
	// unserved: no destination takes metrics (-dest signals=): every client is subscribed to
	// none, so that none pushes what would only be refused.
	unserved bool
}

// defaultSubscriptionName names the subscription built from the -kafka.default-* flags.
const defaultSubscriptionName = "default"

// compileSubscription validates one entry. fallback is the interval of an entry without one.
func compileSubscription(e subscriptionEntry, fallback time.Duration) (subscription, error) {
	s := subscription{name: e.Name, interval: fallback}
	if e.Name == "" {
		return s, errors.New("subscription without a name")
	}
	if len(e.Metrics) == 0 {
		return s, fmt.Errorf("subscription %q: no metrics (use %q for all)", e.Name, allMetrics)
	}
	if len(e.Metrics) > maxPrefixes {
		return s, fmt.Errorf("subscription %q: more than %d metric prefixes", e.Name, maxPrefixes)
	}
	for _, p := range e.Metrics {
		switch {
		case p == allMetrics:
			s.all = true
		case p == "" || strings.TrimSpace(p) != p:
			return s, fmt.Errorf("subscription %q: empty or blank-padded metric prefix %q", e.Name, p)
		default:
			s.prefixes = append(s.prefixes, p)
		}
	}
	slices.Sort(s.prefixes)
	s.prefixes = slices.Compact(s.prefixes)
	if e.Interval != "" {
		d, err := time.ParseDuration(e.Interval)
		if err != nil {
			return s, fmt.Errorf("subscription %q: interval: %w", e.Name, err)
		}
		s.interval = d
	}
	if s.interval < MinInterval || s.interval > MaxInterval {
		return s, fmt.Errorf("subscription %q: interval %v outside [%v, %v]", e.Name, s.interval, MinInterval, MaxInterval)
	}
	keys := make([]string, 0, len(e.Match))
	for k := range e.Match {
		keys = append(keys, k)
	}
	slices.Sort(keys) // a stable order keeps error messages and evaluation reproducible
	for _, k := range keys {
		v := e.Match[k]
		idx := labelIndex(k)
		if idx < 0 {
			return s, fmt.Errorf("subscription %q: unknown selector %q (want one of %s)", e.Name, k, strings.Join(labelNames[:], ", "))
		}
		if len(v) > maxSelectorLen {
			return s, fmt.Errorf("subscription %q: selector %s longer than %d bytes", e.Name, k, maxSelectorLen)
		}
		// Anchored: a selector matches the whole value, as Kafka's client metrics selectors do.
		re, err := regexp.Compile(`^(?:` + v + `)$`)
		if err != nil {
			return s, fmt.Errorf("subscription %q: selector %s: %w", e.Name, k, err)
		}
		s.match = append(s.match, selector{label: idx, re: re})
	}
	return s, nil
}

// parseSubscriptions decodes a subscriptions file: JSON when the name ends in .json, YAML
// otherwise. Unknown fields are errors, so a misspelt key is not silently ignored.
func parseSubscriptions(name string, data []byte) ([]subscriptionEntry, error) {
	var f subscriptionFile
	if strings.EqualFold(filepath.Ext(name), ".json") {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&f); err != nil {
			return nil, fmt.Errorf("cannot parse %s as JSON: %w", name, err)
		}
	} else if len(bytes.TrimSpace(data)) > 0 {
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		if err := dec.Decode(&f); err != nil {
			return nil, fmt.Errorf("cannot parse %s as YAML: %w", name, err)
		}
	}
	return f.Subscriptions, nil
}

// buildSubscriptions compiles the file's entries and appends the default subscription (when
// cfg.DefaultMetrics is set). Names must be unique.
func buildSubscriptions(cfg *Config, entries []subscriptionEntry) ([]subscription, error) {
	if len(entries) > maxSubscriptions {
		return nil, fmt.Errorf("more than %d subscriptions", maxSubscriptions)
	}
	if len(cfg.DefaultMetrics) > 0 {
		entries = append(slices.Clip(entries), subscriptionEntry{
			Name:     defaultSubscriptionName,
			Metrics:  cfg.DefaultMetrics,
			Interval: cfg.DefaultInterval.String(),
		})
	}
	subs := make([]subscription, 0, len(entries))
	seen := make(map[string]bool, len(entries))
	for _, e := range entries {
		if seen[e.Name] {
			return nil, fmt.Errorf("subscription %q defined twice", e.Name)
		}
		seen[e.Name] = true
		s, err := compileSubscription(e, cfg.DefaultInterval)
		if err != nil {
			return nil, err
		}
		// A push interval at or above the idle timeout would have the connection closed
		// between two pushes, and the instance with it: every push would then be answered
		// UNKNOWN_SUBSCRIPTION_ID.
		if s.interval >= cfg.IdleTimeout {
			return nil, fmt.Errorf("subscription %q: interval %v must be shorter than the idle timeout %v (-kafka.idle-timeout)", e.Name, s.interval, cfg.IdleTimeout)
		}
		subs = append(subs, s)
	}
	return subs, nil
}

// loadSubscriptions reads cfg.SubscriptionsFile (if set) and builds a set of generation gen.
func loadSubscriptions(cfg *Config, gen uint64) (*subscriptionSet, error) {
	var entries []subscriptionEntry
	if cfg.SubscriptionsFile != "" {
		data, err := readFileCapped(cfg.SubscriptionsFile, maxSubscriptionsFile)
		if err != nil {
			return nil, err
		}
		if entries, err = parseSubscriptions(cfg.SubscriptionsFile, data); err != nil {
			return nil, err
		}
	}
	subs, err := buildSubscriptions(cfg, entries)
	if err != nil {
		if cfg.SubscriptionsFile != "" {
			return nil, fmt.Errorf("%s: %w", cfg.SubscriptionsFile, err)
		}
		return nil, err
	}
	return &subscriptionSet{gen: gen, subs: subs, idleInterval: cfg.DefaultInterval}, nil
}

// readFileCapped reads name, refusing a file larger than limit.
func readFileCapped(name string, limit int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("cannot read subscriptions: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("cannot read subscriptions %s: %w", name, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("subscriptions file %s is larger than %d bytes", name, limit)
	}
	return data, nil
}

// plan is what a client instance is subscribed to: the union of the prefixes of every matching
// subscription and the smallest of their intervals. Immutable; shared by reference.
type plan struct {
	all       bool
	prefixes  []string // sorted, none a prefix of another; empty when all
	requested []string // the RequestedMetrics field: [""] for all, nil for none
	interval  time.Duration
	// hash covers the matching subscriptions' names, the prefixes and the interval; the
	// subscription id mixes in the instance id.
	hash uint32
}

// resolve computes the plan for a client with the given label values.
func (set *subscriptionSet) resolve(vals *[len(labelNames)]string) *plan {
	p := &plan{}
	h := fnv.New32a()
	var prefixes []string
	for i := range set.subs {
		s := &set.subs[i]
		if !s.matches(vals) {
			continue
		}
		h.Write([]byte(s.name))
		h.Write([]byte{0})
		if p.interval == 0 || s.interval < p.interval {
			p.interval = s.interval
		}
		p.all = p.all || s.all
		prefixes = append(prefixes, s.prefixes...)
	}
	if p.interval == 0 {
		p.interval = set.idleInterval
	}
	switch {
	case set.unserved:
		p.all, prefixes = false, nil
		h.Write([]byte("\x00unserved"))
	case p.all:
		p.requested = []string{""}
		h.Write([]byte(allMetrics))
	case len(prefixes) > 0:
		p.prefixes = minimalPrefixes(prefixes)
		p.requested = p.prefixes
		for _, x := range p.prefixes {
			h.Write([]byte(x))
			h.Write([]byte{0})
		}
	}
	var ms [8]byte
	for i, v := 0, uint64(p.interval.Milliseconds()); i < 8; i++ {
		ms[i] = byte(v >> (8 * i))
	}
	h.Write(ms[:])
	p.hash = h.Sum32()
	return p
}

// minimalPrefixes sorts and drops every prefix that another one already covers.
func minimalPrefixes(ps []string) []string {
	slices.Sort(ps)
	out := ps[:0]
	for _, p := range ps {
		if len(out) > 0 && strings.HasPrefix(p, out[len(out)-1]) {
			continue
		}
		out = append(out, p)
	}
	return slices.Clip(out)
}

// keep reports whether a metric called name is subscribed to.
func (p *plan) keep(name string) bool { return keepName(p, name) }

// keepBytes is keep for a name read from the wire; it does not allocate.
func (p *plan) keepBytes(name []byte) bool { return keepName(p, name) }

func keepName[T string | []byte](p *plan, name T) bool {
	if p.all {
		return true
	}
	// Prefixes are sorted and none covers another, so at most one can match: the greatest
	// one not above name.
	i, found := slices.BinarySearchFunc(p.prefixes, name, comparePrefix[T])
	if found {
		return true
	}
	if i == 0 {
		return false
	}
	pre := p.prefixes[i-1]
	return len(name) >= len(pre) && comparePrefix(pre, name[:len(pre)]) == 0
}

// comparePrefix compares a prefix with a name byte-wise, as strings.Compare would, without
// converting the name.
func comparePrefix[T string | []byte](pre string, name T) int {
	for i := 0; i < len(pre) && i < len(name); i++ {
		if pre[i] != name[i] {
			if pre[i] < name[i] {
				return -1
			}
			return 1
		}
	}
	switch {
	case len(pre) < len(name):
		return -1
	case len(pre) > len(name):
		return 1
	}
	return 0
}

// subscriptionID derives the id a client must echo in its pushes. It changes whenever the
// matching subscriptions, their prefixes or the interval change (and differs between
// instances, as Kafka's does). The settings every instance shares (delta temporality, size
// limit) are fixed for the life of the process and need not be mixed in.
func subscriptionID(p *plan, id [16]byte) int32 {
	// FNV-1a over the instance id, seeded with the plan's hash.
	h := p.hash ^ 2166136261
	for _, b := range id {
		h ^= uint32(b)
		h *= 16777619
	}
	return int32(h)
}
