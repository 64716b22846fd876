package tenant

import (
	"errors"
	"fmt"
	"hash/maphash"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Tenants (-intake.headers) are the values of a few named request headers, such as
// X-Scope-OrgID, that travel with each request from the gRPC and HTTP intakes through admission
// and the spool to the destinations. A tuple of values is interned once in a Table and
// is a *Tenant from then on: a batch holds requests of one tenant only, a destination takes the
// batches of the tenants its match-header selects, and it sends the values of its
// forward-headers with each batch.
//
// The table is bounded (-intake.max-tenants): a tuple past the bound is refused, so that a
// client cycling through header values cannot grow the process's memory, its open batches or
// its metric series. A tenant idle for longer than -intake.tenant-idle leaves the table
// (tenantidle.go), so that a client cycling through values, or the churn of short-lived tenants
// over days, does not fill it for good.

// Limits of a tenant tuple. Values are printable ASCII (0x20-0x7e) of at most MaxValue
// bytes: they are forwarded as HTTP headers and gRPC metadata and become metric labels, and a
// value that could not be all three is refused where it arrives.
const (
	MaxHeaders   = 8
	MaxValue     = 255
	maxTenantKey = MaxHeaders * (1 + MaxValue)
	// maxTenants caps -intake.max-tenants itself.
	maxTenants = 1 << 20
)

// Errors of Table.Lookup, refused at the intakes. Neither is worth retrying soon: the bound
// is reached until a tenant has been idle for -intake.tenant-idle (or, with 0, until the
// process restarts), and a bad value stays bad.
var (
	ErrTooMany = errors.New("fastpath: too many distinct tenant header values (-intake.max-tenants reached)")
	// ErrPeer refuses a new tuple from a client address that holds
	// -intake.max-tenants-per-peer of the table's tenants already (tenantpeer.go).
	ErrPeer  = errors.New("fastpath: this client address brought too many distinct tenant header values (-intake.max-tenants-per-peer reached)")
	ErrValue = errors.New("fastpath: a tenant header value is longer than 255 bytes or not printable ASCII")
	// ErrNoRoute refuses a request whose tenant no destination takes (every destination has a
	// match-header, and none names the tenant's value).
	ErrNoRoute = errors.New("fastpath: no destination takes this tenant's data (match-header)")
)

var (
	tenantRefused = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_tenant_refused_requests_total",
		Help: "Requests refused for their tenant headers (-intake.headers), by reason (max_tenants: a new value past -intake.max-tenants; per_peer: a new value from a client address holding -intake.max-tenants-per-peer; bad_value: longer than 255 bytes or not printable ASCII; no_route: no destination's match-header takes the value; credential: with -auth.tenants-file, a missing or unknown bearer token; claim_mismatch: with -auth.tenants-file, a tenant header that disagrees with the token's tenant).",
	}, []string{"reason"})
	tenantRefusedMax     = tenantRefused.WithLabelValues("max_tenants")
	tenantRefusedPeer    = tenantRefused.WithLabelValues("per_peer")
	tenantRefusedValue   = tenantRefused.WithLabelValues("bad_value")
	tenantRefusedNoRoute = tenantRefused.WithLabelValues("no_route")
	tenantsKnown         = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "otlpgate_tenants",
		Help: "Distinct tenant header values in the table: seen since start, less those idle past -intake.tenant-idle (otlpgate_tenants_expired_total); bounded by -intake.max-tenants.",
	})
)

