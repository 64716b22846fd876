package uds

import "github.com/otlpgate/otlpgate/pool"

// getBody returns a buffer of length n from pool/ for an OTLP request body to be marshalled
// into before Consume copies it. Return it with putBody.
func getBody(n int) *[]byte {
	p := pool.GetBytes(n)
	*p = (*p)[:n]
	return p
}

// putBody gives a buffer from getBody back to pool/ (which drops the rare huge ones).
func putBody(p *[]byte) { pool.PutBytes(p) }
