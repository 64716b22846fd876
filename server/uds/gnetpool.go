package uds

import "github.com/panjf2000/gnet/v2/pkg/pool/goroutine"

// gnet starts a worker pool (ants) when it loads, for its client's Dial and Enroll only, which
// otlpgate does not use: the event loops of gnet.Run never submit to it. The pool's clock and
// its purge of idle workers tick twice a second for the life of the process, which is most of
// what wakes an idle otlpgate. Released, the pool stops them; a Submit would then fail at once
// with ants' ErrPoolClosed rather than wait.
func init() { goroutine.DefaultWorkerPool.Release() }
