package bearer_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"

	"github.com/choreo-saga/choreo/pkg/bearer"
)

const (
	issuer   = "https://idp.test"
	audience = "choreo"
)

var discard = slog.New(slog.DiscardHandler)

// keys are the tests' private keys by name, made once: RSA keys are slow
// to make. Key generation from crypto/rand does not fail; if it did, the
// tests could not run at all, hence the panic.
var keys = sync.OnceValue(func() map[string]crypto.Signer {
	m := map[string]crypto.Signer{}
	add := func(name string, k crypto.Signer, err error) {
		if err != nil {
			panic(err)
		}
		m[name] = k
	}
	_, ed, err := ed25519.GenerateKey(rand.Reader)
	add("ed25519", ed, err)
	p256, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	add("p256", p256, err)
	p256b, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	add("p256b", p256b, err)
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	add("p384", p384, err)
	rsa2048, err := rsa.GenerateKey(rand.Reader, 2048)
	add("rsa2048", rsa2048, err)
	rsa1024, err := rsa.GenerateKey(rand.Reader, 1024)
	add("rsa1024", rsa1024, err)
	return m
})

// publicKeyFile writes the public half of keys()[name] as a PEM file.
func publicKeyFile(t *testing.T, name string) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(keys()[name].Public())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name+".pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// claims are a valid customer's, for an hour; edit changes them.
func claims(edit func(jwt.MapClaims)) jwt.MapClaims {
	now := time.Now()
	c := jwt.MapClaims{"iss": issuer, "aud": audience, "sub": "c-1", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	if edit != nil {
		edit(c)
	}
	return c
}

// sign signs c with method and key, under kid if not empty.
func sign(t *testing.T, method jwt.SigningMethod, key any, kid string, c jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, c)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestReadPublicKey: a key file names its one algorithm; RSA under 2048
// bits, ECDSA off P-256, a private key and what is not PEM are refused.
func TestReadPublicKey(t *testing.T) {
	tests := []struct {
		key     string
		wantAlg string
		wantErr string
	}{
		{"ed25519", "EdDSA", ""},
		{"p256", "ES256", ""},
		{"rsa2048", "RS256", ""},
		{"rsa1024", "", "RSA key of 1024 bits, want at least 2048"},
		{"p384", "", "ECDSA key on P-384, want P-256"},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			_, alg, err := bearer.ReadPublicKey(publicKeyFile(t, tt.key))
			if alg != tt.wantAlg || (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("ReadPublicKey = %q, %v; want %q, error %q", alg, err, tt.wantAlg, tt.wantErr)
			}
		})
	}
	t.Run("PrivateKey", func(t *testing.T) {
		der, err := x509.MarshalPKCS8PrivateKey(keys()["p256"])
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "private.pem")
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, _, err := bearer.ReadPublicKey(path); err == nil || !strings.Contains(err.Error(), `not a PEM "PUBLIC KEY"`) {
			t.Errorf("ReadPublicKey of a private key = %v, want refused", err)
		}
	})
}

// TestNewRefusesASmallRSAKey: a service configured with a weak key does
// not start.
func TestNewRefusesASmallRSAKey(t *testing.T) {
	cfg := bearer.Config{PublicKeyFile: publicKeyFile(t, "rsa1024"), Issuer: issuer, Audience: audience}
	if _, err := bearer.New(t.Context(), cfg, discard); err == nil || !strings.Contains(err.Error(), "AUTH_PUBLIC_KEY_FILE") {
		t.Fatalf("New with a 1024-bit RSA key = %v, want an error naming AUTH_PUBLIC_KEY_FILE", err)
	}
}

