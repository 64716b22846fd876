package kafka

import (
	"sync"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	commonv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/common/v1"
)

var (
	instancesCreated = promauto.NewCounter(prometheus.CounterOpts{
		Name: "otlpgate_kafka_instances_created_total",
		Help: "Kafka client instances created, by a GetTelemetrySubscriptions or by a push from an instance not known.",
	})
	instancesRemoved = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_kafka_instances_removed_total",
		Help: "Kafka client instances forgotten, by reason: expired (silent for max(60s, 3 push intervals)), evicted (-kafka.max-instances or -kafka.max-instance-bytes reached, least recently seen first), connection_closed.",
	}, []string{"reason"})
	removedExpired    = instancesRemoved.WithLabelValues("expired")
	removedEvicted    = instancesRemoved.WithLabelValues("evicted")
	removedConnClosed = instancesRemoved.WithLabelValues("connection_closed")
)

// minInstanceTTL is the shortest time an instance is kept without hearing from it.
const minInstanceTTL = time.Minute

// instance is the state of one client instance. All fields are guarded by registry.mu.
type instance struct {
	id    [16]byte
	idStr string
	owner *conn // the connection it was last heard on
	lbl   *clientLabels
	attrs []*commonv1.KeyValue // resource labels; replaced, never modified, once published

	gen   uint64 // generation of the subscription set plan was resolved against
	plan  *plan
	subID int32

	lastPush time.Time // last push that passed the throttle
	lastSeen time.Time // last request of either kind
	// fetched is set by a GetTelemetrySubscriptions and cleared by the next push that passes
	// the throttle: a push right after a (re-)fetch is never early. An order, not a timestamp
	// comparison, so that a fetch within the clock's resolution of the push still counts.
	fetched     bool
	terminating bool // a push with Terminating set was accepted

	prev, next *instance // recency list, most recent at the head

	bytes int64 // instanceBytes of lbl and plan, counted in registry.mu.bytes
}

// ttl is how long the instance is kept without a request.
func (in *instance) ttl() time.Duration {
	return max(minInstanceTTL, 3*in.plan.interval)
}

// registry holds the client instances, bounded in number and in bytes, least recently seen
// evicted first.
//
// Invariants (under mu):
//  1. Every instance in byID is on the recency list exactly once, and nothing else is.
//  2. Every instance has a non-nil plan, lbl and attrs.
//  3. bytes is the sum of the bytes of the instances in byID; outside a method it is at most
//     maxBytes, or the list holds one instance only.
type registry struct {
	max      int
	maxBytes int64
	// wake gets a token when an instance is created while the sweep sleeps (expire).
	wake chan struct{}
	mu   struct {
		sync.Mutex
		byID       map[[16]byte]*instance
		head, tail *instance
		bytes      int64
		// sleeping is set by expire when it left the registry empty: the sweep waits on wake
		// until the next instance is created.
		sleeping bool
	}
}

func newRegistry(max int, maxBytes int64) *registry {
	r := &registry{max: max, maxBytes: maxBytes, wake: make(chan struct{}, 1)}
	r.mu.byID = make(map[[16]byte]*instance)
	return r
}

// subscriptionAnswer is what a GetTelemetrySubscriptions response carries about the instance.
type subscriptionAnswer struct {
	id    [16]byte
	subID int32
	plan  *plan
}

// get handles a GetTelemetrySubscriptions for id on connection c: a zero (or reserved) id gets
// a fresh one; an id not known is adopted. Safe for concurrent use.
func (r *registry) get(c *conn, lbl *clientLabels, id [16]byte, set *subscriptionSet, now time.Time) subscriptionAnswer {
	r.mu.Lock()
	defer r.mu.Unlock()
	var in *instance
	if reservedID(id) {
		for {
			id = newID()
			if r.mu.byID[id] == nil {
				break
			}
		}
	} else {
		in = r.lookupLocked(id, now)
	}
	if in == nil {
		in = r.createLocked(id)
	}
	r.refreshLocked(in, c, lbl, set)
	in.fetched = true
	r.touchLocked(in, now)
	r.fitLocked()
	return subscriptionAnswer{id: in.id, subID: in.subID, plan: in.plan}
}

