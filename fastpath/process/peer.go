package process

import "net/netip"

// -resource.from-peer: the client's address as a Resource attribute, so that a gateway
// behind otlpgate that associates telemetry with its source by the connection (the Collector's
// k8sattributes, pod_association from: connection) can associate it by the attribute instead:
// behind a proxy every connection comes from the proxy.
//
// The address differs per request, so unlike -resource.set's attributes its KeyValue is not
// encoded once: AppendEntry writes the address's text into an array on its stack and the
// KeyValue around it as it writes the Resource, planned with the other edits.

// maxPeerKey bounds the attribute's key, so that Slack stays small.
const maxPeerKey = 256

// maxPeerText is room for the text of any IP address without a zone (IPv6 with an embedded
// IPv4 address is the longest, 45 bytes).
const maxPeerText = 48

// peerText writes the text of peer, an IPv4-mapped IPv6 address as IPv4 and without its zone,
// into buf and returns it; nil when peer names no client (invalid or unspecified: a unix
// socket's).
func peerText(buf *[maxPeerText]byte, peer netip.Addr) []byte {
	if !peer.IsValid() || peer.IsUnspecified() {
		return nil
	}
	return peer.Unmap().WithZone("").AppendTo(buf[:0])
}

// peerValueSize is the payload size of the AnyValue holding the string text.
func peerValueSize(text []byte) int { return fieldSize(len(text)) }

// peerKVSize is the size of the Resource's field-1 KeyValue holding key and text, tag and
// length included.
func peerKVSize(key string, text []byte) int {
	return fieldSize(fieldSize(len(key)) + fieldSize(peerValueSize(text)))
}

// appendPeerKV appends the Resource field-1 KeyValue of key and the string text.
func appendPeerKV(dst []byte, key string, text []byte) []byte {
	value := peerValueSize(text)
	dst = appendHeader(dst, 1, fieldSize(len(key))+fieldSize(value))
	dst = appendHeader(dst, 1, len(key))
	dst = append(dst, key...)
	dst = appendHeader(dst, 2, value)
	dst = appendHeader(dst, 1, len(text))
	return append(dst, text...)
}

// peerKVMax is the most a peer KeyValue of key takes.
func peerKVMax(key string) int {
	return fieldSize(fieldSize(len(key)) + fieldSize(fieldSize(maxPeerText)))
}

// emptyString reports whether the AnyValue v says nothing a reader could tell from a missing
// attribute: no value, or an empty string (the Collector's k8sattributes sets k8s.pod.ip over
// one as if it were absent).
func emptyString(v []byte) (bool, error) {
	if len(v) == 0 {
		return true, nil
	}
	s, ok, err := stringValue(v)
	return ok && len(s) == 0, err
}