// Config configures the tenant table.
type Config struct {
	// Headers are the request header names whose values make up a tenant, lower case
	// (-intake.headers, default none: tenants are off).
	Headers []string
	// Default is the value of a header a request does not carry, or carries empty
	// (-intake.headers.default, default ""). The UDS and Kafka intakes carry no headers: their
	// requests have the default value of every header.
	Default string
	// Max bounds the distinct tuples of values (-intake.max-tenants, default 1000); a request
	// bringing a new one past it is refused and counted in
	// otlpgate_tenant_refused_requests_total{reason="max_tenants"}. Tenants bound to
	// credentials (tenantcreds.go) are never refused for it: the tokens file bounds them.
	Max int
	// MaxPerPeer bounds the tuples one client address may have brought into the table and
	// that are still in it (-intake.max-tenants-per-peer, default 100; 0: no bound), so that
	// one client cannot take every place under Max; a request bringing a new one past it is
	// refused and counted in otlpgate_tenant_refused_requests_total{reason="per_peer"}
	// (tenantpeer.go).
	MaxPerPeer int
	// Routes says, for each destination in the order the pipeline and the feeders number them,
	// which tenants it takes (its match-header). Empty: every destination takes every tenant.
	Routes []Match
	// Rate is each tenant's token bucket (-tenant.rate, -tenant.burst; default off): the gRPC
	// and OTLP/HTTP intakes refuse a request of a tenant over it, counted in
	// otlpgate_tenant_throttled_requests_total (tenantrate.go).
	Rate Rate
	// MetricsTop is how many tenants get series of their own in the per-tenant counters
	// (-tenant.metrics.top, default 20): the first this many seen since start, labelled by
	// their values; every later one is counted under tenant="_other" (tenantmetrics.go).
	MetricsTop int
	// Idle is how long a tenant may go without a request and without an open batch before it
	// leaves the table, freeing its place under Max (-intake.tenant-idle, default 10m; 0 keeps
	// every tenant for the life of the process). Counted in otlpgate_tenants_expired_total
	// (tenantidle.go).
	Idle time.Duration
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{Max: 1000, MaxPerPeer: 100, MetricsTop: 20, Idle: 10 * time.Minute}
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	if len(c.Headers) == 0 {
		return errors.New("fastpath: no tenant header named (-intake.headers)")
	}
	if len(c.Headers) > MaxHeaders {
		return fmt.Errorf("fastpath: %d tenant headers, at most %d", len(c.Headers), MaxHeaders)
	}
	for i, h := range c.Headers {
		if err := checkHeaderName(h); err != nil {
			return err
		}
		if slices.Contains(c.Headers[:i], h) {
			return fmt.Errorf("fastpath: tenant header %q named twice", h)
		}
	}
	if !validTenantValue(c.Default) {
		return fmt.Errorf("fastpath: -intake.headers.default %q: longer than %d bytes or not printable ASCII", c.Default, MaxValue)
	}
	if c.Max < 1 || c.Max > maxTenants {
		return fmt.Errorf("fastpath: -intake.max-tenants %d outside 1..%d", c.Max, maxTenants)
	}
	if c.MaxPerPeer < 0 || c.MaxPerPeer > maxTenants {
		return fmt.Errorf("fastpath: -intake.max-tenants-per-peer %d outside 0..%d", c.MaxPerPeer, maxTenants)
	}
	for _, m := range c.Routes {
		if m.Header != "" && !slices.Contains(c.Headers, m.Header) {
			return fmt.Errorf("fastpath: match-header %q is not one of -intake.headers (%s)", m.Header, strings.Join(c.Headers, ","))
		}
	}
	if err := c.Rate.validate(); err != nil {
		return err
	}
	switch {
	case c.MetricsTop < 0 || c.MetricsTop > maxTenants:
		return fmt.Errorf("fastpath: -tenant.metrics.top %d outside 0..%d", c.MetricsTop, maxTenants)
	case c.Idle < 0:
		return fmt.Errorf("fastpath: -intake.tenant-idle %v must not be negative", c.Idle)
	}
	return nil
}

// checkHeaderName accepts a lower-case HTTP token that gRPC also carries as ASCII metadata.
func checkHeaderName(h string) error {
	if h == "" || len(h) > 255 {
		return fmt.Errorf("fastpath: tenant header name %q is empty or too long", h)
	}
	for i := range len(h) {
		c := h[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("fastpath: tenant header name %q: lower-case letters, digits, '-', '_' and '.' only", h)
		}
	}
	switch {
	case strings.HasPrefix(h, "grpc-"), strings.HasSuffix(h, "-bin"):
		return fmt.Errorf("fastpath: tenant header name %q is reserved by gRPC or binary", h)
	case h == "authorization", h == "content-type", h == "content-length", h == "content-encoding",
		h == "host", h == "te", h == "connection", h == "transfer-encoding", h == "user-agent":
		return fmt.Errorf("fastpath: tenant header name %q is a protocol header", h)
	}
	return nil
}

