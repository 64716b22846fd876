package uds

import (
	"math"
	"net"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/otlpgate/otlpgate/codec/ocdaemon"
	"github.com/otlpgate/otlpgate/internal/statusmetrics"
	resourcev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/resource/v1"
)

var (
	messagesVec = statusmetrics.Auto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_uds_messages_total",
		Help: "Complete OpenCensus daemon messages received, by type (discarded ones included).",
	}, []string{"type"})
	messagesByType = func() (c [256]prometheus.Counter) {
		for t := range c {
			if ocdaemon.Type(t).Valid() {
				c[t] = messagesVec.WithLabelValues(ocdaemon.Type(t).String())
			}
		}
		return c
	}()
	discardedVec = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_uds_discarded_messages_total",
		Help: "OpenCensus daemon messages discarded, by reason: truncated (the client cut it short), undecodable (its payload did not decode), too_large (over -uds.max-message-bytes), intake_limit (no room in -intake.max-bytes to keep a message that did not arrive in one read).",
	}, []string{"reason"})
	discarded = func() (c [ocdaemon.NumReasons]prometheus.Counter) {
		for r := range c {
			c[r] = discardedVec.WithLabelValues(ocdaemon.Reason(r).String())
		}
		return c
	}()
	skippedBytes = promauto.NewCounter(prometheus.CounterOpts{
		Name: "otlpgate_uds_skipped_bytes_total",
		Help: "Bytes skipped while looking for the next valid message header.",
	})
)

func countDiscard(r ocdaemon.Reason) { discarded[r].Inc() }
func countSkip(n int)                { skippedBytes.Add(float64(n)) }

// conn is the state of one client connection. It is owned by the connection's event loop:
// messages of one connection are handled one after another, in order.
type conn struct {
	s     *Server
	split ocdaemon.Splitter

	// proc is the process the connection is attached to (nil before the first stats-relevant
	// message, or when the process limit was hit); pid is the pid it was attached for.
	proc *process
	pid  uint64
	rt   runtimeInfo

	// res caches the trace resource for resPID and rt.
	res    *resourcev1.Resource
	resPID uint64

	// Decode targets, reused message after message.
	init  ocdaemon.Init
	meas  ocdaemon.Measure
	views ocdaemon.Views
	names ocdaemon.Names
	rec   ocdaemon.Record
	key   []byte
	frame ocdaemon.Frame

	// Timeout state (timeout.go); gc and loop are nil when the server keeps no timeouts.
	gc   gnet.Conn
	loop gnet.EventLoop
	// nc is the connection with EngineNet (netengine.go), nil with gnet.
	nc *net.UnixConn
	// closed is set by OnClose; event loop only.
	closed bool
	// watchIdx is the connection's index in the watch list, guarded by its lock.
	watchIdx int
	// lastRead and partialSince are coarse-clock times written by the event loop and read by
	// the sweep; partialSince is 0 while no message is incomplete, and partialPos (event
	// loop only) is the stream offset of the incomplete one.
	lastRead     atomic.Int64
	partialSince atomic.Int64
	partialPos   uint64
	// checking is set while an expiry check is queued on the event loop.
	checking atomic.Bool
}

func newConn(s *Server) *conn {
	c := &conn{s: s, watchIdx: -1}
	c.split.Discard = countDiscard
	c.split.Skip = countSkip
	if s.cfg.Limiter != nil {
		c.split.Budget = udsBudget{s.cfg.Limiter}
	}
	c.split.Init(s.cfg.MaxMessageBytes)
	return c
}

// feed handles the bytes of one read. in is valid only during the call.
func (c *conn) feed(in []byte) {
	c.split.Feed(in)
	for c.split.Next(&c.frame) {
		if !c.handle(&c.frame) {
			c.split.Reject()
		}
	}
}

// close ends the connection: a partial message is discarded and the process attachment released.
func (c *conn) close() {
	c.split.Close()
	if c.proc != nil {
		c.s.reg.detach(c.proc)
		c.proc = nil
	}
}