// TestVerifyWithKeyFile: a key file's service accepts tokens its key
// signed with its one algorithm and the right claims, and nothing else —
// not another key's, not another algorithm's (an HMAC keyed with the
// public key, none), not an expired or foreign token.
func TestVerifyWithKeyFile(t *testing.T) {
	k := keys()
	rsaPEM := func(t *testing.T) []byte {
		b, err := os.ReadFile(publicKeyFile(t, "rsa2048"))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tests := []struct {
		name    string
		keyFile string
		token   func(t *testing.T) string
		want    bearer.Caller
		wantErr string
	}{
		{"ES256", "p256", func(t *testing.T) string { return sign(t, jwt.SigningMethodES256, k["p256"], "", claims(nil)) },
			bearer.Caller{Subject: "c-1"}, ""},
		{"RS256", "rsa2048", func(t *testing.T) string { return sign(t, jwt.SigningMethodRS256, k["rsa2048"], "", claims(nil)) },
			bearer.Caller{Subject: "c-1"}, ""},
		{"EdDSA", "ed25519", func(t *testing.T) string { return sign(t, jwt.SigningMethodEdDSA, k["ed25519"], "", claims(nil)) },
			bearer.Caller{Subject: "c-1"}, ""},
		{"OperatorRole", "p256", func(t *testing.T) string {
			return sign(t, jwt.SigningMethodES256, k["p256"], "", claims(func(c jwt.MapClaims) { c["sub"], c["roles"] = "ops", []string{"viewer", bearer.RoleOperator} }))
		}, bearer.Caller{Subject: "ops", Operator: true}, ""},
		{"AnotherRoleIsNoOperator", "p256", func(t *testing.T) string {
			return sign(t, jwt.SigningMethodES256, k["p256"], "", claims(func(c jwt.MapClaims) { c["roles"] = []string{"admin"} }))
		}, bearer.Caller{Subject: "c-1"}, ""},
		{"AnotherES256Key", "p256", func(t *testing.T) string { return sign(t, jwt.SigningMethodES256, k["p256b"], "", claims(nil)) },
			bearer.Caller{}, "signature is invalid"},
		{"RS256ToAnES256Key", "p256", func(t *testing.T) string { return sign(t, jwt.SigningMethodRS256, k["rsa2048"], "", claims(nil)) },
			bearer.Caller{}, "signing method RS256 is invalid"},
		{"ES384ToAnES256Key", "p256", func(t *testing.T) string { return sign(t, jwt.SigningMethodES384, k["p384"], "", claims(nil)) },
			bearer.Caller{}, "signing method ES384 is invalid"},
		{"HS256KeyedWithThePublicKey", "rsa2048", func(t *testing.T) string { return sign(t, jwt.SigningMethodHS256, rsaPEM(t), "", claims(nil)) },
			bearer.Caller{}, "signing method HS256 is invalid"},
		{"AlgNone", "rsa2048", func(t *testing.T) string {
			return sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, "", claims(nil))
		}, bearer.Caller{}, "signing method none is invalid"},
		{"Expired", "p256", func(t *testing.T) string {
			return sign(t, jwt.SigningMethodES256, k["p256"], "", claims(func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-bearer.Leeway - time.Minute).Unix() }))
		}, bearer.Caller{}, "token is expired"},
		{"ExpiredWithinLeeway", "p256", func(t *testing.T) string {
			return sign(t, jwt.SigningMethodES256, k["p256"], "", claims(func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-bearer.Leeway / 2).Unix() }))
		}, bearer.Caller{Subject: "c-1"}, ""},
		{"NoExpiry", "p256", func(t *testing.T) string {
			return sign(t, jwt.SigningMethodES256, k["p256"], "", claims(func(c jwt.MapClaims) { delete(c, "exp") }))
		}, bearer.Caller{}, "token is missing required claim: exp"},
		{"IssuedInTheFuture", "p256", func(t *testing.T) string {
			return sign(t, jwt.SigningMethodES256, k["p256"], "", claims(func(c jwt.MapClaims) { c["iat"] = time.Now().Add(time.Hour).Unix() }))
		}, bearer.Caller{}, "token used before issued"},
		{"WrongIssuer", "p256", func(t *testing.T) string {
			return sign(t, jwt.SigningMethodES256, k["p256"], "", claims(func(c jwt.MapClaims) { c["iss"] = "https://other.test" }))
		}, bearer.Caller{}, "token has invalid issuer"},
		{"WrongAudience", "p256", func(t *testing.T) string {
			return sign(t, jwt.SigningMethodES256, k["p256"], "", claims(func(c jwt.MapClaims) { c["aud"] = []string{"billing"} }))
		}, bearer.Caller{}, "token has invalid audience"},
		{"SubjectNotAnID", "p256", func(t *testing.T) string {
			return sign(t, jwt.SigningMethodES256, k["p256"], "", claims(func(c jwt.MapClaims) { c["sub"] = "c 1" }))
		}, bearer.Caller{}, "sub must be"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := bearer.New(t.Context(), bearer.Config{PublicKeyFile: publicKeyFile(t, tt.keyFile), Issuer: issuer, Audience: audience}, discard)
			if err != nil {
				t.Fatal(err)
			}
			got, err := v.Verify(t.Context(), tt.token(t))
			if got != tt.want || (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("Verify = %+v, %v; want %+v, error %q", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// jwks is an identity provider's key set that a test rotates, counting
// how often it is fetched.
type jwks struct {
	keys    atomic.Pointer[[]byte]
	fetches atomic.Int64
}

// publish makes the set serve the public halves of keys()[kid] for each
// kid, each key under its name as kid.
func (s *jwks) publish(t *testing.T, kids ...string) {
	t.Helper()
	var set struct {
		Keys []jwkset.JWKMarshal `json:"keys"`
	}
	for _, kid := range kids {
		j, err := jwkset.NewJWKFromKey(keys()[kid].Public(), jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: kid, USE: jwkset.UseSig}})
		if err != nil {
			t.Fatal(err)
		}
		set.Keys = append(set.Keys, j.Marshal())
	}
	b, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	s.keys.Store(&b)
}

func (s *jwks) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	s.fetches.Add(1)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(*s.keys.Load())
}

