package tenant

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Tenants bound to credentials (-auth.tenants-file). A tenant header is a claim anyone can
// make: one client may send another's value, or a new value per request. With credentials, a
// request's tenant is the one its bearer token is bound to, never what its headers say; a
// request without a known token is refused, and one whose tenant headers name another tenant
// than its token's is refused too, so that a misconfigured client learns of it instead of
// having its data filed under a tenant it did not mean. A header left out, or sent empty,
// claims nothing.
//
// Tokens are found by their SHA-256, so that no comparison takes longer for a guess that
// shares more of a real token's bytes. The
// token set is replaced whole on a reload (SetCredentials); a request that found a token before
// a reload goes on with its tenant, one after it sees the new set.

// Errors of Table.LookupCredential.
var (
	// ErrCredential refuses a request without a bearer token the tokens file holds.
	ErrCredential = errors.New("fastpath: missing or unknown bearer token (-auth.tenants-file)")
	// ErrClaim refuses a request whose tenant headers disagree with its token's tenant.
	ErrClaim = errors.New("fastpath: the tenant headers do not match the bearer token's tenant (-auth.tenants-file)")
)

var (
	tenantRefusedCredential = tenantRefused.WithLabelValues("credential")
	tenantRefusedClaim      = tenantRefused.WithLabelValues("claim_mismatch")
	tenantCredentials       = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "otlpgate_tenant_credentials",
		Help: "Bearer tokens of -auth.tenants-file in force, each bound to a tenant (re-read on SIGHUP).",
	})
)

// maxTokenBytes bounds a token the intakes look up; a longer one is unknown. Tokens are
// copied to the stack to be hashed.
const maxTokenBytes = 1024

// Credential binds a bearer token to a tenant.
type Credential struct {
	Token  string
	Values []string // the tenant's value of each header, in the order of Table.Headers
}

// credential is a Credential as the table keeps it.
type credential struct {
	token [sha256.Size]byte
	key   []byte   // the tenant's Key bytes
	vals  []string // by header index
}

// credentials is a token set, replaced whole.
type credentials struct {
	byHash map[[sha256.Size]byte]*credential
}

// ParseCredentialTenant reads the tenant part of a tokens file line: with one tenant header,
// the value itself (which may hold any printable ASCII, spaces and '=' included); with
// several, NAME=VALUE pairs separated by ',', where a header left out has the default value.
func (ts *Table) ParseCredentialTenant(s string) ([]string, error) {
	hs := ts.cfg.Headers
	vals := make([]string, len(hs))
	s = strings.TrimSpace(s)
	if len(hs) == 1 {
		vals[0] = s
	} else {
		seen := make([]bool, len(hs))
		for pair := range strings.SplitSeq(s, ",") {
			name, v, ok := strings.Cut(pair, "=")
			name = strings.ToLower(strings.TrimSpace(name))
			i := -1
			for j, h := range hs {
				if h == name {
					i = j
				}
			}
			switch {
			case !ok:
				return nil, fmt.Errorf("want NAME=VALUE pairs separated by ',' (-intake.headers names %d headers), got %q", len(hs), pair)
			case i < 0:
				return nil, fmt.Errorf("%q is not one of -intake.headers (%s)", name, strings.Join(hs, ","))
			case seen[i]:
				return nil, fmt.Errorf("%q named twice", name)
			}
			seen[i] = true
			vals[i] = strings.TrimSpace(v)
		}
	}
	for i, v := range vals {
		if v == "" {
			vals[i] = ts.cfg.Default
		}
		if !validTenantValue(vals[i]) {
			return nil, fmt.Errorf("value %q: longer than %d bytes or not printable ASCII", vals[i], MaxValue)
		}
	}
	return vals, nil
}

// SetCredentials binds requests to tenants by their bearer tokens from now on, replacing the
// tokens set before: LookupCredential then knows only these. A token named twice, an empty
// token or one longer than 1 KiB, and values that do not make a tenant are refused, and the
// set in force stays. Safe for concurrent use.
func (ts *Table) SetCredentials(creds []Credential) error {
	set := &credentials{byHash: make(map[[sha256.Size]byte]*credential, len(creds))}
	for i, c := range creds {
		if c.Token == "" || len(c.Token) > maxTokenBytes || strings.ContainsAny(c.Token, " \t\r\n") {
			return fmt.Errorf("fastpath: credential %d: a token is 1 to %d bytes without white space", i+1, maxTokenBytes)
		}
		if len(c.Values) != len(ts.cfg.Headers) {
			return fmt.Errorf("fastpath: credential %d: %d values for %d tenant headers", i+1, len(c.Values), len(ts.cfg.Headers))
		}
		var k Key
		for _, v := range c.Values {
			ts.AddString(&k, v)
		}
		if k.bad {
			return fmt.Errorf("fastpath: credential %d: a value is longer than %d bytes or not printable ASCII", i+1, MaxValue)
		}
		cr := &credential{token: sha256.Sum256([]byte(c.Token)), key: append([]byte(nil), k.b[:k.n]...)}
		for b := cr.key; len(b) > 0; b = b[1+int(b[0]):] {
			cr.vals = append(cr.vals, string(b[1:1+int(b[0])]))
		}
		if _, dup := set.byHash[cr.token]; dup {
			return fmt.Errorf("fastpath: credential %d: the token is named twice", i+1)
		}
		set.byHash[cr.token] = cr
	}
	ts.creds.Store(set)
	tenantCredentials.Set(float64(len(set.byHash)))
	return nil
}

