package process

import (
	"encoding/binary"
	"net/netip"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/pool"
)

// Chain runs the configured steps on resource entries: it implements pipeline.Processor.
// Built once at start; safe for concurrent use.
type Chain struct {
	set      []byte   // -resource.set, encoded as Resource field-1 KeyValues
	editKeys []string // keys -resource.set replaces and -resource.delete removes
	// peerKey is -resource.from-peer's key ("" for none); peerUpsert its action.
	peerKey    string
	peerUpsert bool
	drop       []Match
	sampler    *sampler // nil: no trace sampling
}

// New builds the chain of cfg, or returns nil when cfg runs no step (the pipeline then needs
// no Processor at all).
func New(cfg Config) (*Chain, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(cfg.Set) == 0 && len(cfg.Delete) == 0 && len(cfg.Drop) == 0 && !cfg.Sample.On && cfg.FromPeer == "" {
		return nil, nil
	}
	c := &Chain{set: encodeSet(cfg.Set), drop: cfg.Drop, peerKey: cfg.FromPeer, peerUpsert: cfg.FromPeerAction == PeerUpsert}
	for _, a := range cfg.Set {
		c.editKeys = append(c.editKeys, a.Key)
	}
	c.editKeys = append(c.editKeys, cfg.Delete...)
	if cfg.Sample.On {
		c.sampler = newSampler(cfg.Sample)
	}
	return c, nil
}

// Slack is the most an entry of n bytes of signal sig grows by: the set attributes, the
// client's address, the header of a Resource inserted to hold them, and what trace_states
// written by sampling add.
// A rewritten span is at least 20 bytes (a trace id, an rv or a sampling.priority attribute is
// what lets it be kept) and grows by at most 23 (22 for its trace_state field, one for its
// length), and its scope's length by one byte: half the entry is room enough. Safe for
// concurrent use.
func (c *Chain) Slack(sig fastpath.Signal, n int) int {
	slack := len(c.set) + 1 + binary.MaxVarintLen64
	if c.peerKey != "" {
		slack += peerKVMax(c.peerKey)
	}
	if sig == fastpath.Traces && c.sampler != nil && c.sampler.mode != SampleHashSeed {
		slack += n/2 + 16
	}
	return slack
}

// AppendEntry runs the steps on one resource entry (the payload of a top-level field 1 of a
// v1 request of signal sig, from the client address peer, invalid for none) and appends the
// result, as a whole field, to dst; nothing when a drop rule matches it or sampling leaves
// none of its spans. The tally says what was done
// (slot 0: the items the result lost), for Commit. An error (errMalformed, ...) refuses the
// request. Safe for concurrent use; e is only read during the call.
func (c *Chain) AppendEntry(dst []byte, sig fastpath.Signal, e []byte, peer netip.Addr) (out []byte, t Tally, err error) {
	if sig >= fastpath.NumSignals {
		return dst, t, errSignal
	}
	var pl resourcePlan
	var text []byte
	var buf [maxPeerText]byte
	if c.peerKey != "" {
		text = peerText(&buf, peer)
	}
	if len(c.editKeys) > 0 || len(c.drop) > 0 || text != nil {
		drop, err := c.planResource(&pl, e, text)
		if err != nil {
			return dst, t, err
		}
		if drop {
			n, err := countItems(sig, e)
			if err != nil {
				return dst, t, err
			}
			t[tRemoved], t[tDroppedItems], t[tDroppedResources] = int64(n), int64(n), 1
			return dst, t, nil
		}
		if pl.edit {
			t[tEdited] = 1
		}
	}
	if c.sampler != nil && (sig == fastpath.Traces || sig == fastpath.Logs && c.sampler.logs) {
		return c.sampleEntry(dst, sig, e, &pl, t, text)
	}
	if !pl.edit {
		return append(appendHeader(dst, 1, len(e)), e...), t, nil
	}
	dst = appendHeader(dst, 1, len(e)+pl.delta)
	return c.appendEntry(dst, e, &pl, nil, text), t, nil
}