// TestJWKSKeyRotation walks an identity provider through a key rotation,
// in order: a token of a key id the Verifier does not hold makes it fetch
// the set again, so a new key is accepted as soon as it is published and
// a retired one refused; within RefreshUnknownKey it fetches no more, so
// forged key ids cannot make it hammer the provider, and their tokens are
// refused at once. The algorithm stays the key's. A token accepted before
// its key was retired is refused after.
func TestJWKSKeyRotation(t *testing.T) {
	set := &jwks{}
	set.publish(t, "ed25519")
	srv := httptest.NewServer(set)
	t.Cleanup(srv.Close)
	v, err := bearer.New(t.Context(), bearer.Config{JWKSURL: srv.URL, Issuer: issuer, Audience: audience}, discard)
	if err != nil {
		t.Fatal(err)
	}
	k := keys()
	// The first key's token, accepted first and remembered (remember.go),
	// must be refused once that key leaves the set.
	first := sign(t, jwt.SigningMethodEdDSA, k["ed25519"], "ed25519", claims(nil))
	steps := []struct {
		name        string
		publish     []string // the set from this step on, if not nil
		token       string
		wantErr     string
		wantFetches int64
	}{
		{"FirstKey", nil, first, "", 1},
		{"NewKeyFetched", []string{"p256"}, sign(t, jwt.SigningMethodES256, k["p256"], "p256", claims(nil)), "", 2},
		{"RetiredKeyRefused", nil, first, "could not read JWK", 2},
		{"NoRefreshWithinTheLimit", []string{"p256", "rsa2048"}, sign(t, jwt.SigningMethodRS256, k["rsa2048"], "rsa2048", claims(nil)), "could not read JWK", 2},
		{"ForgedUnderAKnownKid", nil, sign(t, jwt.SigningMethodES256, k["p256b"], "p256", claims(nil)), "signature is invalid", 2},
		{"HS256KeyedWithAPublishedKey", nil, sign(t, jwt.SigningMethodHS256, []byte(*set.keys.Load()), "p256", claims(nil)), "signing method HS256 is invalid", 2},
		{"AnotherAlgorithmForTheKey", nil, sign(t, jwt.SigningMethodES384, k["p384"], "p256", claims(nil)), "signing method ES384 is invalid", 2},
	}
	for _, st := range steps {
		if !t.Run(st.name, func(t *testing.T) {
			if st.publish != nil {
				set.publish(t, st.publish...)
			}
			start := time.Now()
			got, err := v.Verify(t.Context(), st.token)
			if (err == nil) != (st.wantErr == "") || (err != nil && !strings.Contains(err.Error(), st.wantErr)) {
				t.Errorf("Verify = %+v, %v; want error %q", got, err, st.wantErr)
			}
			if err == nil && got != (bearer.Caller{Subject: "c-1"}) {
				t.Errorf("Verify = %+v, want customer c-1", got)
			}
			if n := set.fetches.Load(); n != st.wantFetches {
				t.Errorf("the set was fetched %d times, want %d", n, st.wantFetches)
			}
			if d := time.Since(start); d > 500*time.Millisecond {
				t.Errorf("Verify took %s: a refused token must not wait for the next refresh", d)
			}
		}) {
			t.FailNow() // the later steps build on this one
		}
	}
}