// pushVerdict is the outcome of the checks a push passes under the lock.
type pushVerdict struct {
	code   int16
	reason pushReason
	// plan and attrs are the instance's at the time of the push, for forwarding.
	plan  *plan
	attrs []*commonv1.KeyValue
}

// pushReason tells apart the cases that share an error code, for the metrics.
type pushReason uint8

const (
	pushOK pushReason = iota
	pushInvalidInstance
	pushUnknownInstance
	pushAfterTerminating
	pushThrottled
	pushStaleSubscription
)

// admitPush runs the checks of a PushTelemetry that depend on the instance, in this order:
// reserved id, unknown instance (re-created, so that the client's immediate re-fetch finds it),
// push after a terminating push, too early (a terminating push is exempt, and so is the first
// push after a GetTelemetrySubscriptions), stale subscription id. Safe for concurrent use.
func (r *registry) admitPush(c *conn, lbl *clientLabels, id [16]byte, subID int32, terminating bool, set *subscriptionSet, now time.Time) pushVerdict {
	if reservedID(id) {
		return pushVerdict{code: errInvalidRequest, reason: pushInvalidInstance}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	in := r.lookupLocked(id, now)
	if in == nil {
		in = r.createLocked(id)
		r.refreshLocked(in, c, lbl, set)
		r.touchLocked(in, now)
		r.fitLocked()
		return pushVerdict{code: errUnknownSubscriptionID, reason: pushUnknownInstance}
	}
	r.refreshLocked(in, c, lbl, set)
	r.touchLocked(in, now)
	r.fitLocked()
	if in.terminating {
		return pushVerdict{code: errInvalidRequest, reason: pushAfterTerminating}
	}
	if !terminating && !in.fetched && now.Sub(in.lastPush) < in.plan.interval {
		return pushVerdict{code: errThrottlingQuotaExceeded, reason: pushThrottled}
	}
	in.lastPush = now
	in.fetched = false
	if subID != in.subID {
		return pushVerdict{code: errUnknownSubscriptionID, reason: pushStaleSubscription}
	}
	if terminating {
		in.terminating = true
	}
	return pushVerdict{code: errNone, reason: pushOK, plan: in.plan, attrs: in.attrs}
}

// lookupLocked returns the instance for id, dropping it if it expired.
func (r *registry) lookupLocked(id [16]byte, now time.Time) *instance {
	in := r.mu.byID[id]
	if in == nil {
		return nil
	}
	if now.Sub(in.lastSeen) > in.ttl() {
		r.removeLocked(in)
		removedExpired.Inc()
		return nil
	}
	return in
}

// createLocked adds an instance for id, evicting the least recently seen one when full. The
// caller refreshes and touches it before unlocking.
func (r *registry) createLocked(id [16]byte) *instance {
	for len(r.mu.byID) >= r.max && r.mu.tail != nil {
		r.removeLocked(r.mu.tail)
		removedEvicted.Inc()
	}
	in := &instance{id: id, idStr: idString(id)}
	if r.mu.sleeping {
		r.mu.sleeping = false
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
	r.mu.byID[id] = in
	r.pushFrontLocked(in)
	instancesCreated.Inc()
	return in
}

// refreshLocked records the connection the instance was heard on and, when the client's labels
// or the subscription set changed since the last resolution, resolves its plan again.
func (r *registry) refreshLocked(in *instance, c *conn, lbl *clientLabels, set *subscriptionSet) {
	in.owner = c
	if in.lbl == lbl && in.plan != nil && in.gen == set.gen {
		return
	}
	vals := lbl.values(in.idStr)
	if in.lbl != lbl {
		in.lbl = lbl
		in.attrs = labelAttrs(&vals)
	}
	in.plan = set.resolve(&vals)
	in.gen = set.gen
	in.subID = subscriptionID(in.plan, in.id)
	b := instanceBytes(&vals, in.plan)
	r.mu.bytes += b - in.bytes
	in.bytes = b
}

// fitLocked evicts the least recently seen instances while the registry holds more than
// maxBytes, sparing the most recent one (the caller's, just touched): an instance at the
// label caps takes a few KiB, and the budget is at least 64KiB.
func (r *registry) fitLocked() {
	for r.mu.bytes > r.maxBytes && r.mu.tail != nil && r.mu.tail != r.mu.head {
		r.removeLocked(r.mu.tail)
		removedEvicted.Inc()
	}
}

// instanceOverhead is what an instance costs besides its label values and its plan's
// prefixes: the instance, its map entry, its id string, and the six attributes (KeyValue,
// AnyValue and the string wrapper each) with their slice. A round upper bound of what the
// parts measure on 64-bit platforms; TestInstanceBytesEstimate checks it against the heap.
const instanceOverhead = int64(unsafe.Sizeof(instance{})) + 64 + 48 +
	int64(len(labelNames))*(96+64+32+8) + int64(unsafe.Sizeof(plan{})) + 64

// instanceBytes estimates the memory of an instance with these label values and this plan.
// The values are counted whole even where connections share them, so that the estimate is an
// upper bound.
func instanceBytes(vals *[len(labelNames)]string, p *plan) int64 {
	n := instanceOverhead
	for _, v := range vals {
		n += int64(len(v))
	}
	// The plan's own prefix slice; the strings belong to the subscriptions.
	return n + 16*int64(cap(p.prefixes))
}

// labelAttrs builds the resource attributes for a client's label values.
func labelAttrs(vals *[len(labelNames)]string) []*commonv1.KeyValue {
	attrs := make([]*commonv1.KeyValue, len(labelNames))
	for i, name := range labelNames {
		attrs[i] = &commonv1.KeyValue{
			Key:   name,
			Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: vals[i]}},
		}
	}
	return attrs
}