// validTenantValue reports whether v can be a tenant value: printable ASCII, at most
// MaxValue bytes.
func validTenantValue[T string | []byte](v T) bool {
	if len(v) > MaxValue {
		return false
	}
	for i := range len(v) {
		if v[i] < 0x20 || v[i] > 0x7e {
			return false
		}
	}
	return true
}

// Match is a destination's match-header: which tenants' batches it takes.
type Match struct {
	// Header is the tenant header the destination selects on; "" takes the rest: every
	// tenant that no destination with a Match of named values takes.
	Header string
	// Values are the values taken; nil takes every value (match-header=NAME:*), alongside the
	// destinations that select.
	Values []string
}

// ParseMatch reads a match-header value: NAME:VALUE, NAME:V1|V2|..., or NAME:* for every
// value. The name is case-insensitive; an empty VALUE is the empty value.
func ParseMatch(s string) (Match, error) {
	name, vals, ok := strings.Cut(s, ":")
	name = strings.ToLower(strings.TrimSpace(name))
	if !ok || name == "" {
		return Match{}, fmt.Errorf("fastpath: match-header %q: want NAME:VALUE, NAME:V1|V2 or NAME:*", s)
	}
	if err := checkHeaderName(name); err != nil {
		return Match{}, err
	}
	m := Match{Header: name}
	if strings.TrimSpace(vals) == "*" {
		return m, nil
	}
	m.Values = []string{}
	for v := range strings.SplitSeq(vals, "|") {
		v = strings.TrimSpace(v)
		if !validTenantValue(v) {
			return Match{}, fmt.Errorf("fastpath: match-header value %q: longer than %d bytes or not printable ASCII", v, MaxValue)
		}
		if !slices.Contains(m.Values, v) {
			m.Values = append(m.Values, v)
		}
	}
	return m, nil
}

// String is the match-header the Match was parsed from.
func (m Match) String() string {
	switch {
	case m.Header == "":
		return ""
	case m.Values == nil:
		return m.Header + ":*"
	}
	return m.Header + ":" + strings.Join(m.Values, "|")
}

// Tenant is one interned tuple of tenant header values. It is immutable but for its rate
// bucket, counters and idle state; every method is safe for concurrent use. A Tenant stays
// valid after it has left the table (tenantidle.go): whoever holds it may still admit, send and
// forward with it.
type Tenant struct {
	id     uint32
	tab    *Table
	key    string   // the Key bytes: the index's key
	values []string // by header index
	label  string   // the values joined by '|': logs and metric labels
	rec    []byte   // the spool's form (Record)
	// rs is which destinations take the tenant's batches under the routes last asked about
	// (routesIn): worked out again when the routes change.
	rs atomic.Pointer[tenantRoutes]

	bucket bucket // -tenant.rate (tenantrate.go)
	// Counters read by the per-tenant metrics (tenantmetrics.go); series is the index of its
	// labelled series, -1 for "_other". Set before the tenant is published.
	admittedItems, admittedBytes, throttled atomic.Int64
	series                                  int32

	used atomic.Int64 // clock of the last Lookup (tenantidle.go)
	pins atomic.Int64 // open batches, and expiredBit once it has left the table
	// peer is the client address that brought the tenant into the table, charged for it
	// under MaxPerPeer until it leaves; invalid when none was (tenantpeer.go). Under the
	// table's lock.
	peer netip.Addr
}

// ID numbers the tenant in its table, from 0 (the default tuple) up. The ids of the tenants in
// the table are distinct; a tenant that left it (-intake.tenant-idle) gives its id to a later
// one.
func (t *Tenant) ID() uint32 { return t.id }

// Values returns the tenant's value of each header, in the order of Table.Headers. The
// slice must not be modified.
func (t *Tenant) Values() []string { return t.values }

