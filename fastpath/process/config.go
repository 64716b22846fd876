package process

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Config of the processing steps. The zero Config runs none.
type Config struct {
	// Set is upserted into every Resource of every signal (-resource.set key=value,
	// repeatable): attributes with the same key are dropped, the new ones appended, as string
	// values. A resource entry without a Resource gets one.
	Set []Attr
	// Delete lists attribute keys removed from every Resource (-resource.delete, repeatable).
	Delete []string
	// FromPeer is the key of an attribute set on every Resource to the IP address of the
	// client the request came from (-resource.from-peer; "" for none), as a string value.
	// A request without one (the OpenCensus unix socket) is left as it is.
	FromPeer string
	// FromPeerAction is what FromPeer does to a Resource that has the attribute already.
	FromPeerAction PeerAction
	// Drop lists the rules of -drop: a resource entry whose Resource matches any of them is
	// left out of its request and counted in otlpgate_process_dropped_items_total.
	Drop []Match
	// Sample is trace sampling (-sample.*); off unless Sample.On.
	Sample SampleConfig
}

// PeerAction is what -resource.from-peer does to a Resource that carries its attribute already
// (-resource.from-peer.action), in the words of the Collector's resource processor.
type PeerAction uint8

const (
	// PeerInsert keeps a value the Resource has, as the Collector's k8sattributes processor
	// keeps the k8s.pod.ip it finds: only a missing attribute, or one whose value is an empty
	// string, is set. An agent that forwards for others (a Collector sidecar, another otlpgate)
	// can then name the address of the application itself.
	PeerInsert PeerAction = iota
	// PeerUpsert sets the attribute whatever the Resource carries, so that no client can
	// claim another's address: the attributes with the key are dropped, the address appended.
	PeerUpsert
)

var peerActions = [...]string{"insert", "upsert"}

func (a PeerAction) String() string {
	if int(a) < len(peerActions) {
		return peerActions[a]
	}
	return "PeerAction(" + strconv.Itoa(int(a)) + ")"
}

// ParsePeerAction reads -resource.from-peer.action.
func ParsePeerAction(s string) (PeerAction, error) {
	for i, name := range peerActions {
		if s == name {
			return PeerAction(i), nil
		}
	}
	return 0, fmt.Errorf("-resource.from-peer.action %q: want insert or upsert", s)
}

// Attr is one attribute of -resource.set.
type Attr struct{ Key, Value string }

// Match is one rule of -drop: the Resource has the attribute Key with a string value equal to
// Value or, with Prefix, starting with it.
type Match struct {
	Key, Value string
	Prefix     bool
}

// SampleConfig is sampling by trace id, as the Collector-contrib probabilistic_sampler decides
// with fail_closed (its default), in one of its modes.
type SampleConfig struct {
	// On turns sampling on (-sample.traces given).
	On bool
	// Percent of traces kept, 0 to 100 (-sample.traces). A float32, as the Collector reads
	// its sampling_percentage, so that the same value gives the same rate.
	Percent float32
	// Mode is how a span is decided (-sample.mode).
	Mode SampleMode
	// HashSeed is mixed into the hash of the trace id in hash_seed mode (-sample.hash-seed):
	// tiers that should agree on their decisions use the same seed, tiers that should decide
	// independently different ones.
	HashSeed uint32
	// Precision is how many significant hex digits the thresholds written into trace_state
	// keep in the proportional and equalizing modes, 1 to 14 (-sample.precision, the
	// Collector's sampling_precision); 0 means DefaultSamplePrecision.
	Precision int
	// Logs applies the decision to log records by their trace id (-sample.logs); log records
	// without one are kept.
	Logs bool
}

// SampleMode is a mode of the Collector's probabilistic_sampler.
type SampleMode uint8

const (
	// SampleHashSeed hashes the trace id with a seed (FNV-1a), as the sampler first did.
	SampleHashSeed SampleMode = iota
	// SampleProportional is OTEP 235 consistent sampling that multiplies the sampling
	// probability a span arrives with (its th) by its own, and writes the product's threshold.
	SampleProportional
	// SampleEqualizing is OTEP 235 consistent sampling to a fixed probability: a span that
	// arrives sampled with a lower one keeps it.
	SampleEqualizing
)

var sampleModes = [...]string{"hash_seed", "proportional", "equalizing"}

func (m SampleMode) String() string {
	if int(m) < len(sampleModes) {
		return sampleModes[m]
	}
	return "SampleMode(" + strconv.Itoa(int(m)) + ")"
}

// ParseSampleMode reads -sample.mode.
func ParseSampleMode(s string) (SampleMode, error) {
	for i, name := range sampleModes {
		if s == name {
			return SampleMode(i), nil
		}
	}
	return 0, fmt.Errorf("-sample.mode %q: want hash_seed, proportional or equalizing", s)
}

// DefaultConfig returns a Config that runs no step.
func DefaultConfig() Config { return Config{} }

