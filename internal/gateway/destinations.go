package gateway

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync/atomic"
	"time"

	"github.com/otlpgate/otlpgate/client"
	"github.com/otlpgate/otlpgate/client/filedest"
	"github.com/otlpgate/otlpgate/client/kafkadest"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/fastpath/tenant"
	"github.com/otlpgate/otlpgate/spool"
	"github.com/otlpgate/otlpgate/spool/feed"
)

// member is one destination the gateway hands batches to.
type member struct {
	name string
	// key is what the spool knows it by (spool-id, default name); parked goes by it too.
	key string
	// cfg is an upstream's configuration (from -dest, -dest.file or Config.Destinations),
	// compared at a reload to tell a changed destination; nil for Extra and the file.
	cfg   *client.Config
	dest  pipeline.Destination
	out   outlet // what Shutdown drains: nil for Extra, which the caller stops
	queue int64  // its own queue bound, for the spool's shares; 0: none

	// With a spool:
	feeder *feed.Feeder
	reader *spool.Reader
	// resumed is closed once the feeder was started (resume), so that parking waits for it.
	resumed chan struct{}
}

// outlet is a destination the gateway starts and drains on Shutdown: a client.Dest, a
// client.Fleet or the file.
type outlet interface {
	pipeline.Destination
	Shutdown(ctx context.Context) error
}

// upstream builds the member for an upstream's configuration, not started.
func (g *Gateway) upstream(c client.Config) (*member, error) {
	m := &member{name: c.Name, key: spoolKey(c), cfg: &c, queue: c.QueueBytes}
	built := c // m.cfg, compared at a reload, stays as configured
	built.Tally = &g.tally
	if c.Protocol == client.ProtocolFile {
		fc := g.cfg.File // -file.* settings, with the destination's own name, path and queue
		fc.Name, fc.Path, fc.QueueBytes = c.Name, c.Path, c.QueueBytes
		f, err := filedest.New(fc, g.log)
		if err != nil {
			return nil, fmt.Errorf("destination %q: %w", c.Name, err)
		}
		m.dest, m.out = f, f
		g.log.Info("destination", "name", c.Name, "protocol", c.Protocol, "path", c.Path)
		return m, nil
	}
	if c.Protocol == client.ProtocolKafka {
		kc, err := kafkadest.FromDest(c)
		if err == nil {
			var k *kafkadest.Dest
			if k, err = kafkadest.New(kc, g.log); err == nil {
				m.dest, m.out = k, k
			}
		}
		if err != nil {
			return nil, fmt.Errorf("destination %q: %w", c.Name, err)
		}
		g.log.Info("destination", "name", c.Name, "protocol", c.Protocol, "brokers", c.Kafka.Brokers,
			"topics", c.Kafka.Topics(), "partition", c.Kafka.Partition)
		return m, nil
	}
	if c.Resolver != "" {
		f, err := client.NewFleet(built, g.log)
		if err != nil {
			return nil, err
		}
		m.dest, m.out = f, f
		g.log.Info("destination", "name", c.Name, "resolver", c.Resolver, "balance", c.Balance)
		return m, nil
	}
	d, err := client.New(built, g.log)
	if err != nil {
		return nil, err
	}
	m.dest, m.out = d, d
	g.log.Info("destination", "name", c.Name, "endpoint", c.Endpoint, "protocol", c.Protocol, "mode", c.Mode)
	return m, nil
}

// resizable is an upstream whose queue bound changes in place.
type resizable interface{ SetQueueBytes(n int64) }

var _, _, _, _ resizable = (*client.Dest)(nil), (*client.Fleet)(nil), (*filedest.Dest)(nil), (*kafkadest.Dest)(nil)

// sameBut reports whether a and b differ at most in QueueBytes, the one setting a running
// destination takes in place.
func sameBut(a, b client.Config) bool {
	a.QueueBytes = b.QueueBytes
	return reflect.DeepEqual(a, b)
}

// resize gives m's upstream the queue bound n in place; with a spool, applySpooled then sets
// its feeder's share from m.queue.
func (m *member) resize(n int64) {
	m.dest.(resizable).SetQueueBytes(n)
	c := *m.cfg
	c.QueueBytes = n
	m.cfg, m.queue = &c, n
}

// start starts m's outlet (a file needs no start) and, with a spool, its feeder.
func (m *member) start() {
	if s, ok := m.out.(interface{ Start() }); ok {
		s.Start()
	}
	if m.feeder != nil {
		m.feeder.Start()
	}
}

// dests is the destinations of ms, in order.
func dests(ms []*member) []pipeline.Destination {
	out := make([]pipeline.Destination, len(ms))
	for i, m := range ms {
		out[i] = m.dest
	}
	return out
}