// Value returns the tenant's value of the header name (lower case), and false when the table
// has no such header.
func (t *Tenant) Value(name string) (string, bool) {
	for i, h := range t.tab.cfg.Headers {
		if h == name {
			return t.values[i], true
		}
	}
	return "", false
}

// String returns the values joined by '|', as in logs and metric labels.
func (t *Tenant) String() string { return t.label }

// Takes reports whether destination i (in the order of the current routes: Config.Routes,
// then those of the last SetDestinationsRoutes) takes the tenant's batches.
func (t *Tenant) Takes(i int) bool { return t.TakesIn(t.tab.routes.Load(), i) }

// TakesIn is Takes under the routes rt (nil: none, every destination takes every tenant).
func (t *Tenant) TakesIn(rt *Routes, i int) bool {
	if rt == nil {
		return true
	}
	tk := t.routesIn(rt).takes
	return i >= 0 && i/64 < len(tk) && tk[i/64]&(1<<(i%64)) != 0
}

// Routed reports whether any destination takes the tenant's batches.
func (t *Tenant) Routed() bool {
	rt := t.tab.routes.Load()
	return rt == nil || t.routesIn(rt).routed
}

// CheckRouted returns nil when some destination takes the tenant's batches (or t is nil: no
// tenants), ErrNoRoute otherwise, counted: seal must never be handed a batch no destination
// takes. Safe for concurrent use.
func (t *Tenant) CheckRouted() error {
	if t == nil || t.Routed() {
		return nil
	}
	tenantRefusedNoRoute.Inc()
	return ErrNoRoute
}

// RouteMask is the destinations that take t's requests (the first 64), every destination
// without tenant routes. Safe for concurrent use.
func (t *Tenant) RouteMask() uint64 {
	if t == nil {
		return ^uint64(0)
	}
	rt := t.tab.routes.Load()
	if rt == nil {
		return ^uint64(0)
	}
	return t.routesIn(rt).takes[0]
}

// CurrentRoutes returns the routes of t's table now (nil: none). Safe for concurrent use.
func (t *Tenant) CurrentRoutes() *Routes { return t.tab.routes.Load() }

// Routes is the destinations' match-headers, in the order of their set. A set of
// destinations carries the one it was made with, so that a batch goes by the routes of the
// destinations it is handed to whatever a reload did since.
type Routes struct{ ms []Match }

// NewRoutes returns the routes of destinations with the match-headers ms, in their order;
// nil when there is none.
func NewRoutes(ms []Match) *Routes {
	if len(ms) == 0 {
		return nil
	}
	return &Routes{ms: slices.Clone(ms)}
}

// tenantRoutes is which destinations of rt take a tenant.
type tenantRoutes struct {
	rt     *Routes
	takes  []uint64 // bit i: destination i takes the tenant's batches
	routed bool     // some destination does
}

// routesIn returns which destinations of rt take t: kept, so that it is worked out once per
// tenant and set of routes (a batch of the set before a reload, still being handed out, may
// ask once more about the previous routes).
func (t *Tenant) routesIn(rt *Routes) *tenantRoutes {
	if r := t.rs.Load(); r != nil && r.rt == rt {
		return r
	}
	r := t.route(rt)
	t.rs.Store(r)
	return r
}

// Record returns the tenant as the spool records it beside a request: the header names with
// their values, so that a restart with other -intake.headers still reads it (FromRecord). The
// slice must not be modified.
func (t *Tenant) Record() []byte { return t.rec }

