package testenv

import (
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/choreo-saga/choreo/internal/devkey"
	"github.com/choreo-saga/choreo/pkg/bearer"
)

// Tokens issues the tokens of a test's callers, signed with a key pair
// of their own; the services under test verify them with Auth.
type Tokens struct{ key devkey.Key }

// Keys returns a token issuer whose key pair is in t's temporary
// directory, failing t if it cannot be made.
func Keys(t testing.TB) Tokens {
	t.Helper()
	k, err := NewTokens(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// NewTokens returns a token issuer whose key pair is in dir, made if
// there is none: for a TestMain, which has no t.
func NewTokens(dir string) (Tokens, error) {
	k, err := devkey.Open(dir)
	return Tokens{key: k}, err
}

// Key is the key pair the tokens are signed with.
func (k Tokens) Key() devkey.Key { return k.key }

// Auth is the services' configuration that accepts these tokens.
func (k Tokens) Auth() bearer.Config { return k.key.Auth() }

// Env is Auth as environment variables, for a service run as a process.
func (k Tokens) Env() []string { return k.key.Env() }

// Customer returns a token of customer id, good for an hour.
func (k Tokens) Customer(t testing.TB, id string) string {
	t.Helper()
	return k.token(t, id, false)
}

// Operator returns an operator's token, good for an hour.
func (k Tokens) Operator(t testing.TB) string {
	t.Helper()
	return k.token(t, "test-operator", true)
}

// Expired returns a token of sub, an operator's if operator, that expired
// a minute past the verifier's leeway.
func (k Tokens) Expired(t testing.TB, sub string, operator bool) string {
	t.Helper()
	tok, err := k.key.Token(sub, operator, -bearer.Leeway-time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func (k Tokens) token(t testing.TB, sub string, operator bool) string {
	t.Helper()
	tok, err := k.key.Token(sub, operator, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// Bearer returns the Authorization header of token.
func Bearer(token string) http.Header {
	return http.Header{"Authorization": {"Bearer " + token}}
}

// As returns h serving every request as caller's, as a router behind
// bearer.Authenticate sees it: for tests of a router alone that are not
// about who may call it.
func As(caller bearer.Caller, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(bearer.WithCaller(r.Context(), caller)))
	})
}

// Operator is a caller with the operator role, for As.
var Operator = bearer.Caller{Subject: "test-operator", Operator: true}

// Sign returns tok signed with the issuer's key, claims as they are: a
// token of another issuer or audience, or without an expiry.
func (k Tokens) Sign(t testing.TB, tok bearer.Token) string {
	t.Helper()
	s, err := k.key.Sign(tok)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// PublicKeyPEM returns the public key file's bytes, which an attacker may
// know: the HMAC secret of an algorithm-confusion forgery.
func (k Tokens) PublicKeyPEM(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(k.key.PublicKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