// Commit counts what the steps did to one admitted request in the metrics. Safe for
// concurrent use.
func (c *Chain) Commit(sig fastpath.Signal, t Tally) {
	if sig >= fastpath.NumSignals {
		return
	}
	commitDropped(sig, &t)
	commitEdited(sig, &t)
	commitSampled(sig, &t)
}

// sampleEntry decides the spans or log records of the entry e and writes what is kept; peer
// is the text of the client's address, as planned in pl.
func (c *Chain) sampleEntry(dst []byte, sig fastpath.Signal, e []byte, pl *resourcePlan, t Tally, peer []byte) ([]byte, Tally, error) {
	sp := spanPlan{dec: pool.GetBytes(len(e)/64 + 16), scopes: pool.GetBytes(64)}
	if sig == fastpath.Traces && c.sampler.mode != SampleHashSeed {
		sp.tracestates = pool.GetBytes(2 * (rewriteHeader + tracestateRoom))
	}
	defer func() {
		pool.PutBytes(sp.dec)
		pool.PutBytes(sp.scopes)
		if sp.tracestates != nil {
			pool.PutBytes(sp.tracestates)
		}
	}()
	pn, err := c.sampler.planItems(&sp, sig, e)
	if err != nil {
		return dst, t, err
	}
	t[tSampledKept], t[tSampledOut] = int64(pn.kept), int64(pn.total-pn.kept)
	t[tTracestateOmitted] = int64(pn.omitted)
	if pn.scopes == 0 {
		t[tRemoved] = int64(pn.total)
		t[tEdited] = 0 // the entry is gone
		return dst, t, nil
	}
	t[tRemoved] = int64(pn.total - pn.kept)
	if pn.kept == pn.total && pn.rewritten == 0 && pn.scopes*4 == len(*sp.scopes) {
		// Nothing left out or rewritten: the items stay as they are.
		if !pl.edit {
			return append(appendHeader(dst, 1, len(e)), e...), t, nil
		}
		dst = appendHeader(dst, 1, len(e)+pl.delta)
		return c.appendEntry(dst, e, pl, nil, peer), t, nil
	}
	dst = appendHeader(dst, 1, len(e)+pl.delta+pn.delta)
	return c.appendEntry(dst, e, pl, &sp, peer), t, nil
}

// appendEntry writes the payload of the entry e as planned: Resource fields rewritten when
// pl.edit (peer the text of the client's address when pl.peer), ScopeSpans filtered when sp
// is not nil, every other field as it is.
func (c *Chain) appendEntry(dst, e []byte, pl *resourcePlan, sp *spanPlan, peer []byte) []byte {
	if pl.insert {
		size := len(c.set)
		if pl.peer {
			size += peerKVSize(c.peerKey, peer)
		}
		dst = appendHeader(dst, 1, size)
		dst = append(dst, c.set...)
		if pl.peer {
			dst = appendPeerKV(dst, c.peerKey, peer)
		}
	}
	run, k, si, di, ri := 0, 0, 0, 0, 0
	for off := 0; off < len(e); {
		f, _ := next(e, off) // the plans read these bytes already
		off = f.end
		switch {
		case f.num == 1 && pl.edit:
			dst = append(dst, e[run:f.tag]...)
			dst = c.appendResource(dst, e[f.val:f.end], pl, k, peer)
			k++
			run = f.end
		case f.num == 2 && sp != nil:
			dst = append(dst, e[run:f.tag]...)
			size := binary.LittleEndian.Uint32((*sp.scopes)[4*si:])
			si++
			if size == removedScope {
				di += scopeItems(e[f.val:f.end])
			} else {
				dst, di, ri = appendScope(dst, e, f, int(size), sp, di, ri)
			}
			run = f.end
		}
	}
	return append(dst, e[run:]...)
}

// scopeItems counts the items of a scope, to skip their decisions (none of them is kept, so
// none has a trace_state in the plan).
func scopeItems(scope []byte) int {
	n := 0
	for off := 0; off < len(scope); {
		f, _ := next(scope, off)
		off = f.end
		if f.num == 2 {
			n++
		}
	}
	return n
}