// Table interns tenant tuples. Lookups of a known tuple take no lock and allocate nothing;
// a new tuple takes the table's lock and costs the same however many the table holds
// (tenantindex.go).
//
// Invariants:
//  1. index holds the key of every tuple in the table with its *Tenant; it is written only
//     under mu, and replaced whole when it grows.
//  2. mu.all[id] is the tenant numbered id in the table, nil when id is in mu.free; id 0 is
//     the default tuple, which never leaves.
//  3. a tenant in index is in mu.all and has not expired (pins without expiredBit); an expired
//     one is in neither, and its id is in mu.free or held by a later tenant.
type Table struct {
	cfg   Config // cfg.Rate as at the start: rate holds the one in force
	rate  atomic.Pointer[Rate]
	index atomic.Pointer[tenantIndex]
	def   *Tenant
	clock func() int64                // nanotime; tests move it
	swept atomic.Int64                // clock of the last sweep
	creds atomic.Pointer[credentials] // -auth.tenants-file; nil without (tenantcreds.go)
	// routes is the current destinations' match-headers (Config.Routes, replaced by
	// SetDestinationsRoutes); nil: every destination takes every tenant.
	routes atomic.Pointer[Routes]
	mu     struct {
		sync.Mutex
		all  []*Tenant
		free []uint32 // ids of expired tenants, for the next new ones
		// nextIdle is the clock before which no tenant in the table can be idle, as the last
		// walk of the table found it (markIdleLocked).
		nextIdle int64
		// peers counts the tenants in the table each client address brought (tenantpeer.go).
		peers map[netip.Addr]int
		seriesLocked
	}
}

// NewTable returns a table holding the default tuple.
func NewTable(cfg Config) (*Table, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Headers = slices.Clone(cfg.Headers)
	ts := &Table{cfg: cfg, clock: nanotime}
	ts.rate.Store(&cfg.Rate)
	ts.routes.Store(NewRoutes(cfg.Routes))
	ts.mu.peers = map[netip.Addr]int{}
	ts.index.Store(newTenantIndex(maphash.MakeSeed(), minIndexSlots))
	var k Key
	for range cfg.Headers {
		ts.AddString(&k, "")
	}
	def, err := ts.insert(k.b[:k.n], netip.Addr{}, true)
	if err != nil {
		return nil, err
	}
	ts.def = def
	metricsTable.Store(ts)
	return ts, nil
}

// Routes returns the current destinations' match-headers (nil: every destination takes every
// tenant). Safe for concurrent use.
func (ts *Table) Routes() *Routes { return ts.routes.Load() }

// StoreRoutes makes rt the current routes: a tenant looked up or admitted from now on is checked
// against them. The pipeline calls it as it replaces its destinations. Safe for concurrent use.
func (ts *Table) StoreRoutes(rt *Routes) { ts.routes.Store(rt) }

// Headers returns the header names, in the order their values are added to a key. The slice
// must not be modified. Safe for concurrent use.
func (ts *Table) Headers() []string { return ts.cfg.Headers }

// Config returns the configuration the table was made with (its Rate as at the start: SetRate
// replaces the one in force). Safe for concurrent use.
func (ts *Table) Config() Config { return ts.cfg }

// Default returns the tuple of default values: the tenant of a request without any of the
// headers, and of every request of the UDS and Kafka intakes. Safe for concurrent use.
func (ts *Table) Default() *Tenant { return ts.def }

// Len returns how many tuples the table holds. Safe for concurrent use.
func (ts *Table) Len() int { return ts.index.Load().len() }

// All returns the tenants in the table, by id. Safe for concurrent use.
func (ts *Table) All() []*Tenant {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	all := make([]*Tenant, 0, len(ts.mu.all))
	for _, t := range ts.mu.all {
		if t != nil {
			all = append(all, t)
		}
	}
	return all
}

// Key collects one request's tenant values, in the order of Table.Headers, with the
// table's Add or AddString. The zero value is empty; it is meant to live on the caller's stack.
type Key struct {
	n   int
	bad bool
	b   [maxTenantKey]byte
}

// Reset empties k.
func (k *Key) Reset() { k.n, k.bad = 0, false }

// Add appends a request's value of the next header to k: empty (the header is missing or
// empty) stands for the default value. A value that is too long or not printable ASCII makes
// Lookup refuse the key. Safe for concurrent use on distinct keys.
func (ts *Table) Add(k *Key, v []byte) {
	if len(v) == 0 {
		ts.AddString(k, ts.cfg.Default)
		return
	}
	if !validTenantValue(v) || k.n+1+len(v) > len(k.b) {
		k.bad = true
		return
	}
	k.b[k.n] = byte(len(v))
	k.n += 1 + copy(k.b[k.n+1:], v)
}

