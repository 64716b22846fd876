package client

import "sync/atomic"

// An upstream that refuses every batch (a compression it cannot read, a wrong token, an
// unknown service) drops everything it is sent: the counters say how much, and the log must say
// why, without a line per request. A destination logs the first refusal at once, then at most
// one a second, each line with the upstream's message and how much was refused since the line
// before.

// rejectLog is a destination's rate limit on its refusal lines.
type rejectLog struct {
	line            everySecond
	requests, items atomic.Int64 // refused since the latest line
}

// reject drops r, which the upstream refused for good with cause (its status, or
// errRejectedResult), and logs the refusal within the rate limit. Safe for concurrent use.
// The line is written before the drop is reported, so whoever sees the request fail can also
// find the line that says why.
func (d *Dest) reject(r *request, cause error) {
	l := &d.rejects
	l.requests.Add(1)
	l.items.Add(int64(r.items))
	if l.line.allow() {
		n, m := l.requests.Swap(0), l.items.Swap(0)
		// requests and items: refused since the line before (this one's included).
		d.log.Warn("upstream rejected a batch", "signal", r.sig.String(), "message", d.upstreamMessage(cause),
			"requests", n, "items", m)
	}
	d.drop(r, DropRejected)
}
