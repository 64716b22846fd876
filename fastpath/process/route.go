package process

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/fastpath"
)

// MaxRoutes bounds the destinations a Router numbers: the destinations that take a resource
// entry are one word, bit i for destination i.
const MaxRoutes = 64

// Router decides which destinations take a resource entry by its Resource's attributes: the
// match=resource:KEY=VALUE of a -dest, read with -drop's rules (Match). It implements
// pipeline.Router. Built once at start; safe for concurrent use.
//
// A destination with a rule takes the entries its rule matches; a destination without one
// takes the rest: the entries that no destination with a rule, among those that may take the
// request at all (its tenant's), takes.
type Router struct {
	rules [][]Match // by destination; nil: it takes the rest
	rest  uint64    // destinations without a rule
	all   uint64    // every destination numbered
	keyed uint64    // destinations with a rule
}

// NewRouter returns the router of rules, one per destination in the order the pipeline
// numbers them: nil for a destination that takes the rest, else the alternatives of its
// match=resource (ParseRoute), all on one key.
func NewRouter(rules [][]Match) (*Router, error) {
	if len(rules) > MaxRoutes {
		return nil, fmt.Errorf("match=resource: %d destinations, at most %d", len(rules), MaxRoutes)
	}
	r := &Router{rules: make([][]Match, len(rules))}
	for i, alts := range rules {
		r.all |= 1 << i
		if alts == nil {
			r.rest |= 1 << i
			continue
		}
		if len(alts) == 0 {
			return nil, fmt.Errorf("match=resource: destination %d has an empty rule", i)
		}
		for _, m := range alts {
			if err := checkKey(m.Key); err != nil {
				return nil, fmt.Errorf("match=resource:%s: %w", m.Key, err)
			}
			if m.Key != alts[0].Key {
				return nil, fmt.Errorf("match=resource: one destination's rule names two keys, %s and %s", alts[0].Key, m.Key)
			}
		}
		r.rules[i] = append([]Match(nil), alts...)
		r.keyed |= 1 << i
	}
	return r, nil
}

// ParseRoute reads the value of a -dest match key: resource:KEY=VALUE, resource:KEY=PREFIX*,
// or several of either with |: resource:KEY=V1|P2*|V3. Every alternative is a -drop rule on
// the same key (ParseDrop); KEY=* takes the resources that carry KEY with any string value.
func ParseRoute(s string) ([]Match, error) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(s), "resource:")
	k, vals, ok2 := strings.Cut(rest, "=")
	if !ok || !ok2 || k == "" {
		return nil, fmt.Errorf("match %q: want resource:KEY=VALUE, resource:KEY=PREFIX* or resource:KEY=V1|V2", s)
	}
	if err := checkKey(k); err != nil {
		return nil, fmt.Errorf("match %q: %w", s, err)
	}
	var out []Match
	for v := range strings.SplitSeq(vals, "|") {
		m, err := ParseDrop("resource:" + k + "=" + v)
		if err != nil {
			return nil, fmt.Errorf("match %q: %w", s, err)
		}
		if strings.ContainsRune(m.Value, '*') {
			return nil, fmt.Errorf("match %q: '*' may only end a value", s)
		}
		out = append(out, m)
	}
	return out, nil
}

// All returns the destinations the router numbers, bit i for destination i. Safe for
// concurrent use.
func (r *Router) All() uint64 { return r.all }

// Route returns the destinations that take the resource entry e (the payload of a top-level
// field 1), among cand: those of cand whose rule matches its Resource, or, when none does,
// those of cand without a rule. 0: no destination takes it. Safe for concurrent use; e is
// only read during the call.
func (r *Router) Route(sig fastpath.Signal, e []byte, cand uint64) (uint64, error) {
	if sig >= fastpath.NumSignals {
		return 0, errSignal
	}
	cand &= r.all
	var matched uint64
	if r.keyed&cand != 0 {
		var err error
		if matched, err = r.match(e, r.keyed&cand); err != nil {
			return 0, err
		}
	}
	if matched != 0 {
		return matched, nil
	}
	return r.rest & cand, nil
}

// Items counts the spans, data points or log records of the resource entry e, as the scan
// counts them: what a piece of a split request carries. Safe for concurrent use.
func (r *Router) Items(sig fastpath.Signal, e []byte) (int, error) {
	if sig >= fastpath.NumSignals {
		return 0, errSignal
	}
	return countItems(sig, e)
}

// match returns the destinations of which whose rule the Resource fields of e satisfy. As
// with -drop, the first attribute of a rule's key decides it.
func (r *Router) match(e []byte, which uint64) (uint64, error) {
	var seen, matched uint64
	for off := 0; off < len(e); {
		f, err := next(e, off)
		if err != nil {
			return 0, err
		}
		off = f.end
		if f.num != 1 {
			continue
		}
		if f.typ != protowire.BytesType {
			return 0, errMalformed
		}
		res := e[f.val:f.end]
		for ro := 0; ro < len(res); {
			g, err := next(res, ro)
			if err != nil {
				return 0, err
			}
			ro = g.end
			if g.num != 1 {
				continue
			}
			if g.typ != protowire.BytesType {
				return 0, errMalformed
			}
			key, value, err := keyValue(res[g.val:g.end])
			if err != nil {
				return 0, err
			}
			for i, alts := range r.rules {
				bit := uint64(1) << i
				if which&bit == 0 || seen&bit != 0 || string(key) != alts[0].Key {
					continue
				}
				seen |= bit
				v, ok, err := stringValue(value)
				if err != nil {
					return 0, err
				}
				if !ok {
					continue
				}
				for j := range alts {
					if alts[j].matches(v) {
						matched |= bit
						break
					}
				}
			}
			if seen == which {
				return matched, nil // every rule is decided
			}
		}
	}
	return matched, nil
}