// AddString is Add for a value held in a string.
func (ts *Table) AddString(k *Key, v string) {
	if v == "" {
		v = ts.cfg.Default
	}
	if !validTenantValue(v) || k.n+1+len(v) > len(k.b) {
		k.bad = true
		return
	}
	k.b[k.n] = byte(len(v))
	k.n += 1 + copy(k.b[k.n+1:], v)
}

// Lookup returns the tenant of k, interning it when it is new and the table has room.
// It refuses a key with a bad value (ErrValue), a new tuple past Max
// (ErrTooMany) and a tenant no destination takes (ErrNoRoute), each counted in
// otlpgate_tenant_refused_requests_total. A known tenant costs an index lookup and no
// allocation. With -intake.tenant-idle, a lookup marks the tenant used, and a new tuple at the
// bound first sweeps the idle tenants out (tenantidle.go). Safe for concurrent use.
func (ts *Table) Lookup(k *Key) (*Tenant, error) { return ts.LookupFrom(k, netip.Addr{}) }

// LookupFrom is Lookup for a request from the client address peer, which a new tuple is
// charged to under MaxPerPeer: past it the tuple is refused (ErrPeer). An invalid peer
// (a unix socket's client) is charged nothing. Safe for concurrent use.
func (ts *Table) LookupFrom(k *Key, peer netip.Addr) (*Tenant, error) {
	if k.bad {
		tenantRefusedValue.Inc()
		return nil, ErrValue
	}
	return ts.lookupKey(k.b[:k.n], peer, false)
}

// lookupKey is LookupFrom for a key known to be good; bound interns a new tuple whatever the
// bounds (a credential's, tenantcreds.go).
func (ts *Table) lookupKey(key []byte, peer netip.Addr, bound bool) (*Tenant, error) {
	t := ts.index.Load().find(key)
	ok := t != nil
	if ts.cfg.Idle > 0 {
		now := ts.clock()
		if ok {
			t.touch(now, ts.cfg.Idle)
			// Swept between the index load and the touch: intern the tuple again.
			ok = !t.expired()
		}
		if now-ts.swept.Load() >= int64(ts.cfg.Idle)/2 {
			ts.sweep(now)
		}
	}
	if !ok {
		var err error
		if t, err = ts.insert(key, peer, bound); err != nil {
			if err == ErrPeer {
				tenantRefusedPeer.Inc()
			} else {
				tenantRefusedMax.Inc()
			}
			return nil, err
		}
	}
	if !t.Routed() {
		tenantRefusedNoRoute.Inc()
		return nil, ErrNoRoute
	}
	return t, nil
}

// insert interns key, charged to peer; past Max and MaxPerPeer only when force is set, and
// then charged to no peer.
func (ts *Table) insert(key []byte, peer netip.Addr, force bool) (*Tenant, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if t := ts.index.Load().find(key); t != nil {
		return t, nil // interned meanwhile
	}
	if force {
		peer = netip.Addr{}
	}
	peer = peerOf(peer)
	if !ts.roomForPeerLocked(peer) {
		return nil, ErrPeer
	}
	if ts.index.Load().len() >= ts.cfg.Max && !force {
		n := 0
		if ts.cfg.Idle > 0 {
			n = ts.markIdleLocked(ts.clock())
		}
		if n == 0 {
			return nil, ErrTooMany
		}
		ts.dropExpiredLocked(n)
	}
	t := &Tenant{tab: ts, key: string(key), peer: peer}
	if n := len(ts.mu.free); n > 0 {
		t.id = ts.mu.free[n-1]
		ts.mu.free = ts.mu.free[:n-1]
	} else {
		t.id = uint32(len(ts.mu.all))
		ts.mu.all = append(ts.mu.all, nil)
	}
	t.used.Store(ts.clock())
	for b := key; len(b) > 0; {
		n := int(b[0])
		t.values = append(t.values, string(b[1:1+n]))
		b = b[1+n:]
	}
	if len(t.values) != len(ts.cfg.Headers) {
		panic("BUG: fastpath: a tenant key holds a value per header")
	}
	t.label = strings.Join(t.values, "|")
	t.rec = appendTenantRecord(nil, ts.cfg.Headers, t.values)
	t.bucket.tokens, t.bucket.last = ts.rate.Load().Burst, nanotime()
	if rt := ts.routes.Load(); rt != nil {
		t.rs.Store(t.route(rt))
	}
	ts.assignSeriesLocked(t)
	x := ts.index.Load().addLocked(t)
	ts.chargePeerLocked(t)
	ts.mu.all[t.id] = t
	ts.index.Store(x)
	tenantsKnown.Set(float64(x.len()))
	return t, nil
}