func (r *registry) touchLocked(in *instance, now time.Time) {
	in.lastSeen = now
	if r.mu.head == in {
		return
	}
	r.unlinkLocked(in)
	r.pushFrontLocked(in)
}

func (r *registry) pushFrontLocked(in *instance) {
	in.prev, in.next = nil, r.mu.head
	if r.mu.head != nil {
		r.mu.head.prev = in
	}
	r.mu.head = in
	if r.mu.tail == nil {
		r.mu.tail = in
	}
}

func (r *registry) unlinkLocked(in *instance) {
	if in.prev != nil {
		in.prev.next = in.next
	} else {
		r.mu.head = in.next
	}
	if in.next != nil {
		in.next.prev = in.prev
	} else {
		r.mu.tail = in.prev
	}
	in.prev, in.next = nil, nil
}

func (r *registry) removeLocked(in *instance) {
	r.unlinkLocked(in)
	delete(r.mu.byID, in.id)
	r.mu.bytes -= in.bytes
	in.owner = nil
}

// dropConn forgets the instances last heard on c, which is closing. Safe for concurrent use.
func (r *registry) dropConn(c *conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for in := r.mu.head; in != nil; {
		next := in.next
		if in.owner == c {
			r.removeLocked(in)
			removedConnClosed.Inc()
		}
		in = next
	}
}

// expire forgets the instances not heard from within their ttl. The least recently seen are at
// the tail, but ttls differ by plan, so the whole list is walked. It reports whether none is
// left: then the next instance created sends a token on wake, for the sweep to wait on. Safe
// for concurrent use.
func (r *registry) expire(now time.Time) (empty bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for in := r.mu.tail; in != nil; {
		prev := in.prev
		if now.Sub(in.lastSeen) > in.ttl() {
			r.removeLocked(in)
			removedExpired.Inc()
		}
		in = prev
	}
	// Nothing is left to expire until an instance is created, which wakes the sweep (wake).
	r.mu.sleeping = len(r.mu.byID) == 0
	return r.mu.sleeping
}

// len returns the number of instances. Safe for concurrent use.
func (r *registry) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.mu.byID)
}

// bytes returns the estimated bytes of the instances. Safe for concurrent use.
func (r *registry) bytes() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.bytes
}

// clear forgets every instance (at shutdown), keeping the gauge right when a process runs more
// than one server (tests). Safe for concurrent use.
func (r *registry) clear() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.mu.head != nil {
		r.removeLocked(r.mu.head)
	}
}
