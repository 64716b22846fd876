package process

import (
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/fastpath"
)

// countItems counts the spans, data points or log records of the resource entry e as a
// decoder sees them (and as fastpath's scan counts them): of the members of a Metric's data
// oneof only the last run of one member counts. It is used only for what a step removes
// whole, to count it.
func countItems(sig fastpath.Signal, e []byte) (int, error) {
	n := 0
	err := eachBytes(e, 2, func(scope []byte) error {
		return eachBytes(scope, 2, func(item []byte) error {
			if sig != fastpath.Metrics {
				n++
				return nil
			}
			p, err := metricPoints(item)
			n += p
			return err
		})
	})
	return n, err
}

// metricPoints counts the data points of one Metric.
func metricPoints(m []byte) (int, error) {
	member, points := protowire.Number(0), 0
	for off := 0; off < len(m); {
		f, err := next(m, off)
		if err != nil {
			return 0, err
		}
		off = f.end
		switch f.num {
		case 5, 7, 9, 10, 11: // gauge, sum, histogram, exponential_histogram, summary
			if f.typ != protowire.BytesType {
				return 0, errMalformed
			}
			if f.num != member {
				// Another member of the oneof replaces what came before it.
				member, points = f.num, 0
			}
			err := eachBytes(m[f.val:f.end], 1, func([]byte) error {
				points++
				return nil
			})
			if err != nil {
				return 0, err
			}
		}
	}
	return points, nil
}

// eachBytes calls fn with the payload of every field num of the message m, which must be
// length-delimited.
func eachBytes(m []byte, num protowire.Number, fn func([]byte) error) error {
	for off := 0; off < len(m); {
		f, err := next(m, off)
		if err != nil {
			return err
		}
		off = f.end
		if f.num != num {
			continue
		}
		if f.typ != protowire.BytesType {
			return errMalformed
		}
		if err := fn(m[f.val:f.end]); err != nil {
			return err
		}
	}
	return nil
}