// route works out which destinations of rt take t: those whose Match names its value or takes
// every value, and, when none of those with named values does, those without a Match.
func (t *Tenant) route(rt *Routes) *tenantRoutes {
	rs := rt.ms
	r := &tenantRoutes{rt: rt, takes: make([]uint64, (len(rs)+63)/64)}
	set := func(i int) { r.takes[i/64] |= 1 << (i % 64); r.routed = true }
	claimed := false
	for i, m := range rs {
		if m.Header == "" {
			continue
		}
		v, _ := t.Value(m.Header)
		if m.Values == nil {
			set(i)
		} else if slices.Contains(m.Values, v) {
			set(i)
			claimed = true
		}
	}
	if claimed {
		return r
	}
	for i, m := range rs {
		if m.Header == "" {
			set(i)
		}
	}
	return r
}

// The spool's record of a tenant: a version byte, the number of headers, then for each its
// name and value, each prefixed by its length in one byte.
const tenantRecordVersion = 1

func appendTenantRecord(dst []byte, names, values []string) []byte {
	dst = append(dst, tenantRecordVersion, byte(len(names)))
	for i, n := range names {
		dst = append(dst, byte(len(n)))
		dst = append(dst, n...)
		dst = append(dst, byte(len(values[i])))
		dst = append(dst, values[i]...)
	}
	return dst
}

var errTenantRecord = errors.New("fastpath: malformed tenant record")

// FromRecord returns the tenant a spooled request was admitted for, from its Record: the value
// of each of the table's headers that the record names, the default for the others; a nil
// record (a spool written without -intake.headers) is the default tenant. Replays are never
// refused for the table's bound (their requests were admitted already), nor for want of a
// route: the caller decides what a destination does with a tenant it does not take. A known
// tenant costs no allocation. Safe for concurrent use.
func (ts *Table) FromRecord(rec []byte) (*Tenant, error) {
	if len(rec) == 0 {
		return ts.def, nil
	}
	if rec[0] != tenantRecordVersion || len(rec) < 2 {
		return nil, errTenantRecord
	}
	var k Key
	for _, h := range ts.cfg.Headers {
		v, ok, err := recordValue(rec[2:], int(rec[1]), h)
		if err != nil {
			return nil, err
		}
		if !ok {
			v = nil
		}
		ts.Add(&k, v)
	}
	if k.bad {
		return nil, errTenantRecord
	}
	if t := ts.index.Load().find(k.b[:k.n]); t != nil && !t.expired() {
		if ts.cfg.Idle > 0 {
			t.touch(ts.clock(), ts.cfg.Idle)
		}
		return t, nil
	}
	return ts.insert(k.b[:k.n], netip.Addr{}, true)
}

// recordValue finds the value of name among the n pairs of b.
func recordValue(b []byte, n int, name string) ([]byte, bool, error) {
	for range n {
		if len(b) < 1 || len(b) < 1+int(b[0])+1 {
			return nil, false, errTenantRecord
		}
		k := b[1 : 1+int(b[0])]
		b = b[1+int(b[0]):]
		if len(b) < 1+int(b[0]) {
			return nil, false, errTenantRecord
		}
		v := b[1 : 1+int(b[0])]
		b = b[1+int(b[0]):]
		if string(k) == name {
			return v, true, nil
		}
	}
	return nil, false, nil
}
