package bearer

import (
	"context"
	"crypto"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/hashicorp/golang-lru/v2/expirable"
)

// A client sends the same token on every request until it expires, and a
// signature check is the edge's dearest step (Ed25519 verification was 15%
// of the order service's CPU under scripts/perf.sh). So a Verifier
// remembers the tokens it accepted and, while one stays remembered, checks
// only what may have changed since: the clock against the token's expiry,
// and that the key which verified it is still the key its kid names, so a
// key withdrawn from the JWKS is refused from its next refresh, as before.
// BenchmarkVerify shows the difference; TestVerifierRemembers the limits.

// RememberFor bounds how long an accepted token is taken without a second
// signature check.
const RememberFor = time.Minute

// rememberTokens bounds how many accepted tokens are held, and
// rememberBytes how long one may be (so at most ~40 MiB); only tokens that
// verified are held, so a stranger cannot fill it.
const (
	rememberTokens = 10_000
	rememberBytes  = 4 << 10
)

// accepted is a token that verified: who it names, until when it may be
// taken again, and the header and key that verified it.
type accepted struct {
	caller Caller
	until  time.Time
	header map[string]any
	key    any
}

func newRemembered() *expirable.LRU[string, accepted] {
	return expirable.NewLRU[string, accepted](rememberTokens, nil, RememberFor)
}

// recall returns the caller of a token accepted before, if it is still
// before the token's expiry and the key its header names is the one that
// verified it.
func (v *Verifier) recall(ctx context.Context, token string) (Caller, bool) {
	a, ok := v.remembered.Get(token)
	if !ok {
		return Caller{}, false
	}
	key, err := v.key(ctx)(&jwt.Token{Header: a.header})
	same, _ := key.(interface{ Equal(crypto.PublicKey) bool })
	if !v.now().Before(a.until) || err != nil || same == nil || !same.Equal(a.key) {
		v.remembered.Remove(token)
		return Caller{}, false
	}
	return a.caller, true
}

// remember holds token, verified by key, for recall until its expiry or
// for RememberFor, whichever comes first.
func (v *Verifier) remember(token string, t *jwt.Token, key any, c Caller, exp time.Time) {
	// A key recall cannot compare would never be recalled: hold nothing.
	if _, ok := key.(interface{ Equal(crypto.PublicKey) bool }); !ok || len(token) > rememberBytes {
		return
	}
	until := v.now().Add(RememberFor)
	if exp.Before(until) {
		until = exp
	}
	v.remembered.Add(token, accepted{caller: c, until: until, header: t.Header, key: key})
}
