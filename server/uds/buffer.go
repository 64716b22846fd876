package uds

import "sync"

const (
	bodyInitCap = 64 << 10
	// bodyMaxPooled keeps the buffers of rare huge exports out of the pool.
	bodyMaxPooled = 4 << 20
)

// bodyPool holds the buffers OTLP request bodies are marshalled into before Consume copies them.
var bodyPool = sync.Pool{New: func() any {
	b := make([]byte, 0, bodyInitCap)
	return &b
}}

// getBody returns a pooled buffer of length n.
func getBody(n int) *[]byte {
	p := bodyPool.Get().(*[]byte)
	if cap(*p) < n {
		*p = make([]byte, n, max(n, bodyInitCap))
	}
	*p = (*p)[:n]
	return p
}

func putBody(p *[]byte) {
	if cap(*p) > bodyMaxPooled {
		return
	}
	*p = (*p)[:0]
	bodyPool.Put(p)
}