// Bound reports whether requests are bound to tenants by their credentials (SetCredentials
// was called): the intakes then look tenants up with LookupCredential. Safe for concurrent
// use.
func (ts *Table) Bound() bool { return ts.creds.Load() != nil }

// AddClaim appends a request's value of the next header to k as a claim for
// LookupCredential: empty (the header is missing or empty) claims nothing. Safe for
// concurrent use on distinct keys.
func (ts *Table) AddClaim(k *Key, v []byte) { addClaim(k, v) }

// AddClaimString is AddClaim for a value held in a string.
func (ts *Table) AddClaimString(k *Key, v string) { addClaim(k, v) }

func addClaim[T string | []byte](k *Key, v T) {
	if !validTenantValue(v) || k.n+1+len(v) > len(k.b) {
		k.bad = true
		return
	}
	k.b[k.n] = byte(len(v))
	k.n += 1 + copy(k.b[k.n+1:], v)
}

// LookupCredential returns the tenant bound to the bearer token of auth, an Authorization
// value ("Bearer <token>"), interned whatever the table's bounds. It refuses a request
// without a known token (ErrCredential), one whose claim (AddClaim's values of the headers)
// names another value of a header than the token's tenant has, or a bad value
// (ErrClaim), and a tenant no destination takes (ErrNoRoute), each counted in
// otlpgate_tenant_refused_requests_total. A known tenant costs a SHA-256 of the token, an
// index lookup and no allocation. Safe for concurrent use.
func (ts *Table) LookupCredential(auth []byte, claim *Key) (*Tenant, error) {
	return ts.lookupCredential(credentialOf(ts.creds.Load(), auth), claim)
}

// LookupCredentialString is LookupCredential for an Authorization value held in a string.
func (ts *Table) LookupCredentialString(auth string, claim *Key) (*Tenant, error) {
	return ts.lookupCredential(credentialOf(ts.creds.Load(), auth), claim)
}

func (ts *Table) lookupCredential(cr *credential, claim *Key) (*Tenant, error) {
	if cr == nil {
		tenantRefusedCredential.Inc()
		return nil, ErrCredential
	}
	if claim.bad {
		tenantRefusedClaim.Inc()
		return nil, ErrClaim
	}
	b := claim.b[:claim.n]
	for i := 0; len(b) > 0; i++ {
		n := int(b[0])
		if n > 0 && (i >= len(cr.vals) || string(b[1:1+n]) != cr.vals[i]) {
			tenantRefusedClaim.Inc()
			return nil, ErrClaim
		}
		b = b[1+n:]
	}
	return ts.lookupKey(cr.key, netip.Addr{}, true)
}

// credentialOf finds the credential of the Authorization value auth in set, nil when there is
// none.
func credentialOf[T string | []byte](set *credentials, auth T) *credential {
	if set == nil {
		return nil
	}
	const scheme = "bearer "
	if len(auth) <= len(scheme) {
		return nil
	}
	for i := range len(scheme) - 1 { // the scheme's name is case-insensitive
		if auth[i]|0x20 != scheme[i] {
			return nil
		}
	}
	if auth[len(scheme)-1] != ' ' {
		return nil
	}
	tok := auth[len(scheme):]
	for len(tok) > 0 && (tok[0] == ' ' || tok[0] == '\t') {
		tok = tok[1:]
	}
	for len(tok) > 0 && (tok[len(tok)-1] == ' ' || tok[len(tok)-1] == '\t') {
		tok = tok[:len(tok)-1]
	}
	if len(tok) == 0 || len(tok) > maxTokenBytes {
		return nil
	}
	var buf [maxTokenBytes]byte
	return set.byHash[sha256.Sum256(buf[:copy(buf[:], tok)])]
}
