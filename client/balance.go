package client

import (
	"fmt"

	"github.com/otlpgate/otlpgate/fastpath"
)

// balances names each key a balanced destination may split its batches by (-dest balance=):
// the splitter knows the keys, the destination their names.
var balances = [...]struct {
	name string
	key  fastpath.SplitKey
}{
	{"trace_id", fastpath.SplitTraceID},
	{"service", fastpath.SplitService},
	{"resource", fastpath.SplitResource},
}

// parseBalance reads a balance name (trace_id, service, resource).
func parseBalance(s string) (fastpath.SplitKey, error) {
	for _, b := range balances {
		if b.name == s {
			return b.key, nil
		}
	}
	return 0, fmt.Errorf("client: balance %q (want trace_id, service or resource)", s)
}