// handle applies one message. It returns false when the payload does not decode, which makes
// the Splitter discard the message and resynchronise.
func (c *conn) handle(f *ocdaemon.Frame) bool {
	messagesByType[f.Type].Inc()
	switch f.Type {
	case ocdaemon.ReqInit, ocdaemon.ProcInit:
		if f.Type == ocdaemon.ProcInit && len(f.Payload) == 0 {
			c.process(f)
			return true
		}
		if err := c.init.Decode(f.Payload); err != nil {
			return false
		}
		if string(c.init.PHPVersion) != c.rt.php || string(c.init.ZendVersion) != c.rt.zend {
			c.rt = runtimeInfo{php: toString(c.init.PHPVersion), zend: toString(c.init.ZendVersion)}
			c.res = nil
			if c.proc != nil && c.pid == f.PID && !c.proc.ended.Load() {
				c.proc.setRuntime(c.rt)
			}
		}
		c.process(f)
	case ocdaemon.ReqShutdown:
		// A request ended; the process and its state live on.
	case ocdaemon.ProcShutdown:
		if c.proc != nil && c.pid == f.PID {
			c.s.reg.end(c.proc)
			c.s.reg.detach(c.proc)
			c.proc = nil
		}
	case ocdaemon.MeasureCreate:
		if err := c.meas.Decode(f.Payload); err != nil {
			return false
		}
		if p := c.stats(f); p != nil {
			p.createMeasure(&c.meas)
		}
	case ocdaemon.ViewReportingPeriod:
		secs, err := ocdaemon.DecodeReportingPeriod(f.Payload)
		if err != nil {
			return false
		}
		d := time.Duration(secs * float64(time.Second))
		if math.IsNaN(secs) || secs < minReportingPeriod.Seconds() || secs > maxReportingPeriod.Seconds() {
			statsRejected[rejectInvalid].Inc()
			return true
		}
		if p := c.stats(f); p != nil {
			c.s.reg.setPeriod(p, d)
		}
	case ocdaemon.ViewRegister:
		if err := c.views.Decode(f.Payload); err != nil {
			return false
		}
		if p := c.stats(f); p != nil {
			p.registerViews(&c.views)
		}
	case ocdaemon.ViewUnregister:
		if err := c.names.Decode(f.Payload); err != nil {
			return false
		}
		if p := c.stats(f); p != nil {
			p.unregisterViews(&c.names)
		}
	case ocdaemon.StatsRecord:
		if err := c.rec.Decode(f.Payload); err != nil {
			return false
		}
		if p := c.stats(f); p != nil {
			c.key = p.record(&c.rec, f.UnixNano(), c.key)
		}
	case ocdaemon.TraceExport:
		return c.exportSpans(f.Payload, f.PID, f.TID) == nil
	}
	return true
}

// process returns the process of f's pid, attaching the connection to it (and detaching from a
// previous one) when needed. nil when the process limit is reached.
func (c *conn) process(f *ocdaemon.Frame) *process {
	if c.proc != nil && c.pid == f.PID && !c.proc.ended.Load() {
		return c.proc
	}
	if c.proc != nil {
		c.s.reg.detach(c.proc)
		c.proc = nil
	}
	c.pid = f.PID
	c.proc = c.s.reg.attach(f.PID, c.s.clock.Now(), c.s.limits)
	if c.proc != nil && c.rt != (runtimeInfo{}) {
		c.proc.setRuntime(c.rt)
	}
	return c.proc
}

// stats is process for messages that need stats state, counting when there is none.
func (c *conn) stats(f *ocdaemon.Frame) *process {
	p := c.process(f)
	if p == nil {
		statsRejected[rejectProcessLimit].Inc()
	}
	return p
}

// resource returns the resource of the spans of pid, cached across exports.
func (c *conn) resource(pid uint64) *resourcev1.Resource {
	if c.res == nil || c.resPID != pid {
		c.res, c.resPID = c.s.resource(pid, c.rt), pid
	}
	return c.res
}
