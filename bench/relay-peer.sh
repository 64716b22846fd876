#!/bin/sh
# A TCP relay as the peer of `otlpbench proxy` (-peer bench/relay-peer.sh): it listens where
# otlpbench tells a peer to (PEER_LISTEN) and relays every connection to the sink
# (PEER_TARGET) without reading the bytes, so the proxy command measures the floor of a hop on
# its own load. Extra arguments go to `otlpbench relay`, e.g. -peer-args "-buffer 65536" for
# the copying relay instead of splice(2). OTLPBENCH names the otlpbench binary (default
# bin/otlpbench).
exec "${OTLPBENCH:-bin/otlpbench}" relay -listen "$PEER_LISTEN" -target "$PEER_TARGET" "$@"