// applyDests makes configs (every upstream, as Config.destinations returns them) the running
// set: new destinations start, removed ones stop taking batches and drain, changed ones (a
// setting other than queue-bytes differs) are replaced without losing a batch. One whose
// queue-bytes alone changed keeps running with the new bound (member.resize): the default
// derives from how many destinations there are, so adding or removing one would otherwise
// replace every other, and a replacement sends again what was in flight. A request goes to
// the destinations that ran when it was admitted. Without a spool, the pipeline's set is swapped (SetDestinations); a
// changed destination hands its batches over to its replacement (client.Dest.Handover; a
// fleet drains), a removed one drains like at shutdown (-shutdown.timeout), and what it cannot
// deliver by then is lost, counted by the client and reported by Shutdown. With a spool, each
// destination's feeder stops or starts: a removed destination keeps its spool reader, and so
// its records, until it comes back, when its replacement reads what it left unfinished
// (spool.Reader.Rewind). Called with g.dmu held.
func (g *Gateway) applyDests(configs []client.Config) (added, removed, changed []string, err error) {
	cur := map[string]*member{}
	for _, m := range g.dmu.members {
		if m.cfg != nil {
			cur[m.name] = m
		}
	}
	var next, fresh []*member
	replaces := map[*member]*member{} // new -> old, for a changed destination
	resized := map[*member]int64{}    // kept, with a new queue-bytes
	for _, c := range configs {
		old := cur[c.Name]
		delete(cur, c.Name)
		if old != nil && sameBut(*old.cfg, c) {
			if old.cfg.QueueBytes != c.QueueBytes {
				resized[old] = c.QueueBytes
			}
			next = append(next, old)
			continue
		}
		m, berr := g.upstream(c)
		if berr != nil {
			for _, f := range fresh {
				f.out.Shutdown(context.Background()) // built, never started: nothing to lose
			}
			return nil, nil, nil, berr
		}
		next, fresh = append(next, m), append(fresh, m)
		if old != nil {
			replaces[m] = old
			changed = append(changed, c.Name)
		} else {
			added = append(added, c.Name)
		}
	}
	// Applied once every new destination was built: a reload refused changes nothing.
	for m, n := range resized {
		g.log.Info("destination keeps running with a new queue-bytes", "destination", m.name, "from", m.cfg.QueueBytes, "to", n)
		m.resize(n)
	}
	for _, m := range g.dmu.members {
		if m.cfg == nil {
			next = append(next, m) // Extra: the caller's, never reloaded
		}
	}
	var gone []*member
	for _, m := range g.dmu.members {
		if m.cfg != nil && cur[m.name] == m {
			gone = append(gone, m)
			removed = append(removed, m.name)
		}
	}

	if g.spool != nil {
		err = g.applySpooled(next, fresh, gone, replaces)
	} else {
		err = g.applyMemory(next, fresh, gone, replaces)
	}
	return added, removed, changed, err
}

// applyMemory swaps the pipeline's set and retires what left it.
func (g *Gateway) applyMemory(next, fresh, gone []*member, replaces map[*member]*member) error {
	rt, err := g.cfg.routerOf(next)
	if err != nil {
		// reloadDestFile built the same router from the same destinations: unreachable.
		for _, m := range fresh {
			m.out.Shutdown(context.Background())
		}
		return err
	}
	for _, m := range fresh {
		m.start()
	}
	// The routes go with the set: a destination keeps its match-header and its
	// match=resource whatever position the reload gave it.
	if err := g.p.SetDestinationsRoutes(dests(next), pipeline.Routes{Tenants: routesOf(next), Resources: rt}); err != nil {
		// Closed: the gateway is shutting down, and g.dmu.closed stops reloads before that.
		for _, m := range fresh {
			m.out.Shutdown(context.Background())
		}
		return err
	}
	g.dmu.members = next
	for nm, old := range replaces {
		g.retire(old, nm)
	}
	for _, m := range gone {
		g.retire(m, nil)
	}
	return nil
}