// maxDropRules bounds -drop: the rules a Resource has matched are tracked in one word.
const maxDropRules = 64

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	edited := map[string]string{}
	for _, a := range c.Set {
		if err := checkKey(a.Key); err != nil {
			return fmt.Errorf("-resource.set %q: %w", a.Key, err)
		}
		if !utf8.ValidString(a.Value) {
			return fmt.Errorf("-resource.set %s: the value is not UTF-8", a.Key)
		}
		if _, dup := edited[a.Key]; dup {
			return fmt.Errorf("-resource.set %s: the key is given twice", a.Key)
		}
		edited[a.Key] = "-resource.set"
	}
	for _, k := range c.Delete {
		if err := checkKey(k); err != nil {
			return fmt.Errorf("-resource.delete %q: %w", k, err)
		}
		if by, dup := edited[k]; dup {
			return fmt.Errorf("-resource.delete %s: the key is also given to %s", k, by)
		}
		edited[k] = "-resource.delete"
	}
	if k := c.FromPeer; k != "" {
		if err := checkKey(k); err != nil {
			return fmt.Errorf("-resource.from-peer %q: %w", k, err)
		}
		if len(k) > maxPeerKey {
			return fmt.Errorf("-resource.from-peer: the key is longer than %d bytes", maxPeerKey)
		}
		if by, dup := edited[k]; dup {
			return fmt.Errorf("-resource.from-peer %s: the key is also given to %s", k, by)
		}
		edited[k] = "-resource.from-peer"
	}
	if int(c.FromPeerAction) >= len(peerActions) {
		return fmt.Errorf("-resource.from-peer.action %v: unknown", c.FromPeerAction)
	}
	if len(c.Drop) > maxDropRules {
		return fmt.Errorf("-drop: %d rules, at most %d", len(c.Drop), maxDropRules)
	}
	for _, m := range c.Drop {
		if err := checkKey(m.Key); err != nil {
			return fmt.Errorf("-drop resource:%s: %w", m.Key, err)
		}
		// Drop rules read the attributes as they arrive. A rule on a key an edit replaces or
		// removes would be decided by the edit alone (everything or nothing dropped), which
		// is never what was meant.
		if by, ok := edited[m.Key]; ok && by == "-resource.from-peer" {
			return fmt.Errorf("-drop resource:%s: the key is also given to -resource.from-peer, and the rule would read what the client sent, not its address", m.Key)
		} else if ok {
			return fmt.Errorf("-drop resource:%s: the key is also given to %s, so the rule would drop all or nothing", m.Key, by)
		}
	}
	if s := c.Sample; s.On {
		p := float64(s.Percent)
		if math.IsNaN(p) || p < 0 || p > 100 {
			return fmt.Errorf("-sample.traces %v: want a percentage from 0 to 100", s.Percent)
		}
		if p > 0 && p/100 < minProbability {
			return fmt.Errorf("-sample.traces %v: below the smallest sampling probability, 2^-56", s.Percent)
		}
		if int(s.Mode) >= len(sampleModes) {
			return fmt.Errorf("-sample.mode %v: unknown", s.Mode)
		}
		if s.Precision < 0 || s.Precision > hexDigits {
			return fmt.Errorf("-sample.precision %d: want 1 to 14 hex digits", s.Precision)
		}
	}
	return nil
}

func checkKey(k string) error {
	switch {
	case k == "":
		return errors.New("empty attribute key")
	case !utf8.ValidString(k):
		return errors.New("the key is not UTF-8")
	}
	return nil
}

// ParseSet reads one -resource.set value, key=value. References such as ${env:NAME} were
// resolved before (cmd/otlpgate expands every flag value with internal/credfile.Expand): a
// variable that is not set stopped the start there, so that a missing downward-API variable
// does not label every resource with an empty value.
func ParseSet(s string) (Attr, error) {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return Attr{}, fmt.Errorf("-resource.set %q: want key=value", s)
	}
	return Attr{Key: k, Value: v}, nil
}

// ParseDrop reads one -drop value: resource:KEY=VALUE (exact) or resource:KEY=PREFIX* (the
// value starts with PREFIX).
func ParseDrop(s string) (Match, error) {
	rest, ok := strings.CutPrefix(s, "resource:")
	if !ok {
		return Match{}, fmt.Errorf("-drop %q: want resource:KEY=VALUE or resource:KEY=PREFIX*", s)
	}
	k, v, ok := strings.Cut(rest, "=")
	if !ok || k == "" {
		return Match{}, fmt.Errorf("-drop %q: want resource:KEY=VALUE or resource:KEY=PREFIX*", s)
	}
	m := Match{Key: k, Value: v}
	if p, ok := strings.CutSuffix(v, "*"); ok {
		m.Value, m.Prefix = p, true
	}
	return m, nil
}

// ParsePrecision reads -sample.precision.
func ParsePrecision(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > hexDigits {
		return 0, fmt.Errorf("-sample.precision %q: want 1 to 14 hex digits", s)
	}
	return n, nil
}

// ParsePercent reads -sample.traces.
func ParsePercent(s string) (float32, error) {
	f, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 32)
	if err != nil || math.IsNaN(f) || f < 0 || f > 100 {
		return 0, fmt.Errorf("-sample.traces %q: want a percentage from 0 to 100", s)
	}
	if f > 0 && float64(float32(f))/100 < minProbability {
		return 0, fmt.Errorf("-sample.traces %q: below the smallest sampling probability, 2^-56 (%g%%)", s, minProbability*100)
	}
	return float32(f), nil
}
