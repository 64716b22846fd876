package main

import (
	"fmt"
	"syscall"
)

// descriptorReserve is what otlpgate needs besides its intake connections: listeners, upstream
// connections, spool segments and cursors, the file destination, the admin listener's clients.
const descriptorReserve = 256

// descriptorDemand is the number of file descriptors the intakes' connection caps allow, plus
// descriptorReserve. Only enabled intakes count.
func descriptorDemand(cfg *config) uint64 {
	n := uint64(descriptorReserve)
	if cfg.grpc.Listen != "" {
		n += uint64(cfg.grpc.MaxConnections)
	}
	if cfg.http.Listen != "" {
		n += uint64(cfg.http.MaxConnections)
	}
	if cfg.kafka.Listen != "" {
		n += uint64(cfg.kafka.MaxConnections)
	}
	if cfg.uds.Listen != "" {
		n += uint64(cfg.uds.MaxConnections)
	}
	return n
}

// descriptorWarning returns a warning when the connection caps add up to more descriptors than
// the limit allows, or "" when they fit. Past the limit, accept(2) fails for every intake alike
// and the spool cannot open its next segment, so the caps would not be what bounds clients.
func descriptorWarning(cfg *config, limit uint64) string {
	need := descriptorDemand(cfg)
	if need <= limit {
		return ""
	}
	return fmt.Sprintf("the intakes' connection caps (-grpc/-http/-kafka/-uds.max-connections) and otlpgate's own files need up to %d file descriptors, but the limit (RLIMIT_NOFILE) is %d: raise it (systemd LimitNOFILE=, ulimit -n) or lower the caps, or a flood of connections can exhaust descriptors before any cap refuses it", need, limit)
}

// descriptorLimit returns the process's soft descriptor limit (the Go runtime has already raised
// it to the hard limit at start), or 0 if it cannot be read.
func descriptorLimit() uint64 {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0
	}
	return r.Cur
}