// applySpooled stops the feeders of what left and starts feeders for what came; the members of
// fresh that the spool cannot take (their cursor cannot be written) are left out, and the error
// says so.
func (g *Gateway) applySpooled(next, fresh, gone []*member, replaces map[*member]*member) error {
	for _, m := range gone {
		m.feeder.Stop()
		m.reader.Away() // what is appended from now on is not for it, should it come back
		g.park(m)
	}
	for nm, old := range replaces {
		old.feeder.Stop()
		if nm.key != old.key {
			// Its spool-id changed: the spool knows the new one by another name, and the old
			// name's reader is removed as if the destination were (its hold is bounded).
			old.reader.Away()
		}
		g.park(old)
	}
	var errs []error
	var started []*member
	kept := next[:0]
	for _, m := range next {
		if m.feeder != nil {
			kept = append(kept, m)
			continue
		}
		r, err := g.spool.AddReader(m.key)
		if err == nil {
			err = g.newFeeder(m, r, len(kept), len(next))
		}
		if err != nil {
			m.out.Shutdown(context.Background())
			errs = append(errs, fmt.Errorf("destination %s left out: %w", m.name, err))
			continue
		}
		kept, started = append(kept, m), append(started, m)
	}
	// The records carry their tenant and their resource entries, not a destination: each
	// feeder decides which of them its destination takes by the set's match-headers and
	// match=resource at its position in the set. A reload moves the positions, so every
	// feeder is given the new routes with its new position at once, before a new one starts
	// (a feeder never reads the new routes at its old position, which would hand it another
	// destination's tenants or resources and finish its own unread).
	var rs []tenant.DestRoute
	if ts := g.cfg.Pipeline.Tenants; ts != nil {
		var err error
		if rs, err = ts.SetRoutes(routesOf(kept)); err != nil {
			return errors.Join(append(errs, err)...) // checkTenants refused it before: unreachable
		}
	}
	rt, err := g.cfg.routerOf(kept)
	if err != nil {
		return errors.Join(append(errs, err)...) // reloadDestFile built it before: unreachable
	}
	// Admission splits by the new router from now on (and spools compressed for, and serves
	// the signals of, the new set), and returns once every request split by the previous one
	// is in the spool, so that Written divides the records by router.
	g.sa.SetDestinationsRouter(dests(kept), rt)
	// What was spooled until now goes by the routes it was admitted under: a destination
	// taking the rest keeps a tenant's (or a resource's) records it has not read yet, though
	// the reload gave them to a new destination (which reads from now on).
	from := g.spool.Written()
	for i, m := range kept {
		r := feed.Route{Tenants: tenant.DestRoute{Dest: i}, Resources: rt} // without match-header each takes every tenant
		if i < len(rs) {
			r.Tenants = rs[i]
		}
		if slices.Contains(started, m) {
			m.feeder.SetRoute(r, 0)
		} else {
			m.feeder.SetRoute(r, from)
		}
	}
	for _, m := range started {
		if s, ok := m.out.(interface{ Start() }); ok {
			s.Start()
		}
		g.resume(m)
	}
	for _, m := range kept {
		m.feeder.SetMaxBytes(feedShare(g.cfg, m.queue, len(kept)))
	}
	g.dmu.members = kept
	return errors.Join(errs...)
}

// park drains m, whose feeder stopped, in the background: what it delivers is finished in the
// spool, what it gives up stays unfinished in its reader, which keeps its hold. Its name's next
// member resumes once it is done (resume).
func (g *Gateway) park(m *member) {
	done := make(chan struct{})
	g.dmu.parked[m.key] = done
	g.retiring.Add(1)
	go func() {
		defer g.retiring.Done()
		defer close(done)
		// A member removed before its resume ran: that rewinds and starts the (stopped) feeder
		// first, so that no two of the name's members ever use the reader at once.
		<-m.resumed
		ctx, cancel := context.WithTimeout(g.retireCtx, g.cfg.ShutdownTimeout)
		defer cancel()
		if err := m.out.Shutdown(ctx); err != nil {
			g.log.Info("a removed destination's undelivered batches stay in the spool until it comes back or its hold ends (-spool.removed-hold)", "destination", m.name, "err", err)
		}
	}()
}

// resume starts m's feeder: at once for a name new to the spool, else once the name's previous
// instance finished draining, from what that one left unfinished.
func (g *Gateway) resume(m *member) {
	m.resumed = make(chan struct{})
	prev, ok := g.dmu.parked[m.key]
	if !ok {
		m.feeder.Start()
		close(m.resumed)
		return
	}
	delete(g.dmu.parked, m.key)
	m.reader.Back() // a removed destination back: what was appended while it was away is not for it
	g.retiring.Add(1)
	go func() {
		defer g.retiring.Done()
		defer close(m.resumed)
		<-prev
		m.reader.Rewind()
		m.feeder.Start() // after Stop (removed again, or a shutdown) it ends at once
	}()
}

// retire drains m, which takes no more batches, in the background. Given a replacement (a
// changed destination), a client.Dest hands its batches over to it instead of dropping what it
// could not deliver in time.
func (g *Gateway) retire(m, replacement *member) {
	g.retiring.Add(1)
	go func() {
		defer g.retiring.Done()
		ctx, cancel := context.WithTimeout(g.retireCtx, g.cfg.ShutdownTimeout)
		defer cancel()
		var err error
		if d, ok := m.out.(*client.Dest); ok && replacement != nil {
			var lost atomic.Int64
			err = d.Handover(ctx, func(b *pipeline.Batch, _ bool) {
				if !handTo(ctx, replacement.dest, b) {
					lost.Add(1)
				}
			})
			if n := lost.Load(); n > 0 {
				err = fmt.Errorf("%d batches could not be handed to its replacement", n)
			}
		} else {
			err = m.out.Shutdown(ctx)
		}
		if err != nil {
			g.log.Error("data lost: a destination a reload removed or replaced did not drain in time", "destination", m.name, "err", err)
			g.lostMu.Lock()
			g.reloadLost = append(g.reloadLost, fmt.Errorf("destination %s, removed: %w", m.name, err))
			g.lostMu.Unlock()
		}
	}()
}

// handTo enqueues b, handed back by a destination being replaced, to its replacement d,
// waiting while d's queue is full. b is finished undelivered, and handTo reports false, when d
// is closing or ctx ends first.
func handTo(ctx context.Context, d pipeline.Destination, b *pipeline.Batch) bool {
	for {
		err := d.Enqueue(b)
		if err == nil {
			return true
		}
		if errors.Is(err, pipeline.ErrClosed) || ctx.Err() != nil {
			b.Done(false)
			return false
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
}
